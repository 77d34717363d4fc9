"""kill -9 during a tool call, then `rolecall resume`: no stored call runs twice (tools.md)."""

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
from tests.tools.helpers import FIXTURE, events, of, one_step_world, rolecall, write_world


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_kill_9_during_a_call_then_resume_runs_no_stored_call_twice(
    tmp_path: Path, data_dir: Path
) -> None:
    marks = tmp_path / "marks.txt"
    world = one_step_world(
        [
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "first"}},
            {"call": "fx.sleep", "arguments": {"seconds": 40}},
            "done: {result}",
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "second"}},
            "and then {result}",
        ],
        tools={"mcp": {"fx": {"command": FIXTURE, "timeout": 50}}},
        role_tools=["fx.*"],
        steps=2,
    )
    folder = write_world(tmp_path / "w", world)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "run", str(folder), "--json"],
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
        time.sleep(0.5)  # the call is running on the server
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        proc.stdout.close()
    sid = str(seen[0]["session_id"])
    assert marks.read_text() == "first\n"

    resumed = rolecall("resume", sid, "--json")
    assert resumed.returncode == 0, resumed.stderr
    evs = events(resumed.stdout)
    # the stored calls are not made again: only the second turn's call is new
    assert [c["tool"] for c in of(evs, "messages/tool_call")] == ["fx.mark"]
    results = of(evs, "messages/tool_result")
    assert results[0]["call_id"] == "c2" and results[0]["is_error"] is True
    assert "interrupted" in results[0]["content"]
    first, second = of(evs, "messages/message")
    assert first["content"].startswith("done: the call was interrupted")
    assert first["tool_calls"] == ["c1", "c2"]
    assert second["content"] == "and then marked second"
    assert marks.read_text() == "first\nsecond\n"  # "first" ran once


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_replay_starts_no_server_and_gives_the_same_transcript(
    tmp_path: Path, data_dir: Path
) -> None:
    marks = tmp_path / "marks.txt"
    world = one_step_world(
        [
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "ran"}},
            {"call": "fx.echo", "arguments": {"text": "recorded answer"}},
            "said: {result}",
        ],
        tools={"mcp": {"fx": {"command": FIXTURE}}},
        role_tools=["fx.*"],
    )
    folder = write_world(tmp_path / "w", world)
    tape = tmp_path / "tape.jsonl"
    recorded = rolecall("run", str(folder), "--json", "--record", "--replay-file", str(tape))
    assert recorded.returncode == 0, recorded.stderr
    assert marks.read_text() == "ran\n"

    # a server that cannot start: replaying must not try
    world["tools"]["mcp"]["fx"]["command"] = ["/nonexistent/server"]
    write_world(folder, world)
    replayed = rolecall("run", str(folder), "--json", "--replay", "--replay-file", str(tape))
    assert replayed.returncode == 0, replayed.stderr
    assert marks.read_text() == "ran\n"  # nothing ran again

    def transcript(stdout: str) -> list[tuple[str, object]]:
        evs = events(stdout)
        kinds = ("messages/tool_call", "messages/tool_result", "messages/message")
        return [
            (kind, {k: e[k] for k in ("tool", "arguments", "content") if k in e})
            for e in evs
            for kind in kinds
            if f"{e['topic']}/{e['type']}" == kind
        ]

    assert transcript(replayed.stdout) == transcript(recorded.stdout)
    (message,) = of(events(replayed.stdout), "messages/message")
    assert message["content"] == "said: recorded answer"

    # a call the recording lacks (its result taken out of the file) is a miss naming it
    lines = tape.read_text(encoding="utf-8").splitlines()
    kept = [ln for ln in lines if json.loads(ln)["request"].get("tool") != "fx.echo"]
    assert len(kept) == len(lines) - 1
    tape.write_text("\n".join(kept) + "\n", encoding="utf-8")
    missed = rolecall("run", str(folder), "--json", "--replay", "--replay-file", str(tape))
    # the model, asked with that result, is then a replay miss too: the session pauses
    assert missed.returncode == 1, missed.stderr
    results = of(events(missed.stdout), "messages/tool_result")
    assert results[1]["is_error"] is True
    assert results[1]["content"].startswith(
        'replay: no recorded result of fx.echo with arguments {"text": "recorded answer"}'
    )


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_a_fork_copies_the_calls_up_to_its_point_and_runs_none_of_them(
    tmp_path: Path, data_dir: Path
) -> None:
    marks = tmp_path / "marks.txt"
    world = one_step_world(
        [
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "one"}},
            "first: {result}",
            {"call": "fx.mark", "arguments": {"path": str(marks), "text": "two"}},
            "second: {result}",
        ],
        tools={"mcp": {"fx": {"command": FIXTURE}}},
        role_tools=["fx.*"],
        steps=2,
    )
    ran = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert ran.returncode == 0, ran.stderr
    sid = events(ran.stdout)[0]["session_id"]
    forked = rolecall("sessions", "fork", sid, "--at", "m1", "--json")
    assert forked.returncode == 0, forked.stderr
    new = json.loads(forked.stdout)["session_id"]
    doc = json.loads(rolecall("sessions", "export", new, "--format", "json").stdout)
    kinds = [(e["type"], e.get("call_id")) for e in doc["events"] if e["type"].startswith("tool")]
    assert kinds == [("tool_call", "c1"), ("tool_approval", "c1"), ("tool_result", "c1")]
    assert doc["messages"][0]["tool_calls"] == ["c1"]
    assert marks.read_text() == "one\ntwo\n"

    resumed = rolecall("resume", new, "--json")
    assert resumed.returncode == 0, resumed.stderr
    evs = events(resumed.stdout)
    (call,) = of(evs, "messages/tool_call")
    assert call["call_id"] != "c1"  # a new call, never one of the copied ids
    assert of(evs, "messages/message")[0]["content"] == "second: marked two"
    assert marks.read_text() == "one\ntwo\ntwo\n"  # only the fork's own turn ran
