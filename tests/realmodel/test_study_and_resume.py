"""`study`, and a run resumed on the real model, through both clients: the runtime's
promises (promises.py), and resume asking nothing of the model again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import Cli, stored
from tests.realmodel import CLIENTS, events_of, real_world
from tests.realmodel.promises import (
    CAP,
    TURNS,
    check_promises,
    check_stop,
    check_stored,
    run_world,
)
from tests.realmodel.proxy import RecordingProxy

# a reply needs 2-10 s of CPU here; a world of a few replies and a litellm import fits
pytestmark = [pytest.mark.realmodel, pytest.mark.timeout(600)]


@pytest.mark.parametrize("client", CLIENTS)
def test_study(client: str, record: RecordingProxy, cli: Cli, tmp_path: Path) -> None:
    world = real_world("study", tmp_path, base_url=record.base_url, client=client, cap=CAP)
    events = run_world(cli, world, "--max-turns", TURNS)
    check_promises(events, record, world, cap=CAP)
    check_stop(events, check_stored(cli.home, world, turns=int(TURNS)))


@pytest.mark.parametrize("client", CLIENTS)
def test_resume_regenerates_nothing(
    client: str, record: RecordingProxy, cli: Cli, tmp_path: Path
) -> None:
    """One turn in step mode (paused at the end of input), then resumed for two turns
    more: the stored messages are kept as they were, none is asked of the model again,
    and each request after the resume is for a new message."""
    world = real_world("classroom", tmp_path, base_url=record.base_url, client=client, cap=CAP)
    done = cli.run("run", str(world), "--mode", "step", "--json", "-q", stdin="\n", timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    check_promises(events_of(done.stdout), record, world, cap=CAP)
    before = stored(cli.home)
    assert before.state == "paused" and len(before.generations) == 1
    record.record.clear()
    args = ("resume", before.id, "--mode", "auto", "--max-turns", "2", "--json", "-q")
    done = cli.run(*args, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    resumed = events_of(done.stdout)
    check_promises(resumed, record, world, cap=CAP)
    after = stored(cli.home, before.id)
    assert after.messages[: len(before.messages)] == before.messages
    new = after.messages[len(before.messages) :]
    assert [m["kind"] for m in new].count("agent") == 2, new
    started = [e["message_id"] for e in resumed if (e["topic"], e["type"]) == ("sse", "start")]
    assert started == [m["id"] for m in new if m["kind"] == "agent"]
    assert len(record.record.exchanges) == len(started)  # nothing asked again
    assert after.state == "paused" and after.pause_reason == "more_turns"
    assert all(count == 1 for count in after.generations.values())
    check_stored(cli.home, world)
