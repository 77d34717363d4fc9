"""Going back to a session from a terminal: the hints printed are pasted as printed."""

from __future__ import annotations

import re
import shlex
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.repl.test_tmux import TMUX, Terminal, flat, stored, terminal, toolbar

__all__ = ["terminal"]  # the fixture
pytestmark = pytest.mark.skipif(TMUX is None, reason="tmux is not on PATH")


def test_resume_reopens_the_repl_in_step_mode_with_the_data_dir_of_the_hint(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    data = tmp_path / "elsewhere"  # not ROLECALL_HOME: the hint must name it
    t = terminal()
    t.start("classroom", "--mode", "step", "--data-dir", str(data))
    t.ready()
    t.key("Enter")  # one turn
    t.wait_for(lambda s: "teacher [step intro]" in s and "  ↑" in s)
    t.key("C-d")
    screen = t.wait_for("EXIT=0")
    # a command too wide for the line with the notice gets a line of its own, whole
    hint = re.search(r"continue it with:\s+(rolecall resume .*)", screen)
    assert hint is not None, screen
    words = shlex.split(hint.group(1))
    assert words[1:] == ["resume", words[2], "--data-dir", str(data)]
    ((sid, state, reason),) = stored(data)
    assert (words[2], state, reason) == (sid, "paused", "quit")
    assert not (t.home / "rolecall.db").exists()

    again = terminal()
    again.start(*words[1:])  # `rolecall resume ID --data-dir D`, as printed
    screen = again.ready()  # the REPL, not the plain `run` display
    assert f"session {sid}: " in screen
    again.wait_for(lambda s: "step " in toolbar(s))  # step mode: the next step is shown
    again.key("Enter")  # an empty line runs one turn, and only one
    again.wait_for(lambda s: "[step ask] ↩ m1 " in s and "  ↑" in s)  # ↩: what it answers
    again.key("C-d")
    again.wait_for("EXIT=0")
    with sqlite3.connect(data / "rolecall.db") as db:
        (count,) = db.execute("SELECT COUNT(*) FROM messages").fetchone()
    assert count == 2  # the flow did not run on by itself (auto mode would finish it)


def test_run_step_mode_on_a_terminal_says_what_keys_do(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    t = terminal()
    t.start("run", "tutoring", "--mode", "step")
    t.wait_for("[Enter] next turn")
    t.key("Up")  # an arrow prints nothing
    t.type("x")  # typed text runs nothing, and says what the keys do
    screen = t.wait_for("typed text is not sent")
    assert "^[[A" not in screen and "tutor [step intro]" not in screen
    t.key("Enter")
    t.wait_for("tutor [step intro]")
    t.key("C-d")
    screen = t.wait_for("EXIT=0")
    assert "continue it with: rolecall resume " in screen
    ((_, state, reason),) = stored(t.home)
    assert (state, reason) == ("paused", "end_of_input")


def test_load_completes_stored_ids_and_json_files_and_an_empty_session_is_not_kept(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    t = terminal()
    t.start("worlds/panel")
    t.ready()
    t.type("@planner which trees shade streets best?")
    t.key("Enter")
    t.wait_for(lambda s: "planner → human" in s and "  ↑" in s)
    t.key("C-d")
    t.wait_for("EXIT=0")
    ((kept, _, _),) = stored(t.home)

    again = terminal()
    again.start("worlds/panel")
    again.ready()
    again.type("/load ")
    screen = again.wait_for("which trees shade streets")  # the menu: id and what about
    assert kept in screen
    assert "pyproject.toml" not in screen and "README.md" not in screen  # .json only
    again.key("Escape")
    again.key("C-u")
    again.key("C-d")  # nothing was said in this one
    screen = again.wait_for("EXIT=0")
    assert "nothing was said: the session is not kept" in screen
    assert "rolecall resume" not in screen
    assert [sid for sid, _, _ in stored(t.home)] == [kept]


def test_run_on_a_terminal_wraps_words_at_its_width(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("run", "classroom")
    screen = t.wait_for("EXIT=0", timeout=40)
    # capture-pane -J joins what the terminal wrapped: a line wider than the terminal
    # was split by the terminal, mid-word, instead of by rolecall between words
    text = screen[: screen.index("stopped:")]
    assert max(len(line) for line in text.splitlines()) < 120


def test_load_of_a_file_whose_session_is_stored_goes_on_from_the_stored_copy(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    """/load FILE of a session this data directory holds is what `rolecall resume FILE`
    does: the stored copy goes on (it was once imported again over itself, and the next
    turn failed on its events' seqs, that turn's message lost)."""
    saved = tmp_path / "q.json"
    t = terminal()
    t.start("worlds/tutoring")
    t.ready()
    t.type("/next")
    t.key("Enter")
    t.wait_for(lambda s: "tutor [step intro]" in s and "  ↑" in s)
    t.type(f"/save {saved}")
    t.key("Enter")
    t.wait_for(f"saved 1 message to {saved}")
    t.key("C-d")
    t.wait_for("EXIT=0")
    ((sid, _, _),) = stored(t.home)

    again = terminal()
    again.start("classroom")
    again.ready()
    again.type(f"/load {saved}")
    again.key("Enter")
    screen = again.wait_for(f"session {sid}: 1 message, paused (quit)")
    assert (
        f"session {sid} is already stored here (1 message; {saved} has 1 message): "
        "resuming the stored one"
    ) in flat(screen)
    again.type("/next")
    again.key("Enter")
    again.wait_for(lambda s: "learner → tutor [step ask]" in s and s.count("  ↑") == 1)
    again.wait_for(lambda s: "│ ready │" in toolbar(s))
    again.key("C-d")
    screen = again.wait_for("EXIT=0")
    assert "✗" not in screen and "UNIQUE" not in screen
    # the last hint names the session the REPL was left in, not the one it began with
    assert f"continue it with: rolecall resume {sid}" in screen
    assert stored(t.home) == [(sid, "paused", "quit")]  # the empty classroom is not kept
    with sqlite3.connect(t.home / "rolecall.db") as db:
        steps = [s for (s,) in db.execute("SELECT json_extract(body, '$.step_id') FROM messages")]
    assert steps == ["intro", "ask"]


def test_a_stop_is_stored_at_once_whatever_the_user_does_next(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    """/stop during /run finishes the session (manual) in the store when it takes effect:
    it once stayed `running` there until the REPL quit, so a /load away left it so."""
    first = terminal()
    first.start("worlds/panel")
    first.ready()
    first.type("@planner shade?")
    first.key("Enter")
    first.wait_for(lambda s: "planner → human" in s and "  ↑" in s)
    saved = tmp_path / "panel.json"
    first.type(f"/save {saved}")
    first.key("Enter")
    first.wait_for(f"saved 2 messages to {saved}")
    first.key("C-d")
    first.wait_for("EXIT=0")
    ((other, _, _),) = stored(first.home)

    t = terminal()
    t.start("classroom", env={"ROLECALL_STREAM_DELAY": "0.02"})
    t.ready()
    t.type("/run")
    t.key("Enter")
    t.wait_for("teacher [step intro]")
    t.type("/stop")
    t.key("Enter")
    t.wait_for("stopping after the current turn")
    t.wait_for(lambda s: "finished (manual)" in toolbar(s))
    t.type(f"/load {saved}")
    t.key("Enter")
    t.wait_for(f"session {other}: 2 messages, paused")
    # the REPL still runs: the store already says how the classroom session ended
    (sid,) = [sid for sid, _, _ in stored(t.home) if sid != other]
    with sqlite3.connect(t.home / "rolecall.db") as db:
        row = db.execute("SELECT state, stop_reason FROM sessions WHERE id = ?", (sid,)).fetchone()
        (last,) = db.execute(
            "SELECT type FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 1", (sid,)
        ).fetchone()
    assert row == ("finished", "manual") and last == "stop"
    t.key("C-d")
    t.wait_for("EXIT=0")


def test_a_session_open_in_one_repl_is_refused_to_another_until_it_quits(
    terminal: Callable[[], Terminal],
) -> None:
    first = terminal()
    first.start("classroom", "--mode", "step")
    first.ready()
    first.key("Enter")  # one turn: the session is stored, and stays open here
    first.wait_for(lambda s: "teacher [step intro]" in s and "  ↑" in s)
    ((sid, _, _),) = stored(first.home)

    second = terminal()
    second.start("classroom")
    second.ready()
    second.type(f"/load {sid}")
    second.key("Enter")
    screen = second.wait_for("cannot load")
    assert f"session {sid} is open in another process (pid " in screen
    assert "nothing was written here" in screen and "Traceback" not in screen
    first.key("C-d")  # the first REPL quits: the session is free
    first.wait_for("EXIT=0")
    second.type(f"/load {sid}")
    second.key("Enter")
    second.wait_for(f"session {sid}: 1 message, paused (quit)")
    second.key("C-d")
    second.wait_for("EXIT=0")
