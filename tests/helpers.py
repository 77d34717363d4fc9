"""Building and running small worlds in tests."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from typing import Any

import pytest
import yaml

import rolecall
from rolecall.bus import Bus, Envelope
from rolecall.llm.protocol import ChatModel
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
    """Collects every envelope a session publishes: a sink (``sinks=[Recorder()]``,
    attached before anything is published; :func:`opened` attaches one)."""

    def __init__(self) -> None:
        self.events: list[Envelope] = []

    def attach(self, bus: Bus) -> None:
        bus.subscribe(self.events.append, name="recorder")

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


@asynccontextmanager
async def opened(
    world: World, *, models: Mapping[str, ChatModel] | None = None, **kwargs: Any
) -> AsyncIterator[tuple[rolecall.Session, Recorder]]:
    """``world`` opened as a user opens it (:func:`rolecall.open_session`, in memory unless
    ``data_dir``/``store`` is given), with a :class:`Recorder` attached before anything is
    published. ``models`` replaces the built-in models of those names
    (``{"offline": FunctionModel(fn)}``)."""
    rec = Recorder()
    async with rolecall.open_session(world, models=models, sinks=[rec], **kwargs) as session:
        yield session, rec


async def run_flow(
    world: World, *, models: Mapping[str, ChatModel] | None = None, **kwargs: Any
) -> tuple[rolecall.Session, Recorder]:
    """``world`` opened (:func:`opened`) and run until it finishes or pauses; the session
    (closed: read its ``transcript``, ``status``, ``result``) and what it published."""
    async with opened(world, models=models, **kwargs) as (session, rec):
        await session.run()
    return session, rec


_RECORD_FIELDS = frozenset(logging.makeLogRecord({}).__dict__) | {"message", "asctime"}


def logged(caplog: pytest.LogCaptureFixture, prefix: str = "rolecall") -> list[dict[str, Any]]:
    """What rolecall logged during the test (``caplog.set_level`` first), each record as
    a dict of its ``event``, ``log_level`` and values: read from the stdlib records, so
    it holds whichever structlog configuration the process has (the library's, or the
    command line's after a test ran ``main()`` in this process, whose loggers are cached
    on first use and escape ``structlog.testing.capture_logs``)."""
    out: list[dict[str, Any]] = []
    for record in caplog.records:
        if not record.name.startswith(prefix):
            continue
        if isinstance(record.msg, dict):  # the command line's (ProcessorFormatter)
            entry = dict(record.msg)
        else:  # the library's (render_to_log_kwargs): the values are the record's extras
            entry = {k: v for k, v in vars(record).items() if k not in _RECORD_FIELDS}
            entry["event"] = record.getMessage()
        entry.setdefault("log_level", record.levelname.lower())
        out.append(entry)
    return out
