"""Issue 37's done-when, end to end, on one world whose role calls mcp-server-time, a
Python tool and an MCP server of the tests: recorded, `kill -9` during a tool call,
`rolecall resume` finishes it without running any stored call twice, and `--replay` of
the recording starts no server and gives the same transcript (tools.md)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.tools.helpers import FIXTURE, TIME, events, one_step_world, rolecall, write_world


def _transcript(evs: list[dict[str, Any]]) -> list[tuple[str, object]]:
    """What the session said and got: each call, each result, each message, in order."""
    out: list[tuple[str, object]] = []
    for e in evs:
        if e["type"] == "tool_call":
            out.append(("call", (e["tool"], e["arguments"])))
        elif e["type"] == "tool_result":
            out.append(("result", (e["tool"], e["content"], e["is_error"])))
        elif e["type"] == "message" and e["topic"] == "messages":
            out.append(("message", (e["sender"], e["content"])))
    return out


@pytest.mark.timeout(180)  # several rolecall processes, each starting MCP servers
def test_killed_mid_call_resumed_then_replayed_gives_the_same_transcript(
    tmp_path: Path, data_dir: Path
) -> None:
    marks = tmp_path / "marks.txt"
    world = one_step_world(
        [
            {"call": "time.get_current_time", "arguments": {"timezone": "UTC"}},
            {"call": "compute", "arguments": {"expression": "6*7"}},
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "first"}},
            {"call": "fx.sleep", "arguments": {"seconds": 40}},
            "done: {result}",
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "second"}},
            "and then {result}",
        ],
        tools={
            "mcp": {"time": {"command": TIME}, "fx": {"command": FIXTURE, "timeout": 50}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        },
        role_tools=["time.*", "compute", "fx.*"],
        steps=2,
    )
    folder = write_world(tmp_path / "w", world)
    tape = tmp_path / "tape.jsonl"
    record = ["--record", "--replay-file", str(tape)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "run", str(folder), "--json", *record],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its MCP servers are killed with it
    )
    seen: list[dict[str, Any]] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 90
    try:
        for line in proc.stdout:
            seen.append(json.loads(line))
            if seen[-1]["type"] == "tool_call" and seen[-1]["tool"] == "fx.sleep":
                break
            assert time.monotonic() < deadline, "the sleep call never started"
        time.sleep(0.5)  # the call is running on the server
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
    sid = str(seen[0]["session_id"])
    assert marks.read_text() == "first\n"

    resumed = rolecall("resume", sid, "--json", *record)
    assert resumed.returncode == 0, resumed.stderr
    assert marks.read_text() == "first\nsecond\n"  # "first" ran once
    # the whole session as stored: the killed run's part and the resumed part
    doc = json.loads(rolecall("sessions", "export", sid, "--format", "json").stdout)
    stored = _transcript(doc["events"])
    said = [m for kind, m in stored if kind == "message"]
    assert said[0] == ("clerk", "done: the call was interrupted (the session stopped while "
                       "it ran); it is not run again")  # fmt: skip
    assert said[1] == ("clerk", "and then marked second")
    assert [m["tool_calls"] for m in doc["messages"]] == [["c1", "c2", "c3", "c4"], ["c5"]]

    # replaying the recording: no server can start, nothing runs, the same transcript
    world["tools"]["mcp"]["fx"]["command"] = ["/nonexistent/fixture"]
    world["tools"]["mcp"]["time"]["command"] = ["/nonexistent/time"]
    write_world(folder, world)
    replayed = rolecall("run", str(folder), "--json", "--replay", "--replay-file", str(tape))
    assert replayed.returncode == 0, replayed.stderr
    assert marks.read_text() == "first\nsecond\n"
    assert _transcript(events(replayed.stdout)) == stored
