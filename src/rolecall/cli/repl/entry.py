"""Entry points of the REPL: ``rolecall chat`` / ``rolecall resume`` on a terminal."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.repl.app import Repl
from rolecall.cli.repl.live import open_live_session

if TYPE_CHECKING:
    import argparse

    from rolecall.api.session import Session
    from rolecall.cli.options import SessionOptions, WorldOptions
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument


async def run_repl(opts: SessionOptions, session: Session, store: DataStore) -> None:
    """The REPL over ``session`` until the human quits (``cmd_chat`` on a terminal).

    ``session`` must have been opened without the plain terminal display (see
    :func:`open_live_session`); ``/load`` opens further sessions by itself.
    """
    await Repl(opts, store).run(session)


def _run(main: Callable[[], Awaitable[None]]) -> None:
    """``anyio.run(main)``, raising a lone error as itself rather than in a group.

    Task groups wrap what fails inside them; a storage error or a lost terminal is one
    error for the user (``dispatch`` maps rolecall errors to exit codes and messages).
    """
    try:
        anyio.run(main)
    except BaseExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        if error is group:
            raise
        raise error from None


def cmd_repl(args: argparse.Namespace) -> int:
    """``python -m rolecall.cli.repl WORLD``: :func:`chat_repl` of the parsed ``args``."""
    from rolecall.cli.options import WorldOptions

    return chat_repl(WorldOptions.of(args))


def chat_repl(opts: WorldOptions) -> int:
    """``rolecall chat WORLD`` on a terminal: open the store and the session, run the REPL."""
    from rolecall.cli.running import _load, outcome

    world, source = _load(opts.world, opts)
    holder: list[Session] = []

    async def main() -> None:
        repl = Repl(opts, None)
        async with repl.booting(world):  # the prompt is up before the runtime is imported
            from rolecall.cli.wiring import open_store

            async with (
                open_store(opts) as store,
                open_live_session(opts, world, store, world_source=source) as session,
            ):
                repl.store = store
                holder.append(await repl.run(session))

    _run(main)
    return outcome(holder[0], opts)


async def resume_repl(opts: SessionOptions, store: DataStore, doc: SessionDocument) -> Session:
    """The REPL over a stored session (``cmd_resume`` on a terminal); the last session."""
    from rolecall.cli.repl.live import left_from_repl
    from rolecall.cli.running import apply_overrides

    if opts.mode is None:  # the mode it was left in
        opts = replace(opts, mode=left_from_repl(doc.state.extra) or "auto")
    world = apply_overrides(doc.world_model(), opts)
    async with open_live_session(opts, world, store, doc=doc) as session:
        if opts.more_turns is not None:  # resume --more-turns N: N more, then paused
            from rolecall.cli.running import pause_after

            pause_after(session, opts.more_turns)
        return await Repl(opts, store).run(session)


def cmd_resume_repl(args: argparse.Namespace) -> int:
    """``rolecall resume SESSION`` on a terminal: the REPL over a stored session or file."""
    from rolecall.api.entry import find_session
    from rolecall.cli.options import ResumeOptions
    from rolecall.cli.running import outcome
    from rolecall.cli.wiring import open_store

    opts = ResumeOptions.of(args)
    holder: list[Session] = []

    async def main() -> None:
        async with open_store(opts) as store:
            doc, notice = await find_session(store, opts.session)  # as `rolecall resume`
            if notice:
                print(notice, file=sys.stderr)
            holder.append(await resume_repl(opts, store, doc))

    _run(main)
    return outcome(holder[0], opts)
