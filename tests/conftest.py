from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private data directory (ROLECALL_HOME) so no test touches the user's."""
    home = tmp_path / "home"
    monkeypatch.setenv("ROLECALL_HOME", str(home))
    return home
