"""The composition root: :func:`assemble` makes a world and an
:class:`~rolecall.api.opening.Opening` into the runtime's live session (its tools, bus,
store, memory files and session file). :func:`rolecall.api.entry.open_live` wraps what it
yields in a :class:`rolecall.Session`; nothing outside ``rolecall.api`` calls it. On the
way out the last events are stored whatever happened.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

# Sink, HandlerSink and ambient_sinks live with the Opening, world_folder with the world;
# named here too for the tests that import them from the composition root
from rolecall.api.opening import HandlerSink as HandlerSink
from rolecall.api.opening import Opening
from rolecall.api.opening import Sink as Sink
from rolecall.api.opening import ambient_sinks as ambient_sinks
from rolecall.bus import Bus, Envelope, EventBus, WarningEvent
from rolecall.errors import StorageError
from rolecall.llm.protocol import ChatModel
from rolecall.llm.registry import ModelRegistry
from rolecall.log import get_logger
from rolecall.memory import MemoryFiles
from rolecall.paths import knowledge_path
from rolecall.runtime import Dialogue
from rolecall.session.ids import new_session_id
from rolecall.session.state import SessionState
from rolecall.storage.document import (
    SessionDocument,
    restore_state,
    snapshot,
    write_session_file,
)
from rolecall.storage.port import SessionStore
from rolecall.storage.recorder import Recorder
from rolecall.tools.box import open_toolbox
from rolecall.world.folders import world_folder as world_folder
from rolecall.world.models import World

if TYPE_CHECKING:
    from rolecall.knowledge.base import KnowledgeBase

log = get_logger(__name__)


def _in_process(session_id: str, first_seq: int) -> Bus:
    return EventBus(session_id, first_seq=first_seq)


def read_memory(session: Dialogue, memory: MemoryFiles) -> dict[str, list[dict[str, Any]]]:
    return {rid: memory.read(session.session_id, rid) for rid in session.world.role_ids}


class SessionFileWriter:
    """Rewrites a session file after every turn (``--session-file``), atomically."""

    def __init__(
        self,
        path: Path,
        session: Dialogue,
        memory: MemoryFiles,
        *,
        created_at: datetime,
        world_source: str | None,
        events: list[dict[str, Any]] | None = None,
    ) -> None:
        self.path = path
        self.memory = memory
        self.created_at = created_at
        self.world_source = world_source
        self.events: list[dict[str, Any]] = list(events or [])
        session.bus.subscribe(self._keep, name="session-file")
        session.turn_hooks.append(self.write)

    def _keep(self, envelope: Envelope) -> None:
        if envelope.event.topic != "sse":
            self.events.append(envelope.to_record())

    async def write(self, session: Dialogue) -> None:
        doc = snapshot(
            session,
            created_at=self.created_at,
            world_source=self.world_source,
            events=self.events,
            memory=read_memory(session, self.memory),
        )
        await anyio.to_thread.run_sync(write_session_file, self.path, doc)


async def attach_store(
    session: Dialogue, store: SessionStore, *, world_source: str | None = None
) -> Recorder:
    """Store ``session`` in ``store`` from now on: a recorder becomes the session's recorder
    (each turn stored before it is published) and is flushed after every turn."""
    recorder = await Recorder.attach(store, session, world_source=world_source)
    session.recorder = recorder
    session.turn_hooks.append(recorder.flush)
    return recorder


def recorder_of(session: Dialogue) -> Recorder | None:
    """The recorder writing ``session`` to its store (None for a session kept in memory)."""
    recorder = session.recorder
    return recorder if isinstance(recorder, Recorder) else None


async def flush(session: Dialogue) -> None:
    """Store whatever ``session`` did since its last commit (nothing without a store);
    outside ``api/``, :meth:`rolecall.Session.flush`."""
    recorder = recorder_of(session)
    if recorder is not None:
        await recorder.flush(session)


async def save_to_file(
    session: Dialogue, store: SessionStore, memory: MemoryFiles, path: Path
) -> SessionDocument:
    """Write the session's document (as stored, plus memory files) to ``path`` atomically;
    outside ``api/``, :meth:`rolecall.Session.save_to`."""
    await flush(session)
    doc = await store.load(session.session_id)
    doc.memory = read_memory(session, memory)
    await anyio.to_thread.run_sync(write_session_file, path, doc)
    return doc


def resumed_state(doc: SessionDocument) -> SessionState:
    """The state a stored session goes on from (a run cut short is paused, not running)."""
    state = restore_state(doc)
    if state.state == "running":  # the process died mid-run: it is paused now
        state.state = "paused"
        state.pause_reason = "interrupted"
    elif state.state == "finished" and state.stop_reason == "manual":
        # a manual stop ends a run, not the dialogue: resume reopens it
        state.state = "paused"
        state.pause_reason = "manual"
        state.stop_reason = None
        state.stop_detail = ""
    return state


def model_registry(models: Mapping[str, ChatModel] | None = None) -> ModelRegistry:
    """The built-in models, with ``models`` replacing those of the same name."""
    registry = ModelRegistry()
    for name, model in (models or {}).items():
        registry.register(name, model)
    return registry


# sessions assembled and not yet closed in this process: the lean HTTP client's
# connections are closed when the last one ends (a batch's runs share them)
_live = [0]


async def _close_http_clients() -> None:
    """Close the lean OpenAI-compatible client's connections, if it was ever used."""
    lean = sys.modules.get("rolecall.llm.openai_http")
    if lean is not None:
        await lean.aclose()


@asynccontextmanager
async def assemble(world: World, opening: Opening) -> AsyncIterator[Dialogue]:
    """The runtime's live session of ``world`` as ``opening`` says: ``opening.doc``'s,
    restored, when given (``world`` is then its world, with whatever the caller changed).

    Its tools are started for as long as it lives (tools.md): the MCP servers in this
    block's task group, closed however it ends. With a NATS ``transport`` its bus is the
    transport's and the stream is told its world before anything is published; the
    world's ``transport: nats`` roles are generated by remote agents. The store, memory
    files and session file are attached; the sinks are not (nothing is published before
    :func:`rolecall.api.entry.open_live` attaches them).
    """
    o = opening
    models = o.models if o.models is not None else ModelRegistry()
    if any(role.transport == "nats" for role in world.roles):
        from rolecall.nats.agents import register_remote_roles

        link = o.transport.link if o.transport is not None else None
        register_remote_roles(models, world, link)
    bus = o.bus or (o.transport.bus if o.transport is not None else None)
    store, memory, doc, session_file, source = o.store, o.memory, o.doc, o.session_file, o.source
    replay = models.replay  # --record, --replay
    async with open_toolbox(world, source=source or world.name, replay=replay) as tools:
        session = await _new_session(
            world, store, models, o.model_override, session_id=o.session_id, doc=doc, bus=bus
        )
        session.tools = tools
        session.approver = o.approver
        if tools is not None:

            def warn(text: str) -> None:
                session.bus.publish(WarningEvent(message=text))

            tools.warn = warn
        if o.transport is not None:  # before anything is published
            from rolecall.nats.bus import NatsBus, attach

            assert isinstance(session.bus, NatsBus)
            attach(session, session.bus, world_source=source)
        recorder = (
            None if store is None else await attach_store(session, store, world_source=source)
        )
        try:
            if memory is not None:
                if doc is not None:
                    memory.reconcile(session)  # memory files hold every stored message, once
                memory.attach(session)
            writer = None
            if session_file is not None and memory is not None:
                writer = SessionFileWriter(
                    session_file,
                    session,
                    memory,
                    created_at=doc.created_at if doc else session.clock(),
                    world_source=source,
                    events=doc.events if doc else None,
                )
            failed = False
            _live[0] += 1
            try:
                yield session
            except StorageError as exc:
                failed = True
                if exc.session_id is None:  # not one of a session opened inside this one (/load)
                    exc.session_id = session.session_id  # the message can say what to resume
                    session.storage_failed(str(exc))  # stored below when the store still can be
                raise
            finally:
                _live[0] -= 1
                with anyio.CancelScope(shield=True):
                    await _last_write(session, writer, failed=failed)
        finally:
            if recorder is not None:
                recorder.release()  # another live session may go on with it now
            if session.knowledge is not None:
                session.knowledge.close()


async def _last_write(session: Dialogue, writer: SessionFileWriter | None, *, failed: bool) -> None:
    """On the way out, whatever happened: the lean HTTP client closed with the last
    session, the last events stored and the session file rewritten. A failure is
    raised (the session paused with the error stored, when the store still can),
    unless ``failed``: the same cause again, the first report says it all."""
    if not _live[0]:
        await _close_http_clients()
    try:
        await flush(session)
        if writer is not None:
            await writer.write(session)
    except StorageError as exc:
        if failed:
            log.info("final_flush_failed", session=session.session_id, error=str(exc))
        else:
            exc.session_id = session.session_id
            session.storage_failed(str(exc))
            with contextlib.suppress(StorageError):  # the store is fine when a
                await flush(session)  # session file or a memory file failed
            raise


async def _new_session(
    world: World,
    store: SessionStore | None,
    models: ModelRegistry | None,
    model_override: str | None,
    *,
    session_id: str | None,
    doc: SessionDocument | None,
    bus: Callable[[str, int], Bus] | None,
) -> Dialogue:
    """The session :func:`assemble` opens: ``doc``'s, restored (and imported into
    ``store``), or a new one; its knowledge indexed."""
    if doc is not None:
        session = Dialogue(
            world,
            state=resumed_state(doc),
            models=models,
            bus=(bus or _in_process)(doc.session_id, doc.last_seq + 1),
            model_override=model_override or doc.model_override,
            restored=True,
        )
        if session.world.settings.context_tokens is not None:
            from rolecall.knowledge.summary import stored_summaries

            # running summaries are reused, never asked for again (knowledge.md)
            messages = session.state.transcript.messages
            session.summaries = stored_summaries(doc.events, messages)
        if store is not None:
            await store.import_document(doc)
    else:
        sid = session_id or new_session_id()
        session = Dialogue(
            world,
            session_id=sid,
            models=models,
            model_override=model_override,
            bus=bus(sid, 1) if bus is not None else None,
        )
    if world.knowledge:  # indexed now: a bad document stops here, before any turn
        # (in a thread: a large collection does not hold up other sessions' event loop)
        session.knowledge = await anyio.to_thread.run_sync(open_knowledge, world, store)
    return session


def knowledge_db(store: SessionStore | None) -> Path | None:
    """Where a session's knowledge index lives: beside its SQLite store, in the data
    directory (``knowledge.db``); None (in memory) for a store without a file."""
    path = getattr(store, "path", None)
    return knowledge_path(path.parent) if isinstance(path, Path) else None


def open_knowledge(world: World, store: SessionStore | None) -> KnowledgeBase:
    """``world``'s knowledge collections, indexed where ``store`` keeps its sessions."""
    from rolecall.knowledge.base import KnowledgeBase

    return KnowledgeBase.open(world, knowledge_db(store), world_folder(world))
