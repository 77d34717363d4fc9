"""`/whisper` in the REPL on a real terminal (docs/audiences.md): the message goes to the
agents named, their replies are marked private on their header lines, and the agent left
out never receives it (its memory file)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable

import pytest

from tests.repl.test_tmux import TMUX, Terminal, stored, terminal

__all__ = ["terminal"]  # the fixture
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not on PATH")

MARKER = "zanzibar"


def test_whisper_in_the_repl_reaches_only_the_agents_named(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel")
    screen = t.ready()
    t.type("/whisper @eve psst")
    t.key("Enter")
    t.wait_for("/whisper: no agent @eve")
    t.type(f"/whisper @planner @ecologist the code word is {MARKER}")
    t.key("Enter")
    screen = t.wait_for(lambda s: "(whispered: to planner, ecologist only)" in s)
    screen = t.wait_for(
        lambda s: s.count("(to planner, ecologist only)") >= 2 and s.count("  ↑") >= 2
    )
    assert "planner → human" in screen and "ecologist → human" in screen
    t.key("C-d")
    t.wait_for("EXIT=0")
    ((sid, _, _),) = stored(t.home)
    with sqlite3.connect(t.home / "rolecall.db") as db:
        rows = [json.loads(b) for (b,) in db.execute("SELECT body FROM messages ORDER BY idx")]
    assert [m.get("audience") for m in rows] == [["planner", "ecologist"]] * 3
    folder = t.home / "memory" / sid
    for left_out in ("economist", "historian"):  # nothing was said to them at all
        path = folder / f"{left_out}.jsonl"
        assert not path.exists() or MARKER not in path.read_text("utf-8")
    assert MARKER in (folder / "planner.jsonl").read_text("utf-8")
