"""Building and running small worlds in tests."""

from __future__ import annotations

from typing import Any

import yaml

from rolecall.bus import Envelope
from rolecall.runtime import Dialogue
from rolecall.world.loader import parse_world
from rolecall.world.models import World


def world_from(data: dict[str, Any] | str) -> World:
    text = data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False)
    return parse_world(text).world


def scripted_world(
    steps: list[dict[str, Any]], *, roles: list[str] | None = None, **extra: Any
) -> World:
    """A world of scripted roles; each says `<id> {n}` unless a script is given."""
    ids = roles or sorted({s["speaker"] for s in steps})
    data: dict[str, Any] = {
        "name": "t",
        "topic": "testing",
        "model": "scripted",
        "roles": [{"id": r, "script": [f"{r} says {{n}}"]} for r in ids],
        "flow": {"steps": steps},
    }
    flow_extra = {k: extra.pop(k) for k in ("stop", "start") if k in extra}
    data["flow"].update(flow_extra)
    data.update(extra)
    return world_from(data)


class Recorder:
    """Collects every envelope a session publishes."""

    def __init__(self, session: Dialogue) -> None:
        self.events: list[Envelope] = []
        session.bus.subscribe(self.events.append, name="recorder")

    def of(self, topic: str, kind: str | None = None) -> list[Any]:
        return [
            e.event
            for e in self.events
            if e.event.topic == topic and (kind is None or e.event.type == kind)
        ]

    def steps(self) -> list[str]:
        return [e.step_id for e in self.of("system", "step")]

    def stop(self) -> Any:
        stops = self.of("world", "stop")
        assert len(stops) == 1, f"expected exactly one world/stop, got {len(stops)}"
        return stops[0]


async def run_flow(world: World, **kwargs: Any) -> tuple[Dialogue, Recorder]:
    session = Dialogue(world, **kwargs)
    rec = Recorder(session)
    await session.run()
    return session, rec
