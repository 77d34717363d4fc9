"""The workers' shared consumer: its ack wait is the one every worker keeps alive by."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import anyio

from tests.cluster.conftest import scripted_world
from tests.faults import Cli
from tests.nats_server import NatsServer


def start(cli: Cli, nats: NatsServer, home: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    """A worker and what it printed on stderr up to its ``ready:`` line."""
    worker = Cli(home=home, guard=cli.guard, cwd=cli.cwd)
    proc = worker.popen("worker", "--nats", nats.url, *args, ROLECALL_STREAM_DELAY="0.03")
    assert proc.stderr is not None
    said = ""
    while not said.splitlines()[-1:] or not said.splitlines()[-1].startswith("ready:"):
        line = proc.stderr.readline()
        assert line, f"the worker ended before it was ready: {said}"
        said += line
    return proc, said


def stop(proc: subprocess.Popen[str]) -> str:
    """Stop a worker as Ctrl-C does; what it said on stderr after its ready line."""
    proc.send_signal(signal.SIGINT)
    try:
        _, err = Cli.rest(proc, timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return err


# three worker processes start (litellm's import: seconds on a loaded machine), one long run
def test_a_worker_keeps_its_job_by_the_ack_wait_in_force_not_its_own(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    started: list[subprocess.Popen[str]] = []
    ended: dict[str, str] = {}

    def worker(name: str, *args: str) -> str:
        proc, said = start(cli, nats, tmp_path / name, *args)
        started.append(proc)
        return said

    world = scripted_world(tmp_path, steps=60)  # about 10 s at the stream delay
    batch: subprocess.Popen[str] | None = None
    try:
        said = worker("w0", "--ack-wait", "3")
        assert said.strip().endswith("ack wait 3 s)"), said
        stop(started[0])  # the consumer stays, with its ack wait of 3 s

        # asks for 30 s: told it is not applied, keeps alive by 3 s (before: every 10 s,
        # and the job went to the next worker after 3 s, the session run twice)
        said = worker("w1", "--concurrency", "1", "--ack-wait", "30")
        note, ready = said.strip().splitlines()
        assert note.startswith("rolecall worker: --ack-wait 30 not applied:"), note
        assert "already has an ack wait of 3 s" in note
        assert ready.endswith("(1 at once, ack wait 3 s)"), ready

        batch = cli.popen("batch", str(world), "--nats", nats.url, "--name", "long")
        time.sleep(1.0)  # w1 has taken the one job
        said = worker("w2")  # no --ack-wait: nothing to say
        assert said.strip().splitlines() == [
            f"ready: worker pulling ROLECALL_JOBS from {nats.url} (8 at once, ack wait 3 s)"
        ]
        ready_at = time.monotonic()
        _, err = batch.communicate(timeout=60)
        assert batch.returncode == 0, err
        # w2 was ready to take the job for longer than the ack wait while it ran
        assert time.monotonic() - ready_at > 4.0, "the run was too short to tell"
        ended = {"w1": stop(started[1]), "w2": stop(started[2])}
    finally:
        if batch is not None and batch.poll() is None:
            batch.kill()
            batch.communicate()
        for proc in started:
            if proc.poll() is None:  # a failure above: none is left running
                stop(proc)
    assert "worker stopped: 1 runs done (0 failed, 0 continued from another worker)" in ended["w1"]
    assert "worker stopped: 0 runs done (0 failed, 0 continued from another worker)" in ended["w2"]


def test_workers_creating_the_consumer_at_once_agree_on_one_ack_wait(nats: NatsServer) -> None:
    from rolecall.cluster.jobs import WORKERS, workers_consumer
    from rolecall.nats.link import JOBS_STREAM, connect

    got: dict[float, float] = {}

    async def one(asked: float) -> None:
        async with connect(nats.url) as link:
            got[asked] = await workers_consumer(link, asked)

    async def both() -> float:
        async with anyio.create_task_group() as tg:
            for asked in (5.0, 50.0, 7.0):
                tg.start_soon(one, asked)
        async with connect(nats.url) as link:
            info = await link.js.consumer_info(JOBS_STREAM, WORKERS)
        assert info.config.ack_wait is not None
        return float(info.config.ack_wait)

    in_force = anyio.run(both)
    assert in_force in (5.0, 50.0, 7.0)
    assert got == {5.0: in_force, 50.0: in_force, 7.0: in_force}  # none changed it after
