"""The commands behind ``rolecall``: load, wire, run, and map outcomes to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli import logs
from rolecall.cli.exits import EXIT_FAILURE, EXIT_OK, EXIT_USAGE
from rolecall.cli.running import (
    _load,
    apply_overrides,
    drive,
    outcome,
    stepped,
)
from rolecall.errors import (
    RolecallError,
    RuntimeFailure,
    StorageError,
    UsageError,
    WorldError,
    first_rolecall_error,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from rolecall.api.session import Session
    from rolecall.storage.data_store import DataStore
    from rolecall.world.models import World


def dispatch(args: argparse.Namespace, target: str) -> int:
    """Run the command's handler (``module:function``); its errors become exit codes."""
    verbosity = -1 if getattr(args, "quiet", False) else getattr(args, "verbose", 0)
    try:
        logs.configure(verbosity, getattr(args, "log_file", None))
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from rolecall.cli.registry import handler
    from rolecall.cli.stdout import silence_stdout, stdout_failed

    try:
        try:
            code = handler(target)(args)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`| head`): not our failure
            silence_stdout()
            return EXIT_OK
        except BaseExceptionGroup as group:  # a failure inside a task group
            found = first_rolecall_error(
                group,
                lambda exc: (
                    damaged_store(args, exc) if isinstance(exc, sqlite3.DatabaseError) else None
                ),
            )
            if found is None:
                raise
            raise found from group
        except sqlite3.DatabaseError as exc:  # not an OSError: the file's content is bad
            raise damaged_store(args, exc) from exc
        except OSError as exc:
            if not _stdout_broken():
                raise
            stdout_failed(exc)
            code = EXIT_FAILURE
        failed = stdout_failed()  # also a failure the --json sink noted and went past
        if failed is not None:
            print(
                f"rolecall: cannot write to standard output: {failed.strerror or failed}",
                file=sys.stderr,
            )
            return EXIT_FAILURE
        return code
    except WorldError as exc:
        print(str(exc), file=sys.stderr)
        for warning in exc.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except StorageError as exc:
        if exc.session_id:
            from rolecall.cli.hints import resume_command

            after = (
                f"The session is kept and nothing was lost: everything committed before this "
                f"is stored. Once the cause is fixed, `{resume_command(exc.session_id, args)}` "
                "continues it."
            )
        else:
            after = "Nothing was written."
        print(f"rolecall: {exc}\n{after}", file=sys.stderr)
        return EXIT_FAILURE
    except RuntimeFailure as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except RolecallError as exc:  # pragma: no cover - control signals never escape
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _stdout_broken() -> bool:
    """Whether stdout refuses a write (after an OSError whose origin is not known)."""
    try:
        sys.stdout.write("")
        sys.stdout.flush()
    except OSError:
        return True
    return False


def damaged_store(args: argparse.Namespace, exc: sqlite3.DatabaseError) -> StorageError:
    """What to tell the user when reading the store failed on its content (sessions.md)."""
    from rolecall.paths import data_dir, db_path

    path = db_path(data_dir(getattr(args, "data_dir", None)))
    if isinstance(exc, sqlite3.OperationalError):  # locked, read-only, I/O: not the content
        return StorageError(f"cannot use the session store {path}: {exc}")
    return StorageError(
        f"the session store {path} is damaged ({exc}); `PRAGMA integrity_check` says: "
        f"{integrity(path)}.\nRestore {path.name} from a backup, or move "
        f"it aside (`mv {path} {path}.damaged`) to start a new store; `sqlite3 {path} .recover` "
        "may save what is readable (sessions.md, A damaged store)."
    )


def integrity(path: Path) -> str:
    """The first lines of ``PRAGMA integrity_check`` on ``path``, opened read-only."""
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("PRAGMA integrity_check(3)").fetchall()
    except sqlite3.Error as exc:
        return str(exc)
    return "; ".join(str(r[0]) for r in rows)


def cmd_run(args: argparse.Namespace) -> int:
    world, source = _load(args)
    if world.flow is None and world.mode is None:
        import shlex

        from rolecall.cli.hints import command

        raise UsageError(
            f"world '{world.name}' has no flow to run; "
            f"use `{command(f'chat {shlex.quote(args.world)}', args)}`"
        )

    async def run(session: Session, store: DataStore) -> None:
        await drive(session, args.mode)

    return _new_session(args, world, source, run)


def cmd_chat(args: argparse.Namespace) -> int:
    if getattr(args, "web", False):
        from rolecall.cli.web_cmd import cmd_chat_web

        return cmd_chat_web(args)
    if sys.stdin.isatty() and sys.stdout.isatty() and not args.json:
        from rolecall.cli.repl import cmd_repl

        return cmd_repl(args)
    world, source = _load(args)

    async def chat(session: Session, store: DataStore) -> None:
        from rolecall.cli.piped import run_piped
        from rolecall.cli.wiring import memory_files, with_interrupts

        memory = memory_files(args)
        await with_interrupts(
            session,
            lambda: run_piped(session, sys.stdin, store=store, memory=memory, args=args),
        )

    return _new_session(args, world, source, chat)


def _new_session(
    args: argparse.Namespace,
    world: World,
    source: str | None,
    body: Callable[[Session, DataStore], Awaitable[None]],
) -> int:
    """A new session of ``world`` (run and chat), given to ``body``; the exit code."""
    from rolecall.cli.wiring import live_session, open_store, session_transport

    holder: list[Session] = []

    async def main() -> None:
        async with (
            session_transport(args) as transport,
            open_store(args) as store,
            live_session(args, world, store, world_source=source, transport=transport) as session,
        ):
            holder.append(session)
            await body(session, store)

    anyio.run(main)
    return outcome(holder[0], args)


def pause_after(session: Session, turns: int) -> None:
    """Pause ``session`` (reason ``max_turns``) once its agents have sent ``turns`` more
    messages: the cap of one ``resume --max-turns``, which leaves the session resumable."""
    from rolecall.bus import Envelope
    from rolecall.bus.events import MessageEvent

    agents = set(session.world.role_ids)
    sent = 0

    def count(envelope: Envelope) -> None:
        nonlocal sent
        event = envelope.event
        if isinstance(event, MessageEvent) and event.sender in agents:
            sent += 1
            if sent == turns:
                session.pause("max_turns")

    session.bus.subscribe(count, "messages", types=["message"], name="resume-max-turns")


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stored session (an id) or a session file, regenerating nothing."""
    from rolecall.api.entry import find_session, session_file_of
    from rolecall.cli.wiring import live_session, open_store, session_transport

    holder: list[Session] = []

    async def main() -> None:
        read = session_file_of(args.session)  # a damaged file: refused before the store opens
        async with open_store(args) as store:
            doc, notice = await find_session(store, args.session, read=read)
            if notice:
                print(notice, file=sys.stderr)
            # resume's --max-turns is how many more agent messages this run may add: the
            # session then pauses (not finishes) and another resume goes on
            more = args.max_turns
            if more is not None and more < 1:
                raise UsageError(f"--max-turns must be at least 1, got {more}")
            args.max_turns = None
            world = apply_overrides(doc.world_model(), args)
            args.max_turns = more
            chat_only = world.flow is None and world.mode is None
            from rolecall.cli.repl.live import left_from_repl

            left_in = left_from_repl(doc.state.extra)  # the REPL's mode, if left from it
            args.mode = args.mode or left_in or stepped(doc.state.extra) or "auto"
            terminal = sys.stdin.isatty() and sys.stdout.isatty() and not args.json
            if (chat_only or left_in is not None) and terminal:
                from rolecall.cli.repl import resume_repl

                holder.append(await resume_repl(args, store, doc))
                return
            async with (
                session_transport(args) as transport,
                live_session(args, world, store, doc=doc, transport=transport) as session,
            ):
                holder.append(session)
                if more is not None:
                    pause_after(session, more)
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

                    memory = memory_files(args)

                    async def go_on() -> None:
                        # resume goes on: running again (a crash or a pause left it
                        # paused), the replies still due answered before the first line
                        await session.begin(running=True)
                        await session.settle()
                        await run_piped(session, sys.stdin, store=store, memory=memory, args=args)

                    await with_interrupts(session, go_on)
                    return
                await drive(session, args.mode)

    anyio.run(main)
    return outcome(holder[0], args)
