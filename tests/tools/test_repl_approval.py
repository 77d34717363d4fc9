"""`approve: ask` in the REPL (tools.md, Approval): the call is shown, the toolbar says
it waits, and y / n / e answer it. The real REPL on a real terminal (tmux)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.repl.test_tmux import Terminal, stored, terminal, toolbar
from tests.tools.helpers import TIME, rolecall, write_world

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


@pytest.mark.timeout(150)  # a REPL starting mcp-server-time, then the stored session read
def test_the_repl_runs_mcp_server_time_and_a_python_tool_once_the_person_says_y(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    # issue 37's done-when in the REPL: both kinds of tool, an `ask` answered
    world = {
        "name": "desk",
        "topic": "time",
        "model": "scripted",
        "tools": {
            "mcp": {"time": {"command": TIME}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        },
        "roles": [
            {
                "id": "clerk",
                "tools": ["time.*", "compute"],
                "approve": {"time.*": "ask", "compute": "auto"},
                "script": [
                    {"call": "time.get_current_time", "arguments": {"timezone": "UTC"}},
                    {"call": "compute", "arguments": {"expression": "6*7"}},
                    "checked the clock, and {result}",
                ],
            }
        ],
    }
    folder = write_world(tmp_path / "w", world)
    t = terminal()
    t.start(str(folder))
    # the first prompt, once mcp-server-time has started (seconds on a busy machine)
    t.wait_for(lambda s: "› " in s and "/help" in toolbar(s), timeout=60)
    t.type("what time is it?")
    t.key("Enter")
    t.wait_for('clerk wants to call time.get_current_time with {"timezone": "UTC"}', timeout=40)
    t.wait_for(lambda s: "a call waits: time.get_current_time (y / n / e)" in toolbar(s))
    t.type("y")
    t.key("Enter")
    # one line per call, above the reply. Until the REPL prints them into the scrollback
    # the live region shows only the last 3 lines still to print, so wait for all of them
    lines = ('time.get_current_time(timezone="UTC")', 'compute(expression="6*7")')
    reply = "checked the clock, and 6*7 = 42"
    screen = t.wait_for(lambda s: all(x in s for x in (*lines, reply)), timeout=30)
    assert screen.index(lines[0]) < screen.index(lines[1]) < screen.index(reply)
    assert "Traceback" not in screen

    ((sid, _, _),) = stored(t.home)
    exported = rolecall(
        "sessions", "export", sid, "--format", "json", env={"ROLECALL_HOME": str(t.home)}
    )
    assert exported.returncode == 0, exported.stderr
    evs = json.loads(exported.stdout)["events"]
    approvals = [
        (e["call_id"], e["decision"], e["by"]) for e in evs if e["type"] == "tool_approval"
    ]
    assert approvals == [("c1", "allow", "human"), ("c2", "allow", "policy")]
    results = [e for e in evs if e["type"] == "tool_result"]
    assert json.loads(results[0]["content"])["timezone"] == "UTC"
    assert results[1]["content"] == "6*7 = 42"
