from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Cli, write_net_guard


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    """``rolecall`` subprocesses with their own data directory, kept on the loopback."""
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == [], "a subprocess tried to leave the loopback"
