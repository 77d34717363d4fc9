"""``rolecall run``, ``chat`` and ``resume``: their parsers and their handlers.

A handler turns the parsed arguments into a typed value on its first line
(:mod:`rolecall.cli.options`) and passes that value on: the store, the session's
wiring, the REPL and the hints read it, never the ``Namespace``.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

from rolecall.cli.flags import add_common_flags, add_nats_flag
from rolecall.cli.options import ResumeOptions, WorldOptions
from rolecall.cli.registry import add_command
from rolecall.cli.web_cmd import add_web_flags

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rolecall.api.session import Session
    from rolecall.storage.data_store import DataStore
    from rolecall.world.models import World

    Sub = argparse._SubParsersAction[argparse.ArgumentParser]


def world_help() -> str:
    """WORLD's help: what it may be, with the names of the shipped worlds."""
    from rolecall.world.catalog import shipped_dir

    names = sorted(p.parent.name for p in shipped_dir().glob("*/world.yaml"))
    return (
        "a shipped world (" + ", ".join(names) + "), a name under ./worlds/, a folder, or a "
        "world.yaml path (rolecall worlds list)"
    )


def add_run(sub: Sub) -> None:
    run = add_command(
        sub,
        "run",
        description="Run a world's flow to its stop, streaming every message live.",
        examples=[
            "rolecall run classroom",
            "rolecall run worlds/classroom --json --max-turns 4",
            "rolecall run classroom --model openai/gpt-4o-mini",
        ],
    )
    run.add_argument("world", metavar="WORLD", help=world_help())
    run.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: run to the stop; step: one turn per Enter",
    )
    add_common_flags(run)
    add_nats_flag(run)


def add_chat(sub: Sub) -> None:
    chat = add_command(
        sub,
        "chat",
        description=(
            "Talk to a world. On a terminal this opens the REPL (docs/repl.md): type a "
            "message, @role to address one role, /help for the commands. With stdin not a "
            "terminal, each input line is one message or /command."
        ),
        examples=[
            "rolecall chat panel",
            "rolecall chat classroom --mode step        one turn per Enter",
            "printf 'hello @alice\\n' | rolecall chat panel --json",
        ],
    )
    chat.add_argument("world", metavar="WORLD", help=world_help())
    chat.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: a flow runs by itself between your messages; step: one turn per Enter",
    )
    chat.add_argument(
        "--web", action="store_true", help="talk in the web view instead (see `rolecall web`)"
    )
    add_web_flags(chat)
    add_common_flags(chat)
    add_nats_flag(chat)
    add_stream_flag(chat)


def add_stream_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stream",
        choices=("preview", "full"),
        default=None,
        help="the REPL while a reply streams: a one-line preview, the reply printed whole "
        "when complete (default), or every line as it streams",
    )


def add_resume(sub: Sub) -> None:
    resume = add_command(
        sub,
        "resume",
        description="Continue a saved session exactly where it stopped; nothing is regenerated.",
        examples=[
            "rolecall resume 20261122-101500-a1b2c3",
            "rolecall resume saved.json --json",
            "rolecall resume last --more-turns 2      two more agent messages, then pause",
        ],
    )
    resume.add_argument("session", metavar="SESSION", help="a session id or a session file path")
    resume.add_argument(
        "--mode",
        choices=("auto", "step"),
        default=None,
        help="auto or step (default: the mode the session was left in from the REPL, else auto)",
    )
    add_common_flags(resume, max_turns=False)
    resume.add_argument(
        "--more-turns",
        "--max-turns",  # its first name, kept: resume's cap is not the world's max_turns
        dest="more_turns",
        type=int,
        metavar="N",
        help="let the agents send N more messages, then pause the session (reason "
        "more_turns; another resume goes on)",
    )
    add_nats_flag(resume)
    add_stream_flag(resume)


def cmd_run(args: argparse.Namespace) -> int:
    from rolecall.cli.running import _load, drive

    opts = WorldOptions.of(args)
    world, source = _load(opts.world, opts)
    if world.flow is None and world.mode is None:
        import shlex

        from rolecall.cli.hints import command
        from rolecall.errors import UsageError

        raise UsageError(
            f"world '{world.name}' has no flow to run; "
            f"use `{command(f'chat {shlex.quote(opts.world)}', opts)}`"
        )

    async def run(session: Session, store: DataStore) -> None:
        await drive(session, opts.mode or "auto")

    return _new_session(opts, world, source, run)


def cmd_chat(args: argparse.Namespace) -> int:
    opts = WorldOptions.of(args)
    if opts.web:
        from rolecall.cli.web_cmd import cmd_chat_web

        return cmd_chat_web(args)
    if sys.stdin.isatty() and sys.stdout.isatty() and not opts.json:
        from rolecall.cli.repl import chat_repl

        return chat_repl(opts)
    from rolecall.cli.running import _load

    world, source = _load(opts.world, opts)

    async def chat(session: Session, store: DataStore) -> None:
        from rolecall.cli.piped import run_piped
        from rolecall.cli.wiring import memory_files, with_interrupts

        memory = memory_files(opts)
        await with_interrupts(
            session,
            lambda: run_piped(session, sys.stdin, store=store, memory=memory, opts=opts),
        )

    return _new_session(opts, world, source, chat)


def _new_session(
    opts: WorldOptions,
    world: World,
    source: str | None,
    body: Callable[[Session, DataStore], Awaitable[None]],
) -> int:
    """A new session of ``world`` (run and chat), given to ``body``; the exit code."""
    import anyio

    from rolecall.cli.running import outcome
    from rolecall.cli.wiring import live_session, open_store, session_transport

    holder: list[Session] = []

    async def main() -> None:
        async with (
            session_transport(opts) as transport,
            open_store(opts) as store,
            live_session(opts, world, store, world_source=source, transport=transport) as session,
        ):
            holder.append(session)
            await body(session, store)

    anyio.run(main)
    return outcome(holder[0], opts)


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stored session (an id) or a session file, regenerating nothing."""
    import anyio

    from rolecall.api.entry import find_session, session_file_of
    from rolecall.cli.running import apply_overrides, drive, outcome, pause_after, stepped
    from rolecall.cli.wiring import live_session, open_store, session_transport

    given = ResumeOptions.of(args)
    if given.more_turns is not None and given.more_turns < 1:
        from rolecall.errors import UsageError

        raise UsageError(f"--more-turns (--max-turns) must be at least 1, got {given.more_turns}")
    holder: list[Session] = []
    chosen: list[ResumeOptions] = [given]  # with the mode chosen, once the session is read

    async def main() -> None:
        read = session_file_of(given.session)  # a damaged file: refused before the store opens
        async with open_store(given) as store:
            doc, notice = await find_session(store, given.session, read=read)
            if notice:
                print(notice, file=sys.stderr)
            # resume's --more-turns is how many more agent messages this run may add: the
            # session then pauses (not finishes) and another resume goes on; the world's
            # own max_turns stays as it was
            world = apply_overrides(doc.world_model(), given)
            chat_only = world.flow is None and world.mode is None
            from rolecall.cli.repl.live import left_from_repl

            left_in = left_from_repl(doc.state.extra)  # the REPL's mode, if left from it
            opts = replace(given, mode=given.mode or left_in or stepped(doc.state.extra) or "auto")
            chosen[0] = opts
            terminal = sys.stdin.isatty() and sys.stdout.isatty() and not opts.json
            if (chat_only or left_in is not None) and terminal:
                from rolecall.cli.repl import resume_repl

                holder.append(await resume_repl(opts, store, doc))
                return
            async with (
                session_transport(opts) as transport,
                live_session(opts, world, store, doc=doc, transport=transport) as session,
            ):
                holder.append(session)
                if opts.more_turns is not None:
                    pause_after(session, opts.more_turns)
                if session.finished:
                    print(
                        f"session {session.session_id} already finished "
                        f"({session.status.stop_reason}); nothing to resume",
                        file=sys.stderr,
                    )
                    return
                if session.chat and not sys.stdin.isatty():
                    from rolecall.cli.piped import run_piped
                    from rolecall.cli.wiring import memory_files, with_interrupts

                    memory = memory_files(opts)

                    async def go_on() -> None:
                        # resume goes on: running again (a crash or a pause left it
                        # paused), the replies still due answered before the first line
                        await session.begin(running=True)
                        await session.settle()
                        await run_piped(session, sys.stdin, store=store, memory=memory, opts=opts)

                    await with_interrupts(session, go_on)
                    return
                await drive(session, opts.mode or "auto")

    anyio.run(main)
    return outcome(holder[0], chosen[0])
