"""Piped chat (cli.md, Piped mode): one human message or /command per input line."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, TextIO

import anyio

if TYPE_CHECKING:
    from rolecall.runtime import Session


async def run_piped(session: Session, stream: TextIO) -> None:
    """Handle each line after every reply it triggered is complete; settle at the end."""
    session.open()
    while True:
        line = await anyio.to_thread.run_sync(stream.readline)
        if not line:
            break
        text = line.rstrip("\n")
        if not text.strip():
            continue
        if text.startswith("/"):
            if not await command(session, text):
                break
            continue
        if session.finished:
            print(
                f"session finished ({session.state.stop_reason}); message ignored", file=sys.stderr
            )
            continue
        await session.say(text)
    await session.settle()
    if not session.finished and session.state.state != "paused":
        session._pause("end_of_input")


async def command(session: Session, line: str) -> bool:
    """Run one /command; False means quit."""
    name, _, rest = line[1:].partition(" ")
    rest = rest.strip()
    if name in ("quit", "exit"):
        return False
    if name == "run":
        await session.run()
    elif name == "next":
        await session.step()
    elif name == "pause":
        session.pause()
    elif name == "resume":
        await session.resume()
    elif name == "stop":
        session.stop()
    elif name == "flag":
        if not rest:
            print("/flag needs a name", file=sys.stderr)
        else:
            session.set_flag(rest)
    else:
        print(f"unknown command /{name}", file=sys.stderr)
    return True
