"""A worker stopped (SIGINT, as ``rolecall worker`` is stopped by hand) in the middle of a
run, on a real ``nats-server -js``: the session it leaves is paused (reason ``closed``,
as every opening that is left while its session runs: docs/events.md) in the stream, not
shown running while no worker runs it; the next worker takes the job after the ack wait
and goes on from the last committed turn, and the batch's result is the finished run."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.cluster.test_fence import events_of, wait_for_calls
from tests.cluster.test_workers import messages_of, provider, provider_world, rows, start_worker
from tests.faults import Cli
from tests.llm.openai_server import OpenAITestServer
from tests.nats_server import NatsServer

__all__ = ["provider"]


@pytest.mark.timeout(150)
def test_a_worker_stopped_mid_run_leaves_its_session_paused_for_the_next_worker(
    cli: Cli, nats: NatsServer, provider: OpenAITestServer, tmp_path: Path
) -> None:
    world = provider_world(tmp_path, provider)
    first = start_worker(cli, nats, tmp_path / "w1", "--ack-wait", "2")
    out = tmp_path / "results.jsonl"
    batch = cli.popen(
        "batch", str(world), "--nats", nats.url, "--name", "stopped", "--out", str(out),
    )  # fmt: skip
    # past its first turn, in the middle of the second
    wait_for_calls(provider, 2, "the worker did not start the run")
    first.send_signal(signal.SIGINT)
    _, first_err = first.communicate(timeout=15)
    assert first.returncode == 0, first_err
    assert "worker stopped: 0 runs done" in first_err
    second = start_worker(cli, nats, tmp_path / "w2", "--ack-wait", "2")
    try:
        _, err = batch.communicate(timeout=45)
    finally:
        second.send_signal(signal.SIGINT)
        _, second_err = second.communicate(timeout=15)
    assert batch.returncode == 0, err
    assert "1 runs done (0 failed, 1 continued from another worker)" in second_err
    assert [(r["run"], r["stop_reason"], r["turns"], r["error"]) for r in rows(out)] == [
        (1, "flow_end", 3, None)
    ]

    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", "--batch", "stopped", "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    ((sid, said),) = messages_of(gathered.home).items()
    assert [mid for mid, _ in said] == ["m1", "m2", "m3"]
    states = [
        (e["state"], e["reason"])
        for e in events_of(gathered.home, sid)
        if (e["topic"], e["type"]) == ("world", "session")
    ]
    assert states == [
        ("created", None),
        ("running", None),
        ("paused", "closed"),  # the first worker stopped: nobody runs it
        ("running", None),  # the second worker goes on
        ("finished", "flow_end"),
    ]
