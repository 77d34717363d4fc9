"""Workers on a real ``nats-server -js``: a killed worker, a restarted server, a bad job."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cluster.conftest import scripted_world
from tests.faults import Cli
from tests.llm.openai_server import OpenAITestServer, Reply
from tests.nats_server import NatsServer

TOPICS = ("alpha", "beta")
_STEP = re.compile(r"STEP=(s\d+)")


def key_of(body: dict[str, Any]) -> tuple[str, str]:
    text = json.dumps(body.get("messages"))
    topic = next(t for t in TOPICS if f"topic {t}" in text)
    step = _STEP.findall(text)[-1]
    return topic, step


class Slow:
    """Every reply streams word by word, slowly: a kill lands in the middle of a turn."""

    def __init__(self, records: list[Any]) -> None:
        self._records = records

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Reply:
        topic, step = key_of(self._records[-1].body)
        # words of the step's own, so no two replies are nearly identical (a stall)
        own = " ".join(f"{step}{word}" for word in ("one", "two", "three", "four", "five"))
        return Reply(f"On {topic} at {step} {own}.", delay=0.08)

    def clear(self) -> None:
        pass


@pytest.fixture
def provider() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        state = srv._server.state
        state.behaviours = Slow(state.requests)  # type: ignore[assignment]
        yield srv


def provider_world(folder: Path, server: OpenAITestServer) -> Path:
    """Roles on the loopback provider through rolecall's lean HTTP client: each worker
    importing litellm would add about ten seconds before it takes a job."""
    world = folder / "panel"
    world.mkdir()
    steps = ", ".join(
        f'{{id: s{i}, speaker: {"a" if i % 2 else "b"}, instruction: "STEP=s{i}"}}'
        for i in range(1, 4)
    )
    (world / "world.yaml").write_text(
        f"""\
name: panel
topic: topic alpha
model: openai/test-model
settings: {{retries: 0, timeout: 10, client: http, api_base: "{server.base_url}", api_key_env: WORKER_KEY}}
roles: [{{id: a}}, {{id: b}}]
flow:
  steps: [{steps}]
""",
        encoding="utf-8",
    )
    return world


def start_worker(
    cli: Cli, nats: NatsServer, home: Path, *args: str, **env: str
) -> subprocess.Popen[str]:
    worker = Cli(home=home, guard=cli.guard, cwd=cli.cwd)
    log = str(home.parent / f"{home.name}.log")
    proc = worker.popen(
        "worker", "--nats", nats.url, "--log-file", log, *args, WORKER_KEY="sk-w", **env
    )
    assert proc.stderr is not None
    line = proc.stderr.readline()
    assert line.startswith("ready: worker pulling ROLECALL_JOBS"), line
    return proc


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def messages_of(home: Path) -> dict[str, list[tuple[str, str]]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        found = db.execute("SELECT session_id, body FROM messages ORDER BY session_id, idx")
        out: dict[str, list[tuple[str, str]]] = {}
        for sid, body in found:
            m = json.loads(body)
            out.setdefault(sid, []).append((m["id"], m["content"]))
    return out


# two worker processes start and wait an ack wait
@pytest.mark.timeout(150)
def test_a_worker_killed_mid_turn_is_replaced_and_no_committed_turn_is_asked_twice(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path
) -> None:
    world = provider_world(tmp_path, provider)
    first = start_worker(cli, nats, tmp_path / "w1", "--concurrency", "2", "--ack-wait", "2")
    out = tmp_path / "results.jsonl"
    batch = cli.popen(
        "batch", str(world), "--vary", "topic=topic alpha,topic beta", "--nats", nats.url,
        "--name", "killed", "--out", str(out),
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while len(provider.requests) < 3:  # both runs under way, one of them past its first turn
        assert time.monotonic() < deadline, "the worker did not start the runs"
        time.sleep(0.02)
    first.send_signal(signal.SIGKILL)
    first.communicate(timeout=10)  # reaped, its pipes closed
    at_kill = Counter(key_of(r.body) for r in provider.requests)
    second = start_worker(cli, nats, tmp_path / "w2", "--ack-wait", "2")
    try:
        _, err = batch.communicate(timeout=45)
    finally:
        second.send_signal(signal.SIGINT)
        _, worker_err = second.communicate(timeout=15)
    assert batch.returncode == 0, err
    assert "worker stopped: 2 runs done (0 failed, 2 continued from another worker)" in worker_err
    assert [(r["run"], r["stop_reason"], r["error"]) for r in rows(out)] == [
        (1, "flow_end", None),
        (2, "flow_end", None),
    ]
    asked = Counter(key_of(r.body) for r in provider.requests)
    assert set(asked) == {(t, s) for t in TOPICS for s in ("s1", "s2", "s3")}
    for topic in TOPICS:
        started = sorted(s for (t, s) in at_kill if t == topic)
        for step in started[:-1]:  # committed before the kill: never asked again
            assert asked[(topic, step)] == 1, (topic, step, asked)
    assert sum(asked.values()) - 6 <= 2  # at most the two turns in flight were asked again

    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", "--batch", "killed", "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    said = messages_of(gathered.home)
    assert len(said) == 2
    for messages in said.values():
        assert [mid for mid, _ in messages] == ["m1", "m2", "m3"]  # each once, none lost
        topic = messages[0][1].split()[1]
        assert [c for _, c in messages] == [
            f"On {topic} at s{i} s{i}one s{i}two s{i}three s{i}four s{i}five." for i in (1, 2, 3)
        ]


def test_a_server_restarted_during_a_batch_loses_nothing(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path, steps=6)
    worker = start_worker(
        cli, nats, tmp_path / "w", "--concurrency", "3", ROLECALL_STREAM_DELAY="0.03"
    )
    out = tmp_path / "results.jsonl"
    batch = cli.popen(
        "batch", str(world), "--vary", "topic=x,y,z", "--nats", nats.url, "--name", "restarted",
        "--out", str(out),
    )  # fmt: skip
    time.sleep(1.0)  # the runs are under way
    nats.restart()
    try:
        _, err = batch.communicate(timeout=45)
    finally:
        worker.send_signal(signal.SIGINT)
        worker.communicate(timeout=15)
    assert batch.returncode == 0, err
    assert [(r["run"], r["topic"], r["stop_reason"]) for r in rows(out)] == [
        (1, "x", "flow_end"),
        (2, "y", "flow_end"),
        (3, "z", "flow_end"),
    ]
    watched = cli.run("watch", "--batch", "restarted", "--json", "--nats", nats.url, timeout=30)
    assert watched.returncode == 0, watched.stderr  # it ends after the batch's last run
    streamed: dict[str, list[int]] = {}
    for line in watched.stdout.splitlines():
        event = json.loads(line)
        streamed.setdefault(event["session_id"], []).append(event["seq"])
    assert sorted(streamed) == sorted(r["session_id"] for r in rows(out))
    for seqs in streamed.values():
        assert seqs == list(range(1, len(seqs) + 1))  # each session in seq order, once
    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    assert (
        gathered.run("sessions", "import", "--batch", "restarted", "--nats", nats.url).returncode
        == 0
    )
    said = messages_of(gathered.home)
    assert sorted(said) == sorted(r["session_id"] for r in rows(out))
    expected = [f"{'a' if i % 2 else 'b'} says {(i + 1) // 2} " for i in range(1, 7)]
    for messages in said.values():
        assert [m for m, _ in messages] == [f"m{i}" for i in range(1, 7)]
        assert [c[: len(e)] for (_, c), e in zip(messages, expected, strict=True)] == expected
    with closing(sqlite3.connect(gathered.home / "rolecall.db")) as db:
        for sid in said:
            seqs = [
                s
                for (s,) in db.execute(
                    "SELECT seq FROM events WHERE session_id = ? ORDER BY seq", (sid,)
                )
            ]
            assert seqs == list(range(1, len(seqs) + 1))  # every event, in order, once


def test_a_job_whose_world_is_invalid_is_recorded_as_failed(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    from rolecall.batch.results import RunResult
    from rolecall.cluster.jobs import BatchPlanMessage, Job, follow_results, submit
    from rolecall.nats.link import connect

    bad = Job(
        batch="bad", run=1, session_id="20261123-000000-abcdef", world={"name": "w", "roles": []}
    )

    async def send() -> None:
        async with connect(nats.url) as link:
            await submit(link, BatchPlanMessage(batch="bad", runs=1, world="w"), [bad])

    async def result() -> RunResult:
        async with connect(nats.url) as link:
            async for item in follow_results(link, "bad"):
                if isinstance(item, RunResult):
                    return item
        raise AssertionError("no result")

    anyio.run(send)
    worker = start_worker(cli, nats, tmp_path / "w")
    try:
        found = anyio.run(result)
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=15)
    assert found.error is not None and found.error.startswith("the world is invalid: roles:")
    assert (found.run, found.session_id, found.stop_reason) == (1, bad.session_id, None)
    assert worker.returncode == 0
    assert "worker stopped: 1 runs done (1 failed, 0 continued from another worker)" in err
