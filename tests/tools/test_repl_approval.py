"""`approve: ask` in the REPL (tools.md, Approval): the call is shown, the toolbar says
it waits, and y / n / e answer it. The real REPL on a real terminal (tmux)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.repl.test_tmux import Terminal, terminal, toolbar
from tests.tools.helpers import write_world

__all__ = ["terminal"]  # the fixture: a REPL in tmux


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_an_ask_call_waits_for_y_n_or_edited_arguments(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    world = {
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
    folder = write_world(tmp_path / "w", world)
    t = terminal()
    t.start(str(folder))
    t.ready()
    t.type("add please")
    t.key("Enter")
    screen = t.wait_for('clerk wants to call compute with {"expression": "1+1"}')
    t.wait_for(lambda s: "a call waits: compute (y / n / e)" in toolbar(s))
    t.type('e {"expression": "6*7"}')
    t.key("Enter")
    screen = t.wait_for("first: 6*7 = 42")
    t.type("again")
    t.key("Enter")
    t.wait_for('clerk wants to call compute with {"expression": "2+2"}')
    t.type("maybe")
    t.key("Enter")
    t.wait_for("the tool call waits: y, n, or e")
    t.type("n")
    t.key("Enter")
    screen = t.wait_for("second: refused: the person refused compute")
    assert "Traceback" not in screen
