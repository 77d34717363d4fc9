"""``rolecall batch`` on a real terminal (tmux): the progress bar, Ctrl-C, the summary."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Callable
from contextlib import closing
from pathlib import Path

from tests.batch.test_batch_cli import scripted_world
from tests.repl.test_tmux import Terminal, pytestmark, terminal

__all__ = ["pytestmark", "terminal"]


def test_the_bar_counts_runs_ctrl_c_pauses_and_resume_finishes(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    world = scripted_world(tmp_path)
    first = terminal()
    # paced words: a run takes about a second, so Ctrl-C finds runs in flight
    first.start(
        "batch", str(world), "--vary", "topic=x,y,z", "--runs", "2", "--concurrency", "2",
        "--name", "tty", env={"ROLECALL_STREAM_DELAY": "0.1"},
    )  # fmt: skip
    # the title says the runs in flight at once, before any has ended
    first.wait_for("batch tty · 2 running · no failure · tokens ↑")
    screen = first.wait_for(lambda s: re.search(r"runs .*\]\s+[1-9]/\s*6", s) is not None)
    assert "running · no failure · tokens ↑" in screen
    first.key("C-c")
    screen = first.wait_for("EXIT=")
    assert "EXIT=130" in screen
    assert "`rolecall batch --resume tty` finishes the batch" in screen
    done = int(re.search(r"batch tty: (\d)/6 runs finished", screen).group(1))  # type: ignore[union-attr]
    assert 1 <= done < 6

    second = terminal()
    second.start("batch", "--resume", "tty")
    screen = second.wait_for("EXIT=")
    assert "EXIT=0" in screen, screen
    assert f"resuming {6 - done} of 6 runs" in screen
    assert "batch tty: 6/6 runs finished" in screen
    assert re.search(r"flow_end\s+6", screen)
    with closing(sqlite3.connect(first.home / "rolecall.db")) as db:
        bodies = db.execute(
            "SELECT m.session_id, m.body FROM messages m JOIN batch_runs r "
            "ON r.session_id = m.session_id WHERE r.batch = 'tty' ORDER BY m.session_id, m.idx"
        ).fetchall()
    said: dict[str, list[tuple[str, str]]] = {}
    for sid, body in bodies:
        message = json.loads(body)
        said.setdefault(sid, []).append((message["id"], message["content"]))
    assert len(said) == 6  # every run once, each said everything exactly once
    for messages in said.values():
        assert messages == [("m1", "a says 1"), ("m2", "b says 1"), ("m3", "a says 2")]
