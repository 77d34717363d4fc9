"""A data directory's store is picked in one line (storage/data_store.py: STORE).

A store written for it (here: sessions kept in this process, by data directory) is
used by every command once named there; what needs the SQLite store's own tables
(``rolecall batch``) says so instead of failing deep inside.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import pytest

from rolecall.cli import main as cli_main
from rolecall.storage import data_store
from rolecall.storage.in_memory import InMemoryStore

WORLD = """\
name: duo
model: scripted
roles:
  - {id: a, script: ["a says {n}"]}
  - {id: b, script: ["b says {n}"]}
flow:
  steps:
    - {id: one, speaker: a}
    - {id: two, speaker: b}
"""


class ProcessStore(InMemoryStore):
    """Sessions kept in this process, one store per data directory."""

    opened: ClassVar[dict[Path, ProcessStore]] = {}

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, read_only: bool = False) -> ProcessStore:
        return cls.opened.setdefault(data_dir, cls())

    @classmethod
    def exists_in(cls, data_dir: Path) -> bool:
        return data_dir in cls.opened

    async def resolve_id(self, text: str) -> str:
        return text

    async def forks(self) -> dict[str, tuple[str, str]]:
        return {}


@pytest.fixture
def process_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(data_store, "STORE", ProcessStore)
    ProcessStore.opened.clear()


def test_every_command_uses_the_store_named_in_one_line(
    process_store: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "duo").mkdir()
    (tmp_path / "duo" / "world.yaml").write_text(WORLD, encoding="utf-8")
    data = tmp_path / "data"
    assert cli_main.main(["run", str(tmp_path / "duo"), "--data-dir", str(data), "-q"]) == 0
    store = ProcessStore.opened[data]
    (sid,) = store._sessions
    doc = store._sessions[sid]
    assert doc.state == "finished"
    assert not (data / "rolecall.db").exists()  # nothing went to SQLite
    capsys.readouterr()
    assert cli_main.main(["sessions", "show", sid, "--data-dir", str(data)]) == 0
    shown = capsys.readouterr().out
    assert "a says 1" in shown and "b says 1" in shown
    code = cli_main.main(["batch", str(tmp_path / "duo"), "--runs", "1", "--data-dir", str(data)])
    assert code == 2
    assert "rolecall batch needs the SQLite store" in capsys.readouterr().err
