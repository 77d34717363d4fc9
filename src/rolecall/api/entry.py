"""The public entry points: load a world, open (or resume) a session, run one in one call."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AsyncExitStack,
    asynccontextmanager,
    contextmanager,
)
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from rolecall.api.compose import assemble, model_registry
from rolecall.api.opening import Opening, Sink, ambient_sinks
from rolecall.api.session import Mode, Result, Session
from rolecall.errors import UsageError
from rolecall.llm.protocol import ChatModel
from rolecall.log import get_logger
from rolecall.memory import MemoryFiles
from rolecall.storage.data_store import open_data_store
from rolecall.storage.document import SessionDocument, read_session_file
from rolecall.storage.port import SessionStore
from rolecall.world.models import World

if TYPE_CHECKING:
    from rolecall.nats.transport import Transport
    from rolecall.tools.approval import Approver

log = get_logger(__name__)

PathLike = str | os.PathLike[str]


class _Default:
    def __repr__(self) -> str:
        return "<the data directory's store>"


DEFAULT: Any = _Default()


def load_world(
    source: World | PathLike | Mapping[str, Any], *, data_dir: PathLike | None = None
) -> World:
    """A world from a folder or ``world.yaml`` path, a name under ``./worlds/``, or a dict.

    The dict is what the YAML file holds. Roles may use templates of the built-in role
    library and of ``<data_dir>/roles/``. Raises :class:`rolecall.WorldError` listing every
    problem; warnings (unreachable steps) go to the ``rolecall`` logger.
    """
    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world
    from rolecall.world.loader import load_world as load_file

    if isinstance(source, World):
        return source
    library = RoleLibrary(Path(data_dir) / "roles" if data_dir is not None else None)
    if isinstance(source, Mapping):
        loaded = build_world(dict(source), source="<dict>", library=library)
    else:
        loaded = load_file(source if isinstance(source, str) else Path(source), library)
    for warning in loaded.warnings:
        log.warning("world_warning", world=loaded.world.name, warning=warning)
    return loaded.world


@asynccontextmanager
async def _store(
    stack: AsyncExitStack, data_dir: PathLike | None, store: Any
) -> AsyncIterator[SessionStore | None]:
    if store is DEFAULT:
        if data_dir is None:
            yield None
            return
        store = await stack.enter_async_context(open_data_store(Path(data_dir)))
    yield store


@asynccontextmanager
async def _open(
    world: World | None,
    *,
    data_dir: PathLike | None,
    store: Any,
    model: str | None,
    models: Mapping[str, ChatModel] | None,
    mode: Mode,
    session_id: str | None,
    sinks: Iterable[Sink],
    target: PathLike | None = None,
    transport: Transport | None = None,
    nats: str | None = None,
    approver: Approver | None = None,
) -> AsyncIterator[Session]:
    if mode not in ("auto", "step"):
        raise UsageError(f"mode must be 'auto' or 'step', got {mode!r}")
    async with AsyncExitStack() as stack:
        if transport is None and nats is not None:  # as ``--nats URL`` connects
            from rolecall.nats.link import nats_url
            from rolecall.nats.transport import open_transport

            url = nats_url(nats)
            assert url is not None
            transport = await stack.enter_async_context(open_transport(url))
        opened = await stack.enter_async_context(_store(stack, data_dir, store))
        doc = None
        if target is not None:
            doc, notice = await find_session(opened, target)
            if notice:
                log.info("resume_choice", notice=notice)
            world = doc.world_model()
        assert world is not None
        memory = MemoryFiles.in_data_dir(Path(data_dir)) if data_dir is not None else None
        opening = Opening(
            store=opened,
            memory=memory,
            models=model_registry(models),
            model_override=model,
            session_id=session_id,
            doc=doc,
            sinks=tuple(sinks),
            transport=transport,
            approver=approver,
        )
        async with open_live(world, opening, mode=mode) as session:
            yield session


@asynccontextmanager
async def open_live(
    world: World,
    opening: Opening | None = None,
    *,
    mode: Mode = "auto",
    on_created: Callable[[Session], None] | None = None,
) -> AsyncIterator[Session]:
    """The one way every session is opened: :func:`open_session`, :func:`resume`, the web
    view's, the command line's and the REPL's, a batch's runs, a cluster worker's jobs and
    the benchmarks. What differs between them is data in ``opening``
    (:class:`rolecall.api.opening.Opening`: where it is stored, what shows it, what carries
    its events). :func:`rolecall.api.compose.assemble` makes the runtime's session of it;
    the :class:`Session` is made around that, with the task group its work runs in.
    ``on_created`` sees the session before anything is published (before
    ``opening.sinks`` are attached): a display or a tracer subscribes there.

    Leaving the block pauses a session still running (reason ``closed``) and ends the
    readers of its events; the last events are stored whatever happened.
    """
    opening = opening or Opening()
    async with assemble(world, opening) as inner:
        with _lone_errors():  # the composition's error handling sees the error itself
            async with anyio.create_task_group() as tg:
                session = Session(inner, mode, tg)
                if on_created is not None:
                    on_created(session)
                for sink in (*ambient_sinks.get(), *opening.sinks):
                    sink.attach(inner.bus)
                failure: BaseException | None = None
                try:
                    yield session
                except BaseException as exc:
                    failure = exc
                    raise
                finally:
                    await session._close(failure)


def open_served(
    world: World | None,
    *,
    session: PathLike | None = None,
    data_dir: PathLike | None = None,
    store: Any = DEFAULT,
    model: str | None = None,
    models: Mapping[str, ChatModel] | None = None,
    sinks: Iterable[Sink] = (),
    transport: Transport | None = None,
    approver: Approver | None = None,
) -> AbstractAsyncContextManager[Session]:
    """:func:`open_session` of ``world``, or :func:`resume` of ``session``, on a NATS
    ``transport`` when one is given, as ``rolecall run --nats`` runs it: its events also
    go to the cluster's stream and its ``transport: nats`` roles are generated by remote
    agents; ``approver`` answers the tool calls a role must ask for (tools.md). Not part
    of the public API: the web view's sessions."""
    return _unwrapped(
        _open(
            load_world(world, data_dir=data_dir) if world is not None else None,
            data_dir=data_dir,
            store=store,
            model=model,
            models=models,
            mode="auto",
            session_id=None,
            sinks=sinks,
            target=session,
            transport=transport,
            approver=approver,
        )
    )


@asynccontextmanager
async def _unwrapped(manager: AbstractAsyncContextManager[Session]) -> AsyncIterator[Session]:
    """``manager``, raising a lone error of a task group it opens as itself, not in a group."""
    with _lone_errors():
        async with manager as session:
            yield session


@contextmanager
def _lone_errors() -> Iterator[None]:
    """A group of one error (a task group's) raised as that error."""
    try:
        yield
    except BaseExceptionGroup as group:
        leaves = _leaves(group)
        if len(leaves) == 1:
            raise leaves[0] from None
        raise


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    out: list[BaseException] = []
    for exc in group.exceptions:
        out.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return out


def open_session(
    world: World | PathLike | Mapping[str, Any],
    *,
    data_dir: PathLike | None = None,
    store: Any = DEFAULT,
    model: str | None = None,
    models: Mapping[str, ChatModel] | None = None,
    mode: Mode = "auto",
    session_id: str | None = None,
    sinks: Iterable[Sink] = (),
    nats: str | None = None,
) -> AbstractAsyncContextManager[Session]:
    """A new session of ``world``, live inside ``async with``.

    ``data_dir``: store it (``<data_dir>/rolecall.db``) and write the agents' memory
    files there; with neither it nor ``store`` the session lives in memory only.
    ``store``: an open store to use instead. ``model`` replaces every role's model but
    ``scripted``; ``models`` maps model names to model objects that replace the built-in
    ones of those names. ``mode="step"``: nothing runs until :meth:`Session.step`.
    ``sinks`` see every event (any object with ``attach(bus)``, ``rolecall.Sink``). ``nats``: a NATS
    server's URL, as ``--nats URL``: every event also goes to the cluster's stream, and
    the world's ``transport: nats`` roles are generated by ``rolecall agent`` processes.
    """
    return _unwrapped(
        _open(
            load_world(world, data_dir=data_dir),
            data_dir=data_dir,
            store=store,
            model=model,
            models=models,
            mode=mode,
            session_id=session_id,
            sinks=sinks,
            nats=nats,
        )
    )


def resume(
    session: PathLike,
    *,
    data_dir: PathLike | None = None,
    store: Any = DEFAULT,
    model: str | None = None,
    models: Mapping[str, ChatModel] | None = None,
    mode: Mode = "auto",
    sinks: Iterable[Sink] = (),
    nats: str | None = None,
) -> AbstractAsyncContextManager[Session]:
    """A stored session (its id, in ``data_dir`` or ``store``) or a session file, live again.

    Nothing is regenerated: the session goes on from its last stored turn.
    """
    return _unwrapped(
        _open(
            None,
            data_dir=data_dir,
            store=store,
            model=model,
            models=models,
            mode=mode,
            session_id=None,
            sinks=sinks,
            target=session,
            nats=nats,
        )
    )


async def run(
    world: World | PathLike | Mapping[str, Any],
    *,
    data_dir: PathLike | None = None,
    store: Any = DEFAULT,
    model: str | None = None,
    models: Mapping[str, ChatModel] | None = None,
    mode: Mode = "auto",
    session_id: str | None = None,
    sinks: Iterable[Sink] = (),
    nats: str | None = None,
) -> Result:
    """Open a session of ``world``, run it until it finishes or pauses, return its result."""
    async with open_session(
        world,
        data_dir=data_dir,
        store=store,
        model=model,
        models=models,
        mode=mode,
        session_id=session_id,
        sinks=sinks,
        nats=nats,
    ) as session:
        return await session.run()


def session_file_of(target: PathLike) -> SessionDocument | None:
    """The document of ``target`` when it names a session file (``.json``, or a file);
    None for a session id. A damaged file is a usage error: callers read it before they
    open a store, so that a file refused leaves no new database behind."""
    path = Path(target)
    if path.suffix == ".json" or path.is_file():
        return read_session_file(path)
    return None


async def find_session(
    store: SessionStore | None, target: PathLike, *, read: SessionDocument | None = None
) -> tuple[SessionDocument, str | None]:
    """The document of a session file, or of a stored session by id; and a notice.

    A session file goes through :func:`stored_or_file`: the stored copy of its session
    when the store has one as new or newer. ``read``: the file's document, already read
    (:func:`session_file_of`).
    """
    path = Path(target)
    if read is None:
        read = session_file_of(path)
    if read is not None:
        return await stored_or_file(store, read, path)
    if store is None:
        raise UsageError(
            f"'{target}' is not a session file, and there is no store to find a session id "
            "in (pass data_dir= or store=)"
        )
    resolve = getattr(store, "resolve_id", None)  # ``last`` or a unique prefix (SQLite)
    sid = await resolve(str(target)) if resolve is not None else str(target)
    return await store.load(sid), None


async def stored_or_file(
    store: SessionStore | None, doc: SessionDocument, path: PathLike
) -> tuple[SessionDocument, str | None]:
    """What to go on from for ``doc``, read from the session file ``path``; and a notice.

    A session the store does not hold is ``doc`` itself (imported when it is opened). One
    it holds is never imported twice: the stored copy is used when it has as many
    messages or more (the notice says so; the file may be an older snapshot of it), and
    an older stored copy is refused, as the two may differ.
    """
    if store is None or not await store.has(doc.session_id):
        return doc, None
    stored = await store.load(doc.session_id)
    if len(stored.messages) >= len(doc.messages):
        return stored, (
            f"session {doc.session_id} is already stored here ({_count(stored.messages)}; "
            f"{path} has {_count(doc.messages)}): resuming the stored one"
        )
    raise UsageError(
        f"{path} holds {len(doc.messages)} messages of session {doc.session_id}, but "
        f"{len(stored.messages)} of them are stored in this data directory and they may "
        "differ: resume the file with another --data-dir, or resume the stored session by id"
    )


def _count(messages: Sequence[object]) -> str:
    return f"{len(messages)} message" + ("" if len(messages) == 1 else "s")
