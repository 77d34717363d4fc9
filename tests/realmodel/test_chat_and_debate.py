"""The panel in a piped chat with mentions, and `debate`, on the real model through both
clients (`settings.client: http` and litellm): the runtime's promises (promises.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import Cli
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
def test_chat_with_mentions(client: str, record: RecordingProxy, cli: Cli, tmp_path: Path) -> None:
    """The panel in a piped chat: the human addresses one expert, then another."""
    world = real_world("panel", tmp_path, base_url=record.base_url, client=client, cap=CAP)
    lines = "@ecologist what cools a street fastest?\n@planner and what would you do first?\n"
    done = cli.run("chat", str(world), "--json", "-q", "--max-turns", "4", stdin=lines, timeout=500)
    assert done.returncode == 0, done.stderr[-2000:]
    events = events_of(done.stdout)
    messages = check_promises(events, record, world, cap=CAP)
    senders = [m["sender"] for m in messages]
    assert senders[0] == "ecologist", senders  # the expert addressed answers first
    assert "planner" in senders, senders
    check_stored(cli.home, world, turns=4)


@pytest.mark.parametrize("client", CLIENTS)
def test_debate(client: str, record: RecordingProxy, cli: Cli, tmp_path: Path) -> None:
    world = real_world("debate", tmp_path, base_url=record.base_url, client=client, cap=CAP)
    events = run_world(cli, world, "--max-turns", TURNS)
    check_promises(events, record, world, cap=CAP)
    check_stop(events, check_stored(cli.home, world, turns=int(TURNS)))
