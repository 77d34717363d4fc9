"""Every shipped world with a flow or a mode, on the real model (SmolLM2-135M-Instruct
through llama.cpp's server), through the lean client, to its stop: the runtime's
promises (promises.py) checked against what the server saw and said.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.faults import Cli
from tests.realmodel import SHIPPED, real_world
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


# the panel (a chat world), debate and study have tests of their own, on both clients
FLOW_WORLDS = [w for w in SHIPPED if w not in ("panel", "debate", "study")]


@pytest.mark.parametrize("name", FLOW_WORLDS)
def test_every_shipped_world_keeps_the_runtimes_promises(
    name: str, record: RecordingProxy, cli: Cli, tmp_path: Path
) -> None:
    """Each world with a flow or a mode, through the lean client, to its stop."""
    world = real_world(name, tmp_path, base_url=record.base_url, client="http", cap=CAP)
    events = run_world(cli, world, "--max-turns", TURNS, "--approve", "auto")
    check_promises(events, record, world, cap=CAP)
    check_stop(events, check_stored(cli.home, world, turns=int(TURNS)))
