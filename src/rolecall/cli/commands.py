"""The commands behind ``rolecall``: load, wire, run, and map outcomes to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli import logs
from rolecall.errors import RolecallError, RuntimeFailure, StorageError, UsageError, WorldError

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.session.document import SessionDocument
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.world.models import World

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def dispatch(args: argparse.Namespace) -> int:
    verbosity = -1 if getattr(args, "quiet", False) else getattr(args, "verbose", 0)
    logs.configure(verbosity, getattr(args, "log_file", None))
    from rolecall.cli.batch_cmd import cmd_batch
    from rolecall.cli.ecosystem_cmd import cmd_models
    from rolecall.cli.manage import cmd_memory, cmd_roles, cmd_sessions
    from rolecall.cli.modes_cmd import run_consensus, run_debate
    from rolecall.cli.study_cmd import run_study

    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "debate": run_debate,
        "consensus": run_consensus,
        "study": run_study,
        "sessions": cmd_sessions,
        "roles": cmd_roles,
        "memory": cmd_memory,
        "run": cmd_run,
        "chat": cmd_chat,
        "worlds": cmd_worlds,
        "resume": cmd_resume,
        "batch": cmd_batch,
        "models": cmd_models,
    }
    try:
        try:
            return handlers[args.command](args)
        except BrokenPipeError:  # the reader went away (`| head`): not our failure
            from rolecall.cli.display import silence_stdout

            silence_stdout()
            return EXIT_OK
        except BaseExceptionGroup as group:  # a failure inside a task group
            found = _rolecall_error(group)
            if found is None:
                raise
            raise found from group
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
            after = (
                f"The session is kept and nothing was lost: everything committed before this "
                f"is stored. Once the cause is fixed, `rolecall resume {exc.session_id}` "
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


def _rolecall_error(group: BaseExceptionGroup[BaseException]) -> RolecallError | None:
    for exc in group.exceptions:
        if isinstance(exc, RolecallError):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _rolecall_error(exc)
            if found is not None:
                return found
    return None


def _load(args: argparse.Namespace) -> tuple[World, str | None]:
    """The world of WORLD with the command-line overrides applied (nothing written yet)."""
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    loaded = load_world(args.world, role_library(args))
    world = loaded.world
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return apply_overrides(world, args), str(loaded.path) if loaded.path else None


def apply_overrides(world: World, args: argparse.Namespace) -> World:
    update: dict[str, object] = {}
    settings: dict[str, object] = {}
    if getattr(args, "max_turns", None) is not None:
        if args.max_turns < 1:
            raise UsageError(f"--max-turns must be at least 1, got {args.max_turns}")
        settings["max_turns"] = args.max_turns
    if getattr(args, "max_cost", None) is not None:
        if not args.max_cost > 0:
            raise UsageError(f"--max-cost must be more than 0 (USD), got {args.max_cost:g}")
        settings["max_cost"] = args.max_cost
    if settings:
        update["settings"] = world.settings.model_copy(update=settings)
    if getattr(args, "topic", None):
        update["topic"] = args.topic
    return world.model_copy(update=update) if update else world


def outcome(session: Session) -> int:
    """The exit code for how the session ended (cli.md, Exit codes)."""
    state = session.state
    if state.state != "paused":
        return EXIT_OK
    if state.pause_reason == "error":
        print(
            f"rolecall: the model failed; nothing was lost. Session {session.session_id} "
            f"is paused: `rolecall resume {session.session_id}` continues it.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if state.pause_reason in ("cancelled", "interrupted"):
        print(
            f"rolecall: interrupted; session {session.session_id} is saved as paused "
            f"(`rolecall resume {session.session_id}`).",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    return EXIT_OK


async def drive(session: Session, mode: str) -> None:
    """Run a flow in auto or step mode, or answer what is due in a chat."""
    from rolecall.cli.wiring import with_interrupts

    async def body() -> None:
        if session.engine is None and session.director is None:
            await session.settle()
        elif mode == "step":
            await _step_loop(session)
        else:
            await session.run()

    await with_interrupts(session, body)


def cmd_run(args: argparse.Namespace) -> int:
    from rolecall.cli.wiring import live_session, open_store

    world, source = _load(args)
    if world.flow is None and world.mode is None:
        raise UsageError(
            f"world '{world.name}' has no flow to run; use `rolecall chat {args.world}`"
        )
    holder: list[Session] = []

    async def main() -> None:
        async with (
            open_store(args) as store,
            live_session(args, world, store, world_source=source) as session,
        ):
            holder.append(session)
            await drive(session, args.mode)

    anyio.run(main)
    return outcome(holder[0])


async def _step_loop(session: Session) -> None:
    from rolecall.cli.lines import LineReader

    session.open()
    reader = LineReader(sys.stdin.fileno())
    while not session.finished:
        print("[Enter] next turn · q stop", file=sys.stderr, flush=True)
        line = await reader.readline()
        if not line:
            session.pause("end_of_input")
            return
        if line.strip().lower() in ("q", "quit", "/stop"):
            session.stop()
            return
        if not await session.step() or session.state.state == "paused":
            return


def cmd_chat(args: argparse.Namespace) -> int:
    from rolecall.cli.wiring import live_session, memory_files, open_store

    if sys.stdin.isatty() and sys.stdout.isatty() and not args.json:
        from rolecall.cli.repl import cmd_repl

        return cmd_repl(args)
    world, source = _load(args)
    holder: list[Session] = []

    async def main() -> None:
        from rolecall.cli.piped import run_piped
        from rolecall.cli.wiring import with_interrupts

        async with (
            open_store(args) as store,
            live_session(args, world, store, world_source=source) as session,
        ):
            holder.append(session)
            memory = memory_files(args)
            await with_interrupts(
                session, lambda: run_piped(session, sys.stdin, store=store, memory=memory)
            )

    anyio.run(main)
    return outcome(holder[0])


async def _newest(store: SqliteStore, doc: SessionDocument, source: Path) -> SessionDocument:
    """A session file's session, or the stored copy of it when that one is as new or newer."""
    if not await store.has(doc.session_id):
        return doc
    stored = await store.load(doc.session_id)
    if len(stored.messages) >= len(doc.messages):
        print(
            f"session {doc.session_id} is already stored here ({_count(stored.messages)}; "
            f"{source} has {_count(doc.messages)}): resuming the stored one",
            file=sys.stderr,
        )
        return stored
    raise UsageError(
        f"{source} holds {len(doc.messages)} messages of session {doc.session_id}, but "
        f"{len(stored.messages)} of them are stored in this data directory and they may "
        "differ: resume the file with another --data-dir, or resume the stored session by id"
    )


def _count(messages: Sequence[object]) -> str:
    return f"{len(messages)} message" + ("" if len(messages) == 1 else "s")


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stored session (an id) or a session file, regenerating nothing."""
    from rolecall.cli.wiring import live_session, open_store
    from rolecall.session.document import read_session_file

    holder: list[Session] = []

    async def main() -> None:
        async with open_store(args) as store:
            target = Path(args.session)
            if target.suffix == ".json" or await anyio.Path(target).is_file():
                doc = await _newest(store, read_session_file(target), target)
            else:
                doc = await store.load(args.session)
            world = apply_overrides(doc.world_model(), args)
            chat_only = world.flow is None and world.mode is None
            if chat_only and sys.stdin.isatty() and sys.stdout.isatty() and not args.json:
                from rolecall.cli.repl import resume_repl

                holder.append(await resume_repl(args, store, doc))
                return
            async with live_session(args, world, store, doc=doc) as session:
                holder.append(session)
                if session.finished:
                    print(
                        f"session {session.session_id} already finished "
                        f"({session.state.stop_reason}); nothing to resume",
                        file=sys.stderr,
                    )
                    return
                if session.engine is None and session.director is None and not sys.stdin.isatty():
                    from rolecall.cli.piped import run_piped
                    from rolecall.cli.wiring import memory_files, with_interrupts

                    memory = memory_files(args)
                    await with_interrupts(
                        session,
                        lambda: run_piped(session, sys.stdin, store=store, memory=memory),
                    )
                    return
                await drive(session, args.mode)

    anyio.run(main)
    return outcome(holder[0])


def cmd_worlds(args: argparse.Namespace) -> int:
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    library = role_library(args)
    if args.worlds_command == "new":
        return _new_world(args)
    if args.worlds_command == "schema":
        from rolecall.cli.ecosystem_cmd import cmd_schema

        return cmd_schema(args)
    if args.worlds_command == "validate":
        loaded = load_world(args.world, library)
        world = loaded.world
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        steps = len(world.flow.steps) if world.flow else 0
        print(f"{loaded.path}: ok ({len(world.roles)} roles, {steps} steps)")
        return EXIT_OK
    from rolecall.world import catalog

    for entry in catalog.available(Path(args.dir)):
        note = " (instead of the shipped one)" if entry.shadows else ""
        try:
            world = load_world(entry.path, library).world
            print(f"{entry.name:16} {entry.source:8} {world.title or world.topic}{note}")
        except WorldError as exc:
            print(
                f"{entry.name:16} {entry.source:8} invalid: {len(exc.problems)} problems{note}",
                file=sys.stderr,
            )
    return EXIT_OK


def _new_world(args: argparse.Namespace) -> int:
    """Write ``<dir>/<name>/world.yaml`` from a preset; never overwrite a world."""
    from rolecall.cli.modes_cmd import new_world_yaml
    from rolecall.cli.study_cmd import new_study_files

    if args.preset == "study":
        files = new_study_files(args.name)
    else:
        files = {"world.yaml": new_world_yaml(args.preset, args.name)}
    folder = Path(args.dir) / args.name
    if (folder / "world.yaml").exists():
        raise UsageError(f"{folder / 'world.yaml'} already exists; choose another name")
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    print(f"wrote {folder / 'world.yaml'} (edit it, then: rolecall run {folder})")
    return EXIT_OK
