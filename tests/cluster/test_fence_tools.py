"""A worker that lost its session runs no tool call and asks no model for it, on a real
``nats-server -js``: two workers, ack wait 3 s, one paused (SIGSTOP) about 9 s while
it ran a session with tools, the other taking the session over meanwhile. A tool that
appends a line to a file each time it runs shows what happened outside the record: it
ran exactly as many times as the session the stream holds (``sessions import``) records
calls, whether the model is a provider whose answer (two calls) comes back while the
worker is paused, or ``scripted`` (a repeatable model, which never waited for the
stream)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.test_fence import stop
from tests.cluster.test_workers import rows, start_worker
from tests.faults import Cli
from tests.llm.openai_server import OpenAITestServer, Reply, Stall, ToolCalls
from tests.nats_server import NatsServer

STEPS = 6
TOOL = '''\
import os
import time


def mark(step: str, n: int) -> str:
    """Mark that this call ran (a line in the marks file), then take a while."""
    with open(os.environ["FENCE_MARKS"], "a", encoding="utf-8") as out:
        out.write(f"{step} {n} {os.getpid()}\\n")
    time.sleep(float(os.environ.get("MARK_SECONDS", "0")))
    return f"marked {step} {n}"
'''


class CallsThenReply:
    """Each turn's first request is answered after 1.5 s with two calls of the offered
    tool; the request carrying their results with a short reply."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Stall | Reply:
        body = self._records[-1].body
        messages = body["messages"]
        step = json.dumps(messages).rpartition("STEP=")[2][:2]
        if messages[-1]["role"] == "tool":
            return Reply(f"done with {step}.")
        name = body["tools"][0]["function"]["name"]
        calls = tuple((name, json.dumps({"step": step, "n": n})) for n in (1, 2))
        return Stall(1.5, then=ToolCalls(calls))

    def clear(self) -> None:
        pass


@pytest.fixture
def tool_provider() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        state = srv._server.state
        state.behaviours = CallsThenReply(state.requests)  # type: ignore[assignment]
        yield srv


def tool_world(folder: Path, model: dict[str, Any], script: list[Any] | None) -> Path:
    steps = [
        {"id": f"s{i}", "speaker": "a", "instruction": f"STEP=s{i}"} for i in range(1, STEPS + 1)
    ]
    role: dict[str, Any] = {"id": "a", "tools": ["mark"]}
    if script is not None:
        role["script"] = script
    world = {
        "name": "marks",
        "topic": "t",
        **model,
        "tools": {"python": {"mark": "fencetools:mark"}},
        "roles": [role],
        "flow": {"steps": steps},
    }
    where = folder / "marks"
    where.mkdir()
    (where / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return where


def marks(path: Path) -> list[tuple[str, int]]:
    """(the call's step and number, the process that ran it) of each line."""
    if not path.exists():
        return []
    out = []
    for line in path.read_text("utf-8").splitlines():
        step, n, pid = line.split()
        out.append((f"{step} {n}", int(pid)))
    return out


def events_of(home: Path, sid: str, kind: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        found = db.execute(
            "SELECT record FROM events WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
    events = [json.loads(record) for (record,) in found]
    return [e for e in events if f"{e['topic']}/{e['type']}" == kind]


def wait_until(done: Any, what: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds  # a loaded machine starts processes slowly
    while not done():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def run_paused(
    cli: Cli, nats: NatsServer, tmp_path: Path, world: Path, started: Any, **env: str
) -> tuple[str, datetime, subprocess.Popen[str]]:
    """A batch of one run on two workers, the first paused once ``started()`` and resumed
    about 9 s later (the second took the session over meanwhile); the session id, when
    the first worker was woken, and the first worker."""
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "fencetools.py").write_text(TOOL, encoding="utf-8")
    env = {
        "PYTHONPATH": os.pathsep.join((str(cli.guard), str(tools))),
        "FENCE_MARKS": str(tmp_path / "marks.txt"),
        **env,
    }
    first = start_worker(cli, nats, tmp_path / "w1", "--ack-wait", "3", **env)
    out = tmp_path / "results.jsonl"
    batch = cli.popen(
        "batch", str(world), "--nats", nats.url, "--name", "fenced", "--out", str(out)
    )
    second: subprocess.Popen[str] | None = None
    try:
        wait_until(started, "the first worker did not start the run")
        first.send_signal(signal.SIGSTOP)
        paused = time.monotonic()
        second = start_worker(cli, nats, tmp_path / "w2", "--ack-wait", "3", **env)
        wait_until(
            lambda: any(pid == second.pid for _, pid in marks(tmp_path / "marks.txt")),  # type: ignore[union-attr]
            "the second worker did not take the session over",
        )
        time.sleep(max(0.0, 9 - (time.monotonic() - paused)))
        woke = datetime.now(UTC)
        first.send_signal(signal.SIGCONT)  # what it had under way comes back, too late
        _, err = batch.communicate(timeout=120)
        time.sleep(1)  # the first worker's last word after waking, if it has one
    finally:
        errs = stop(first, *([second] if second else []))
        batch.kill() if batch.poll() is None else None
    assert batch.returncode == 0, err
    [row] = rows(out)
    assert (row["stop_reason"], row["error"]) == ("flow_end", None), row
    assert "1 taken over by another worker" in errs, errs  # the first one lost the session
    assert "Traceback" not in errs
    return row["session_id"], woke, first


def check_marks(cli: Cli, nats: NatsServer, tmp_path: Path, sid: str, first_pid: int) -> None:
    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    calls = events_of(gathered.home, sid, "messages/tool_call")
    ran = marks(tmp_path / "marks.txt")
    assert {pid for _, pid in ran} >= {first_pid}  # the paused worker did run calls before
    recorded = Counter(f"{c['arguments']['step']} {c['arguments']['n']}" for c in calls)
    assert Counter(call for call, _ in ran) == recorded, (ran, recorded)


@pytest.mark.timeout(240)
def test_a_worker_woken_after_losing_its_session_runs_none_of_the_calls_it_was_given(
    cli: Cli, nats: NatsServer, tool_provider: OpenAITestServer, tmp_path: Path
) -> None:
    model = {
        "model": "openai/test-model",
        "settings": {
            "retries": 0,
            "timeout": 30,
            "client": "http",
            "api_base": tool_provider.base_url,
            "api_key_env": "WORKER_KEY",
        },
    }
    world = tool_world(tmp_path, model, None)
    # paused while its provider holds the request of s2's calls (its third request)
    sid, woke, first = run_paused(
        cli, nats, tmp_path, world, lambda: len(tool_provider.requests) >= 3
    )
    check_marks(cli, nats, tmp_path, sid, first.pid)
    assert asked_after(tmp_path / "w1", sid, woke) == []
    asked = Counter(
        json.dumps(r.body["messages"]).rpartition("STEP=")[2][:2] for r in tool_provider.requests
    )
    assert set(asked) == {f"s{i}" for i in range(1, STEPS + 1)}


@pytest.mark.timeout(240)
def test_a_displaced_scripted_worker_runs_no_new_turn_and_no_tool(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    script = [
        {"call": "mark", "arguments": {"step": "x", "n": 1}},
        {"call": "mark", "arguments": {"step": "x", "n": 2}},
        "marked both, one two three four five six",
    ]
    world = tool_world(tmp_path, {"model": "scripted"}, script)
    path = tmp_path / "marks.txt"
    # paused during the first call of the second turn (each takes a second after its
    # mark): on waking, the second call of that round is the next thing it would do
    sid, woke, first = run_paused(
        cli,
        nats,
        tmp_path,
        world,
        lambda: len(marks(path)) >= 3,
        MARK_SECONDS="1",
        ROLECALL_STREAM_DELAY="0.02",
    )
    check_marks(cli, nats, tmp_path, sid, first.pid)
    assert asked_after(tmp_path / "w1", sid, woke) == []


def asked_after(home: Path, sid: str, woke: datetime) -> list[dict[str, Any]]:
    """The generations the worker at ``home`` began for ``sid`` after ``woke``: a model
    asked (a new turn, or a turn's next round) for a session it no longer held."""
    return [e for e in events_of(home, sid, "sse/start") if datetime.fromisoformat(e["ts"]) > woke]
