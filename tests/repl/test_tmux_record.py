"""What the REPL and the stored record say about a turn (issue 46): a call run with a
person's edited arguments shows those and says they were edited (in the REPL, `sessions
show`, `sessions trace` and the exports); the token figure of a turn with tools is the
whole turn's everywhere; while a call waits the live line and the prompt say so and
Ctrl-C refuses it; notices break between words, so an id printed in one can be pasted.
The real REPL on a real terminal (tmux), then the real CLI on its store."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.repl.test_tmux import Terminal, stored, terminal, toolbar
from tests.tools.helpers import rolecall, write_world

__all__ = ["terminal"]  # the fixture: a REPL in tmux

ASKING_CLERK = {
    "name": "desk",
    "topic": "sums",
    "model": "scripted",
    "tools": {"python": {"compute": "rolecall.examples.desk_tools:compute"}},
    "roles": [
        {
            "id": "clerk",
            "tools": ["compute"],
            "approve": "ask",
            "script": [
                {"call": "compute", "arguments": {"expression": "1+1"}},
                "first: {result}",
                {"call": "compute", "arguments": {"expression": "2+2"}},
                "second: {result}",
            ],
        }
    ],
}


def _cli(home: Path, *args: str) -> str:
    done = rolecall(*args, env={"ROLECALL_HOME": str(home)})
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


@pytest.mark.timeout(150)
def test_an_edited_call_shows_what_ran_and_ctrl_c_refuses_a_waiting_call(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    folder = write_world(tmp_path / "w", ASKING_CLERK)
    t = terminal()
    t.start(str(folder))
    t.ready()
    t.type("add please")
    t.key("Enter")
    t.wait_for('clerk wants to call compute with {"expression": "1+1"}')
    # the live line says it waits for you (not that the role is thinking), the empty
    # prompt says what to type
    screen = t.wait_for(lambda s: "clerk waits for you: run compute?" in s)
    assert "is thinking" not in screen
    assert "y runs it · n refuses it · e {...}" in screen
    t.type('e {"expression": "6*7"}')
    t.key("Enter")
    edited = 'compute(expression="6*7") · edited (the model asked expression="1+1")'
    screen = t.wait_for(lambda s: edited in s and "first: 6*7 = 42" in s)
    # the reply's token line: the whole turn's (two model rounds), as stored
    after = screen[screen.index("first: 6*7 = 42") :]
    shown = re.search(r"↑(\d[\d,]*) ↓(\d[\d,]*)", after)
    assert shown is not None, after

    t.type("again")
    t.key("Enter")
    t.wait_for('clerk wants to call compute with {"expression": "2+2"}')
    t.wait_for(lambda s: "a call waits: compute (y / n / e)" in toolbar(s))
    t.key("C-c")  # refuses the waiting call, as `n`; the session goes on
    screen = t.wait_for("second: refused: the person refused compute (Ctrl-C)")
    assert "refused compute (Ctrl-C)" in screen
    assert "pausing after the current turn" not in screen
    t.wait_for(lambda s: "ready" in toolbar(s))
    t.key("C-d")
    t.wait_for("EXIT=0")

    ((sid, _, _),) = stored(t.home)
    show = _cli(t.home, "sessions", "show", sid)
    assert f'[m2] clerk → human  ↩ m1 "add please"  ↑{shown[1]} ↓{shown[2]}' in show
    assert f"⚙ {edited} → 6*7 = 42" in show
    trace = _cli(t.home, "sessions", "trace", sid)
    c1 = next(line for line in trace.splitlines() if line.startswith("c1 "))
    assert 'expression="6*7"' in c1 and "allow · human, edited" in c1
    c2 = next(line for line in trace.splitlines() if line.startswith("c2 "))
    assert "deny · human" in c2 and "(Ctrl-C)" in c2
    md = _cli(t.home, "sessions", "export", sid, "--format", "md")
    assert '{"expression": "6\\*7"} (edited; the model asked {"expression": "1+1"})' in md
    html = _cli(t.home, "sessions", "export", sid, "--format", "html")
    assert "(edited; the model asked <code>{&quot;expression&quot;: &quot;1+1&quot;}" in html
    text = _cli(t.home, "sessions", "export", sid, "--format", "json")
    assert '"arguments":{"expression":"6*7"}' in text.replace(" ", "")  # the record keeps both
    assert '"arguments":{"expression":"1+1"}' in text.replace(" ", "")


@pytest.mark.timeout(90)
def test_notices_break_between_words_so_a_printed_id_can_be_pasted(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    folder = write_world(
        tmp_path / "w",
        {
            "name": "pair",
            "topic": "tea",
            "model": "scripted",
            "roles": [{"id": "host", "script": ["Green tea, then.", "Black tea, then."]}],
        },
    )
    t = terminal()
    t.start(str(folder))
    t.ready()
    t.tmux("resize-window", "-t", t.target, "-x", "50")  # an id would straddle a row end
    t.type("tea?")
    t.key("Enter")
    t.wait_for("Green tea, then.")
    t.type("/fork m2")
    t.key("Enter")
    joined = t.wait_for(lambda s: "lists the branches" in s and "paused (fork)" in toolbar(s))
    ids = set(re.findall(r"\d{8}-\d{6}-[0-9a-f]{6}", joined))
    assert len(ids) == 2, joined
    # the screen as the terminal shows it, its own line breaks kept (no -J): each id the
    # notice names is whole on one line, as often as in the joined screen
    rows = t.tmux("capture-pane", "-p", "-t", t.target, "-S", "-200")
    for sid in ids:
        assert rows.count(sid) == joined.count(sid), rows
    assert max(len(line) for line in rows.splitlines()) <= 50
