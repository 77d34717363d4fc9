"""Reply hygiene changes nothing on a well-behaved reply (real-models.md): every shipped
world on ``offline`` gives the same events, byte for byte but for the clock, with
hygiene on (the default) and off; nothing is trimmed or cut; every stop says the rule
that decided it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rolecall
from rolecall.testing import capture_events

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
WORLDS = sorted(p.parent.name for p in (ROOT / "worlds").glob("*/world.yaml"))
CLOCK = ("ts", "seconds", "started_at", "ended_at", "duration_ms")


async def run_world(name: str, hygiene: str, data_dir: Path) -> list[dict[str, Any]]:
    world = rolecall.load_world(ROOT / "worlds" / name / "world.yaml")
    settings = world.settings.model_copy(update={"reply_hygiene": hygiene})
    world = world.model_copy(update={"settings": settings})
    with capture_events() as captured:
        async with rolecall.open_session(
            world, data_dir=data_dir, model="offline", session_id="s1"
        ) as session:
            if world.flow is None and world.mode is None:  # a chat world: ask it twice
                await session.say("@all what should we try first?")
                await session.say("thanks, and what could go wrong?")
            else:
                await session.run()
    out = []
    for envelope in captured.envelopes:
        record = json.loads(envelope.to_json())
        for key in (*CLOCK, "session_id"):
            record.pop(key, None)
        out.append(record)
    return out


def test_every_shipped_world_is_covered() -> None:
    assert len(WORLDS) >= 10


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
@pytest.mark.parametrize("name", WORLDS)
async def test_a_shipped_world_is_the_same_with_hygiene_on_and_off(
    name: str, tmp_path: Path
) -> None:
    on = await run_world(name, "on", tmp_path / "on")
    off = await run_world(name, "off", tmp_path / "off")
    if name == "consult":
        # its chair's tool answers with a debate another rolecall process serves: a fresh
        # session each run, and what it says of itself varies; its shape must not
        assert [(r["type"], r.get("sender")) for r in on if r["type"] == "message"] == [
            (r["type"], r.get("sender")) for r in off if r["type"] == "message"
        ]
    else:
        assert on == off
    assert [r for r in on if r["type"] == "message"]
    assert not [r for r in on if r["type"] == "trim"]
    assert not [r for r in on if r["type"] == "message" and "finish_reason" in r]
    for stop in (r for r in on if r["type"] == "stop"):
        assert stop["detail"], stop
    for passed in (r for r in on if r["type"] == "pass"):
        assert passed["reason"], passed
