"""Putting a live session together for the command line.

Opens the SQLite store in the data directory, attaches the session to it, to the
passive memory files, to an optional session file rewritten every turn, and to the
display; on the way out the last events are stored whatever happened.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

import anyio
from anyio.abc import TaskStatus

from rolecall.api.entry import open_live
from rolecall.api.opening import Opening
from rolecall.api.session import Session
from rolecall.api.tuning import tune_gc
from rolecall.badges import labels_of
from rolecall.bus import Bus
from rolecall.cli.display import attach_display
from rolecall.cli.palette import use_color
from rolecall.errors import first_rolecall_error
from rolecall.llm.pacing import env_stream_delay
from rolecall.llm.registry import ModelRegistry
from rolecall.log import get_logger
from rolecall.memory import MemoryFiles
from rolecall.paths import data_dir
from rolecall.storage.data_store import DataStore, open_data_store
from rolecall.storage.document import (
    SessionDocument,
)
from rolecall.storage.port import SessionStore
from rolecall.world.models import World

if TYPE_CHECKING:
    from rolecall.cli.options import Options, SessionOptions
    from rolecall.llm.replay import ReplaySetup
    from rolecall.nats.transport import Transport
    from rolecall.tools.approval import Approver

log = get_logger(__name__)


@asynccontextmanager
async def open_store(opts: Options) -> AsyncIterator[DataStore]:
    async with open_data_store(data_dir(opts.data_dir)) as store:
        yield store


def memory_files(opts: Options) -> MemoryFiles:
    return MemoryFiles.in_data_dir(data_dir(opts.data_dir))


class Pacing(TypedDict, total=False):
    """Keyword arguments of :class:`ModelRegistry` for the built-in models' pacing."""

    offline_delay: float
    scripted_delay: float


def stream_pacing(json_mode: bool) -> Pacing:
    """Seconds between streamed words of the built-in models.

    ``ROLECALL_STREAM_DELAY`` sets it for offline and scripted models (demos, tests of
    interruption); otherwise the offline model is paced only on a terminal, never in
    pipes or with ``--json``.
    """
    delay = env_stream_delay()
    if delay is not None:
        return {"offline_delay": delay, "scripted_delay": delay}
    paced = not json_mode and use_color(sys.stdout)
    return {"offline_delay": 0.015 if paced else 0.0}


@asynccontextmanager
async def session_transport(opts: Options) -> AsyncIterator[Transport | None]:
    """The NATS transport of ``--nats URL`` (or ``ROLECALL_NATS_URL``); None for in-process."""
    from rolecall.nats.link import nats_url

    url = nats_url(opts.nats)
    if url is None:
        yield None
        return
    from rolecall.nats.transport import open_transport

    async with open_transport(url) as transport:
        yield transport


@asynccontextmanager
async def live_session(
    opts: SessionOptions,
    world: World,
    store: SessionStore,
    *,
    world_source: str | None = None,
    doc: SessionDocument | None = None,
    display: Callable[[Bus], object] | None = None,
    transport: Transport | None = None,
) -> AsyncIterator[Session]:
    """A stored, displayed session; a restored one when ``doc`` is given.

    ``display`` attaches the caller's own display to the bus (the REPL's); by default
    the plain terminal display or the JSON stream is attached. With a ``transport``
    (``--nats``) every event also goes to the cluster's stream.
    """
    json_mode = opts.json
    models = ModelRegistry(**stream_pacing(json_mode), replay=replay_setup(opts, world))
    override = opts.model or os.environ.get("ROLECALL_MODEL") or None
    from rolecall import debuglog, tracing

    tracers: list[tracing.SessionTracer] = []

    def created(session: Session) -> None:
        """Before anything is published: the display, debug logs, traces."""
        if display is not None:
            display(session.bus)
        else:  # a resumed session's display goes on from what was said and spent
            spent, said = session.result, session.transcript
            attach_display(
                session.bus,
                json_mode=json_mode,
                role_order=world.role_ids,
                quiet=opts.quiet,
                verbose=opts.verbose,
                totals=(spent.input_tokens, spent.output_tokens),
                cost=spent.cost,
                labels=labels_of(world),
                turns=sum(1 for message in said if message.kind == "agent"),
                earlier={message.id: message for message in said},
            )
        if debuglog.debug_enabled():
            debuglog.log_events(session)
        if tracing.configured():
            tracers.append(tracing.trace_session(session))

    session_file = opts.session_file
    opening = Opening(
        store=store,
        memory=memory_files(opts),
        models=models,
        model_override=override,
        doc=doc,
        world_source=world_source,
        session_file=Path(session_file) if session_file else None,
        transport=transport,
        approver=approver_of(opts),
    )
    # a write that fails pauses the session (reason error) after a system/error event:
    # the JSON stream ends with them (events.md), the store keeps them when it still
    # can (api/compose.py), the terminal display leaves it to the command's own message
    try:
        async with open_live(world, opening, on_created=created) as session:
            tune_gc()  # set up: freeze it, collect less often (api/tuning.py)
            yield session
    finally:
        for tracer in tracers:
            tracer.close()


def approver_of(opts: SessionOptions) -> Approver | None:
    """``--approve auto|deny`` (tools.md); None: an ``ask`` call is refused."""
    value = opts.approve
    if value is None:
        return None
    from rolecall.tools.approval import flag_approver

    return flag_approver(value)


def replay_setup(opts: SessionOptions, world: World | None) -> ReplaySetup | None:
    """Record or replay model calls: the CLI flags win over ``settings.replay``."""
    mode = opts.replay
    settings = world.settings if world is not None else None
    if mode is None and settings is not None and settings.replay != "off":
        mode = settings.replay
    if mode is None:  # neither a flag nor settings.replay (other than off)
        return None
    from rolecall.llm.replay import ReplaySetup, ReplayStore

    file = opts.replay_file or (settings.replay_file if settings else None)
    path = Path(file) if file else data_dir(opts.data_dir) / "replay.jsonl"
    store = ReplayStore(path)
    store.load()  # a corrupt store is a usage error now, not in the middle of a turn
    return ReplaySetup(mode, store)


TERMINATED = threading.Event()  # SIGTERM was received: the command exits 143 (128 + 15)


async def with_interrupts(session: Session, body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body``; Ctrl-C pauses the session, keeping whatever was said.

    A generation in progress is cancelled (its partial text kept as a draft); with no
    turn running (waiting for input, between turns), ``body`` itself is cancelled.
    """
    try:
        await _watch_interrupts(session, body)
    except BaseExceptionGroup as group:  # report the failure itself, not the group
        failure = first_rolecall_error(group)
        if failure is None:
            raise
        raise failure from None


async def _watch_interrupts(session: Session, body: Callable[[], Awaitable[None]]) -> None:
    interrupted = False
    async with anyio.create_task_group() as tg:
        body_scope = anyio.CancelScope()

        async def watch(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
            nonlocal interrupted
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                task_status.started()  # Ctrl-C (and a service manager's stop) is ours now
                async for signum in signals:
                    interrupted = True
                    if signum == signal.SIGTERM:  # stop now, like Ctrl-C pressed twice
                        TERMINATED.set()
                        session.interrupt()
                    elif session.interrupt():
                        continue  # the reply is cut: its turn pauses the session
                    if not session.busy:
                        body_scope.cancel()

        await tg.start(watch)
        with body_scope:
            await body()
        tg.cancel_scope.cancel()
    if interrupted and session.status.state in ("running", "created"):
        session.pause("interrupted", now=True)
