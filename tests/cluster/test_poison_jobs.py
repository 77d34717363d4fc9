"""Jobs no worker can run, on a real ``nats-server -js``: failed and acknowledged, and the
worker goes on with the next job."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import anyio

from tests.cluster.conftest import scripted_world
from tests.cluster.test_workers import messages_of, start_worker
from tests.faults import Cli
from tests.nats_server import NatsServer


def test_a_job_no_worker_can_run_is_failed_and_acknowledged_and_the_worker_goes_on(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    from rolecall.batch.results import RunResult
    from rolecall.cluster.jobs import Job, follow_results
    from rolecall.nats.link import JOBS_STREAM, connect
    from rolecall.storage.document import world_dict
    from rolecall.world.loader import load_world

    world = world_dict(load_world(scripted_world(tmp_path, steps=2)).world)
    good = Job(batch="poison", run=3, session_id="20261128-000000-abcdef", world=world)
    jobs = [
        good.model_copy(update={"batch": "other.batch", "run": 1}),  # splits a subject
        good.model_copy(update={"session_id": "", "run": 2}),  # no session to continue
        good.model_copy(update={"session_id": "../escape", "run": 4}),  # not a safe id
        good,
    ]

    async def send() -> None:
        async with connect(nats.url) as link:
            for job in jobs:  # as another program (or an older rolecall) could put them
                await link.js.publish("rolecall_jobs.poison", job.model_dump_json().encode())

    async def results() -> dict[int, RunResult]:
        found: dict[int, RunResult] = {}
        async with connect(nats.url) as link:
            async for item in follow_results(link, "poison"):
                if isinstance(item, RunResult):
                    found[item.run] = item
                if len(found) == 3:
                    return found
        raise AssertionError("no results")

    async def queued() -> int:
        async with connect(nats.url) as link:
            return int((await link.js.stream_info(JOBS_STREAM)).state.messages)

    anyio.run(send)
    worker = start_worker(cli, nats, tmp_path / "w")
    try:
        found = anyio.run(results)
        assert worker.poll() is None, "the worker exited for a job"
        for _ in range(50):  # the last acknowledgement follows its result
            if anyio.run(queued) == 0:
                break
            time.sleep(0.1)
        assert anyio.run(queued) == 0  # every job acknowledged: none is delivered again
    finally:
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=15)
    assert worker.returncode == 0, err
    assert "worker stopped: 4 runs done (3 failed, 0 continued from another worker)" in err
    assert found[2].error == ("the job cannot be run: it has no session id (an empty session_id)")
    assert found[2].session_id is None
    assert found[4].error is not None
    assert "session id '../escape' is not safe" in found[4].error
    assert (found[3].ok, found[3].session_id) == (True, good.session_id)
    # one session only: the empty session id started none
    assert list(messages_of(tmp_path / "w")) == [good.session_id]
    refused = [
        json.loads(line)
        for line in (tmp_path / "w.log").read_text("utf-8").splitlines()
        if '"job_refused"' in line
    ]
    assert [(r["batch"], r["run"]) for r in refused] == [("other.batch", 1)]
    assert "'.'" in refused[0]["error"]
