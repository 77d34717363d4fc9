"""One job held by two workers at once, on a real ``nats-server -js``: the server down
longer than the ack wait (SIGTERM, restarted 6 s later), a worker paused (SIGSTOP 8 s),
the same job message delivered twice. The session in the stream is one worker's at a
time: each message is generated once in it, the provider is asked again only for the
turn that was in flight when the lease went to the other worker, and ``sessions
import`` gives exactly the copy of the worker that finished the run."""

from __future__ import annotations

import json
import re
import signal
import sqlite3
import subprocess
import time
import urllib.request
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.cluster.test_workers import provider, rows, start_worker
from tests.faults import Cli, assert_intact, stored
from tests.llm.openai_server import OpenAITestServer
from tests.nats_server import NatsServer
from tests.web.conftest import Site, start_server, stop_server

STEPS = 20

__all__ = ["provider"]  # the fixture: a loopback provider slow enough to stop a worker in


def long_world(folder: Path, server: OpenAITestServer) -> Path:
    """Twenty steps on the loopback provider through rolecall's lean HTTP client: what
    is checked is who holds the session, not litellm (whose import would cost each
    worker process seconds of CPU; tests/faults/test_provider_faults.py runs both)."""
    world = folder / "panel"
    world.mkdir()
    steps = ", ".join(
        f'{{id: s{i}, speaker: {"a" if i % 2 else "b"}, instruction: "STEP=s{i}"}}'
        for i in range(1, STEPS + 1)
    )
    (world / "world.yaml").write_text(
        f"""\
name: panel
topic: topic alpha
model: openai/test-model
settings: {{retries: 0, timeout: 30, client: http, api_base: "{server.base_url}", api_key_env: WORKER_KEY}}
roles: [{{id: a}}, {{id: b}}]
flow:
  steps: [{steps}]
""",
        encoding="utf-8",
    )
    return world


def events_of(home: Path, sid: str) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        found = db.execute(
            "SELECT record FROM events WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
    return [json.loads(record) for (record,) in found]


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def holds(home: Path, sid: str) -> bool:
    if not (home / "rolecall.db").exists():
        return False
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        return db.execute("SELECT 1 FROM sessions WHERE id = ?", (sid,)).fetchone() is not None


def asked(provider: OpenAITestServer) -> Counter[str]:
    """How many times the provider was asked for each step's message."""
    return Counter(
        re.findall(r"STEP=(s\d+)", json.dumps(r.body["messages"]))[-1] for r in provider.requests
    )


def check_one_writer(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path, sid: str
) -> None:
    """The stream's copy of ``sid``: each message generated once, identical to the copy
    of the worker that finished it; the provider asked once per message, but for at
    most one turn in flight when the lease moved."""
    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    copy = stored(gathered.home, sid)
    assert_intact(copy)
    assert copy.ids == [f"m{i}" for i in range(1, STEPS + 1)]
    assert copy.generations == {f"m{i}": 1 for i in range(1, STEPS + 1)}
    assert (copy.state, copy.stop_reason) == ("finished", "flow_end")
    finished = []
    for home in sorted(tmp_path.glob("w[0-9]")):
        theirs = stored(home, sid) if holds(home, sid) else None
        if theirs is not None and theirs.state == "finished":
            finished.append(home)
            assert (copy.messages, copy.steps) == (theirs.messages, theirs.steps)
            assert events_of(gathered.home, sid) == events_of(home, sid)
    assert finished, "no worker holds the finished session"
    counts = asked(provider)
    assert set(counts) == {f"s{i}" for i in range(1, STEPS + 1)}
    again = {step: n - 1 for step, n in counts.items() if n > 1}
    assert sum(again.values()) <= 1, f"asked again: {again}"


def stop(*workers: subprocess.Popen[str]) -> str:
    err = ""
    for worker in workers:
        worker.send_signal(signal.SIGCONT)
        worker.send_signal(signal.SIGINT)
    for worker in workers:
        err += worker.communicate(timeout=30)[1]
    return err


def wait_for_calls(provider: OpenAITestServer, count: int, what: str) -> None:
    deadline = time.monotonic() + 60  # a loaded machine starts processes slowly
    while len(provider.requests) < count:
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


@pytest.mark.timeout(180)
def test_a_worker_paused_past_the_ack_wait_cannot_append_to_the_session_it_lost(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path
) -> None:
    world = long_world(tmp_path, provider)
    first = start_worker(cli, nats, tmp_path / "w1", "--ack-wait", "3")
    out = tmp_path / "results.jsonl"
    batch = cli.popen(
        "batch", str(world), "--nats", nats.url, "--name", "paused", "--out", str(out)
    )
    second: subprocess.Popen[str] | None = None
    try:
        wait_for_calls(provider, 3, "the worker did not start the run")  # m3 under way
        first.send_signal(signal.SIGSTOP)
        second = start_worker(cli, nats, tmp_path / "w2", "--ack-wait", "3")
        at_stop = len(provider.requests)
        wait_for_calls(provider, at_stop + 2, "no worker took the run over")
        time.sleep(max(0.0, 8 - 3))  # paused 8 s in all (the second worker's start took some)
        first.send_signal(signal.SIGCONT)  # its generation of m3 ends, too late
        _, err = batch.communicate(timeout=120)
    finally:
        errs = stop(first, *([second] if second else []))
        batch.kill() if batch.poll() is None else None
    assert batch.returncode == 0, err
    [row] = rows(out)
    assert (row["stop_reason"], row["error"]) == ("flow_end", None)
    assert "1 taken over by another worker" in errs, errs  # the paused one stopped its copy
    sid = row["session_id"]
    check_one_writer(cli, nats, provider, tmp_path, sid)
    # readers of the live stream leave out what the paused worker appended after it lost the
    # session, as `sessions import` does: a web view following the cluster, and `watch`
    [finisher] = [
        h
        for h in sorted(tmp_path.glob("w[0-9]"))
        if holds(h, sid) and stored(h, sid).state == "finished"
    ]
    theirs = stored(finisher, sid)
    site = Site(root=tmp_path, data=tmp_path / "web-data", ids={})
    web = start_server(site, "--nats", nats.url)
    try:
        shown = json.loads(_get(f"{web.url}/api/sessions/{sid}"))
        events = json.loads(_get(f"{web.url}/api/sessions/{sid}/events?after=0"))
        listing = f'class="cluster-row" data-session="{sid}"'
        deadline = time.monotonic() + 20
        while listing not in _get(f"{web.url}/?status=finished") and time.monotonic() < deadline:
            time.sleep(0.2)  # the sessions list follows the stream's world events
        listed, paused = (_get(f"{web.url}/?status={s}") for s in ("finished", "paused"))
    finally:
        stop_server(web)
    assert shown["messages"] == theirs.messages
    assert [e for e in events if e["topic"] == "messages"] == [
        e for e in events_of(finisher, sid) if e["topic"] == "messages"
    ]
    assert listing in listed and listing not in paused  # not the paused worker's last word
    watched = cli.run("watch", "--batch", "paused", "--nats", nats.url, "--json", timeout=60)
    assert watched.returncode == 0, watched.stderr
    lines = [json.loads(line) for line in watched.stdout.splitlines()]
    assert [e for e in lines if e["topic"] == "messages"] == [
        e for e in events_of(finisher, sid) if e["topic"] == "messages"
    ]


@pytest.mark.timeout(180)
def test_a_server_down_longer_than_the_ack_wait_leaves_the_session_to_one_worker(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path
) -> None:
    world = long_world(tmp_path, provider)
    workers = [start_worker(cli, nats, tmp_path / f"w{i}", "--ack-wait", "3") for i in (1, 2)]
    out = tmp_path / "results.jsonl"
    batch = cli.popen("batch", str(world), "--nats", nats.url, "--name", "down", "--out", str(out))
    try:
        wait_for_calls(provider, 4, "no worker started the run")  # 4 calls into the run
        nats.stop()  # SIGTERM
        time.sleep(6)
        nats.start()
        _, err = batch.communicate(timeout=120)
    finally:
        errs = stop(*workers)
        batch.kill() if batch.poll() is None else None
    assert batch.returncode == 0, err
    [row] = rows(out)
    assert (row["stop_reason"], row["error"]) == ("flow_end", None)
    check_one_writer(cli, nats, provider, tmp_path, row["session_id"])
    assert "Traceback" not in errs


@pytest.mark.timeout(180)
def test_a_job_delivered_twice_is_run_by_one_worker_at_a_time(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path
) -> None:
    from rolecall.batch.results import RunResult
    from rolecall.cluster.jobs import Job, follow_results
    from rolecall.nats.link import JOBS_STREAM, connect
    from rolecall.storage.document import world_dict
    from rolecall.world.loader import load_world

    world = world_dict(load_world(long_world(tmp_path, provider)).world)
    job = Job(batch="twice", run=1, session_id="20261128-000000-dbl000", world=world)

    async def send() -> None:
        async with connect(nats.url) as link:
            for _ in range(2):  # the same job twice (a submission repeated past the window)
                await link.js.publish("rolecall_jobs.twice", job.model_dump_json().encode())

    async def results() -> list[RunResult]:
        found: list[RunResult] = []
        async with connect(nats.url) as link:
            async for item in follow_results(link, "twice"):
                if isinstance(item, RunResult):
                    found.append(item)
                if len(found) == 2:
                    return found
        raise AssertionError("no results")

    async def queued() -> int:
        async with connect(nats.url) as link:
            return int((await link.js.stream_info(JOBS_STREAM)).state.messages)

    workers = [
        start_worker(cli, nats, tmp_path / f"w{i}", "--concurrency", "1", "--ack-wait", "4")
        for i in (1, 2)
    ]
    try:
        anyio.run(send)
        found_results = anyio.run(results)  # the second delivery's, once the run ended
        for _ in range(50):
            if anyio.run(queued) == 0:
                break
            time.sleep(0.2)
        assert anyio.run(queued) == 0  # both messages acknowledged in the end
    finally:
        stop(*workers)
    assert [(r.ok, r.session_id) for r in found_results] == [(True, job.session_id)] * 2
    check_one_writer(cli, nats, provider, tmp_path, job.session_id)
