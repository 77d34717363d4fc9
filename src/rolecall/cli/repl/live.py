"""Session wiring of the REPL: a live session without the plain display, quitting, logs."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.bus import Bus
    from rolecall.cli.options import SessionOptions
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument
    from rolecall.world.models import World


@asynccontextmanager
async def open_live_session(
    opts: SessionOptions,
    world: World,
    store: DataStore,
    *,
    world_source: str | None = None,
    doc: SessionDocument | None = None,
) -> AsyncIterator[Session]:
    """``wiring.live_session`` without its terminal display (the REPL brings its own)."""
    from rolecall.cli import wiring

    def no_display(bus: Bus) -> None:
        return None  # the REPL subscribes its own display

    async with (
        wiring.session_transport(opts) as transport,
        wiring.live_session(
            opts,
            world,
            store,
            world_source=world_source,
            doc=doc,
            display=no_display,
            transport=transport,
        ) as session,
    ):
        yield session


@contextmanager
def _logs_above_prompt(verbose: int) -> Iterator[None]:
    """Send console logs through the patched stderr (above the prompt); quieter by default.

    The display shows failures itself, so below ``-v`` only errors are logged there.
    """
    changed: list[tuple[logging.StreamHandler[Any], Any, int]] = []
    for handler in logging.getLogger().handlers:
        if isinstance(handler, logging.StreamHandler) and not isinstance(
            handler, logging.FileHandler
        ):
            changed.append((handler, handler.stream, handler.level))
            handler.setStream(sys.stderr)
            if verbose <= 0:
                handler.setLevel(max(handler.level, logging.ERROR))
    try:
        yield
    finally:
        for handler, stream, level in changed:
            handler.setStream(stream)
            handler.setLevel(level)


def _quiet_args(opts: SessionOptions) -> SessionOptions:
    """``opts`` for a session switched to with /load: no --session-file of the first one."""
    from dataclasses import replace

    return replace(opts, session_file=None)


REPL_KEY = "repl"  # state.extra[REPL_KEY]: {"mode": "auto"|"step"} of a session left from the REPL


def left_from_repl(extra: dict[str, Any]) -> str | None:
    """The mode (``auto``/``step``) a session was left in from the REPL, else ``None``."""
    found = extra.get(REPL_KEY)
    mode = found.get("mode") if isinstance(found, dict) else None
    return mode if mode in ("auto", "step") else None


def mark_quit(session: Session, mode: str = "auto") -> None:
    """Keep the session for ``rolecall resume``: paused, reason ``quit`` (idle sessions only).

    The REPL's mode is kept with it, so ``rolecall resume`` on a terminal reopens the
    REPL in that mode (stored in the state's ``extra``, committed with the pause).
    """
    if session.finished:
        return
    session.annotate(REPL_KEY, {"mode": mode})
    session.pause("quit", now=True)
