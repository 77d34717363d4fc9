"""A recording made across a ``kill -9`` and a resume replays (docs/replay.md, tools.md):
killed during the first of two calls of one model round, then resumed (``--record``
both times), the session gives the first call the error result of a cut call and runs
the second; ``--replay`` of the recording, starting no server, gives that transcript."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tools.helpers import FIXTURE, events, one_step_world, rolecall, write_world

KINDS = ("messages/tool_call", "messages/tool_result", "messages/message")


def transcript(evs: list[dict[str, object]]) -> list[tuple[str, dict[str, object]]]:
    keep = ("call_id", "tool", "arguments", "content", "is_error", "tool_calls")
    return [
        (kind, {k: e[k] for k in keep if k in e})
        for e in evs
        for kind in KINDS
        if f"{e['topic']}/{e['type']}" == kind
    ]


@pytest.mark.timeout(150)  # several rolecall processes, each starting an MCP server
def test_a_recording_across_a_kill_during_the_first_of_two_calls_and_a_resume_replays(
    tmp_path: Path, data_dir: Path
) -> None:
    marks = tmp_path / "marks.txt"
    world = one_step_world(
        [
            {"call": "fx.sleep", "arguments": {"seconds": 40}},
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "second"}},
            "done: {result}",
        ],
        tools={"mcp": {"fx": {"command": FIXTURE, "timeout": 50}}},
        role_tools=["fx.*"],
    )
    folder = write_world(tmp_path / "w", world)
    tape = tmp_path / "tape.jsonl"
    record = ("--record", "--replay-file", str(tape))
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "run", str(folder), "--json", *record],
        cwd=ROOT,
        env=os.environ.copy(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,  # its MCP server is killed with it
    )
    seen: list[dict[str, object]] = []
    assert proc.stdout is not None
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            seen.append(json.loads(line))
            last = seen[-1]
            if last["type"] == "tool_call" and last["tool"] == "fx.sleep":
                break
            assert time.monotonic() < deadline, "the sleep call never started"
        time.sleep(0.5)  # the first call is running on the server
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
    sid = str(seen[0]["session_id"])
    assert not marks.exists()  # the second call had not started

    resumed = rolecall("resume", sid, "--json", *record)
    assert resumed.returncode == 0, resumed.stderr
    # the second call, asked for but never started, runs now; the first is not run again
    assert marks.read_text() == "second\n"
    before = [e for e in seen if f"{e['topic']}/{e['type']}" in KINDS]
    session = transcript(before) + transcript(events(resumed.stdout))
    assert [(kind, e.get("call_id")) for kind, e in session] == [
        ("messages/tool_call", "c1"),
        ("messages/tool_result", "c1"),
        ("messages/tool_call", "c2"),
        ("messages/tool_result", "c2"),
        ("messages/message", None),
    ]
    first_result, second_result = (e for kind, e in session if kind == "messages/tool_result")
    assert first_result["is_error"] is True and "interrupted" in str(first_result["content"])
    assert second_result == {
        "call_id": "c2",
        "tool": "fx.mark",
        "content": "marked second",
        "is_error": False,
    }
    assert session[-1][1]["content"] == "done: marked second"
    assert session[-1][1]["tool_calls"] == ["c1", "c2"]

    # replayed from the start, no server started (it could not start now)
    world["tools"]["mcp"]["fx"]["command"] = ["/nonexistent/server"]
    write_world(folder, world)
    replayed = rolecall("run", str(folder), "--json", "--replay", "--replay-file", str(tape))
    assert replayed.returncode == 0, replayed.stderr
    assert "replay:" not in replayed.stderr
    assert transcript(events(replayed.stdout)) == session
    assert marks.read_text() == "second\n"  # nothing ran again
