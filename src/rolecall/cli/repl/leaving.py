"""Leaving a session at the REPL: quitting, or ``/load`` switching to another one
(repl.md, Leaving and coming back).

What runs is stopped (a reply streaming is kept as a draft), then the session is kept,
paused with reason ``quit`` (``rolecall resume`` continues it, in the REPL's mode), or
dropped from the store if nothing was said in it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.hints import resume_command
from rolecall.cli.repl.live import mark_quit
from rolecall.cli.wrap import width_of

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.options import SessionOptions
    from rolecall.cli.repl.background import Background
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.storage.data_store import DataStore


async def leave(
    session: Session,
    *,
    switching: bool,
    display: ReplDisplay,
    background: Background,
    store: DataStore | None,
    step_mode: bool,
    args: SessionOptions,
    width: Callable[[], int],
) -> None:
    """Stop what runs, then keep the session paused (reason ``quit``).

    ``switching``: another session is served next (it is stored as left now, and said
    so); else the REPL quits and says how to continue the session.
    """
    if session.generating:
        session.interrupt()  # kept as a draft; the turn pauses the session
    elif background.count and not session.finished:
        session.pause("quit")  # after the turn in progress
    with anyio.move_on_after(15):
        await background.settle()
    if not session.result.messages and not session.drafts and store is not None:
        # nothing was said: the session is not kept (it would only clutter the list)
        await session.flush()
        await store.delete(session.session_id)
        if not switching:
            display.note("nothing was said: the session is not kept")
        return
    mark_quit(session, "step" if step_mode else "auto")
    if switching:
        from rolecall.errors import RolecallError

        try:  # stored as left now, not when the REPL quits
            await session.save()
        except RolecallError as exc:  # its store failed before: said again on the way out
            display.error(str(exc))
        display.note(f"left session {session.session_id} (kept, {session.result.state})")
    elif not session.finished:
        display.gap()
        kept = f"session {session.session_id} kept (paused) · continue it with:"
        command = resume_command(session.session_id, args)
        if width_of(f"{kept} {command}") < width():
            display.note(f"{kept} {command}")
        else:  # the command on a line of its own, whole: pasted as printed
            display.note(kept)
            display.note(command, wrap=False)
