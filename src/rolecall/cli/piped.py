"""Piped chat (chat.md, Piped mode): one human message or /command per input line."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.options import Options
    from rolecall.memory import MemoryFiles
    from rolecall.storage.data_store import DataStore


# the pause reasons of a signal (Ctrl-C, SIGTERM): the command stops reading its input
INTERRUPTED = ("cancelled", "interrupted")


async def run_piped(
    session: Session,
    stream: TextIO,
    *,
    store: DataStore | None = None,
    memory: MemoryFiles | None = None,
    opts: Options | None = None,
) -> None:
    """Handle each line after every reply it triggered is complete; settle at the end
    (unless paused), then pause with ``end_of_input`` (``quit`` after ``/quit``).

    ``/commands`` are the REPL's (one parser for both), answered on stderr; ``opts``
    (the command's) give the hints they print their ``--data-dir``.
    """
    from rolecall.cli.lines import LineReader

    await session.begin()
    reader = LineReader(stream.fileno())
    reason = "end_of_input"
    while True:
        line = await reader.readline()
        if not line:
            break
        text = line.rstrip("\n")
        if not text.strip():
            continue
        if text.startswith("/") and not text.startswith("//"):
            # imported by the first /command: a chat that has none starts sooner
            from rolecall.cli.repl.runner import run_command_line

            if not await run_command_line(session, text, store=store, memory=memory, opts=opts):
                reason = "quit"  # /quit: as in the REPL
                break
            continue
        if session.finished:
            print(
                f"session finished ({session.status.stop_reason}); message ignored",
                file=sys.stderr,
            )
            continue
        await session.say(text[1:] if text.startswith("//") else text)
        status = session.status
        if status.state == "paused" and status.pause_reason in INTERRUPTED:
            break  # Ctrl-C or SIGTERM during a reply: no one is there to go on, stop here
    if session.status.state != "paused":  # a paused session (a failed reply) stays so:
        await session.settle()  # nothing is tried again behind the user's back
    if not session.finished and session.status.state != "paused":
        session.pause(reason, now=True)
