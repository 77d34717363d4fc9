"""The commands behind ``rolecall``: load, wire, run, and map outcomes to exit codes."""

from __future__ import annotations

import argparse
import contextlib
import sqlite3
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli import logs
from rolecall.cli.running import (
    EXIT_FAILURE,
    EXIT_OK,
    EXIT_USAGE,
    _load,
    apply_overrides,
    drive,
    outcome,
)
from rolecall.errors import (
    RolecallError,
    RuntimeFailure,
    StorageError,
    UsageError,
    WorldError,
)

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.world.library import RoleLibrary


def dispatch(args: argparse.Namespace) -> int:
    verbosity = -1 if getattr(args, "quiet", False) else getattr(args, "verbose", 0)
    try:
        logs.configure(verbosity, getattr(args, "log_file", None))
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from rolecall.cli.agent_cmd import cmd_agent
    from rolecall.cli.batch_cmd import cmd_batch
    from rolecall.cli.ecosystem_cmd import cmd_models
    from rolecall.cli.manage import cmd_memory, cmd_roles, cmd_sessions
    from rolecall.cli.modes_cmd import run_consensus, run_debate
    from rolecall.cli.nats_cmd import cmd_watch, cmd_worker
    from rolecall.cli.study_cmd import run_study
    from rolecall.cli.web_cmd import cmd_web

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
        "watch": cmd_watch,
        "worker": cmd_worker,
        "agent": cmd_agent,
        "web": cmd_web,
    }
    from rolecall.cli.display import silence_stdout, stdout_failed

    try:
        try:
            code = handlers[args.command](args)
            sys.stdout.flush()
        except BrokenPipeError:  # the reader went away (`| head`): not our failure
            silence_stdout()
            return EXIT_OK
        except BaseExceptionGroup as group:  # a failure inside a task group
            found = _rolecall_error(group, args)
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


def _stdout_broken() -> bool:
    """Whether stdout refuses a write (after an OSError whose origin is not known)."""
    try:
        sys.stdout.write("")
        sys.stdout.flush()
    except OSError:
        return True
    return False


def _rolecall_error(
    group: BaseExceptionGroup[BaseException], args: argparse.Namespace
) -> RolecallError | None:
    for exc in group.exceptions:
        if isinstance(exc, RolecallError):
            return exc
        if isinstance(exc, sqlite3.DatabaseError):
            return damaged_store(args, exc)
        if isinstance(exc, BaseExceptionGroup):
            found = _rolecall_error(exc, args)
            if found is not None:
                return found
    return None


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
    from rolecall.cli.wiring import live_session, open_store, session_transport

    world, source = _load(args)
    if world.flow is None and world.mode is None:
        raise UsageError(
            f"world '{world.name}' has no flow to run; use `rolecall chat {args.world}`"
        )
    holder: list[Session] = []

    async def main() -> None:
        async with (
            session_transport(args) as transport,
            open_store(args) as store,
            live_session(args, world, store, world_source=source, transport=transport) as session,
        ):
            holder.append(session)
            await drive(session, args.mode)

    anyio.run(main)
    return outcome(holder[0], args)


def cmd_chat(args: argparse.Namespace) -> int:
    from rolecall.cli.wiring import live_session, memory_files, open_store

    if getattr(args, "web", False):
        from rolecall.cli.web_cmd import cmd_chat_web

        return cmd_chat_web(args)
    if sys.stdin.isatty() and sys.stdout.isatty() and not args.json:
        from rolecall.cli.repl import cmd_repl

        return cmd_repl(args)
    world, source = _load(args)
    holder: list[Session] = []

    async def main() -> None:
        from rolecall.cli.piped import run_piped
        from rolecall.cli.wiring import session_transport, with_interrupts

        async with (
            session_transport(args) as transport,
            open_store(args) as store,
            live_session(args, world, store, world_source=source, transport=transport) as session,
        ):
            holder.append(session)
            memory = memory_files(args)
            await with_interrupts(
                session, lambda: run_piped(session, sys.stdin, store=store, memory=memory)
            )

    anyio.run(main)
    return outcome(holder[0], args)


def cmd_resume(args: argparse.Namespace) -> int:
    """Continue a stored session (an id) or a session file, regenerating nothing."""
    from rolecall.api.entry import find_session
    from rolecall.cli.wiring import live_session, open_store, session_transport

    holder: list[Session] = []

    async def main() -> None:
        async with open_store(args) as store:
            doc, notice = await find_session(store, args.session)
            if notice:
                print(notice, file=sys.stderr)
            world = apply_overrides(doc.world_model(), args)
            chat_only = world.flow is None and world.mode is None
            from rolecall.cli.repl.live import left_from_repl

            left_in = left_from_repl(doc.state.extra)  # the REPL's mode, if left from it
            args.mode = args.mode or left_in or "auto"
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
    return outcome(holder[0], args)


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
        from rolecall.cli.check_cmd import summary, worst_case

        print(summary(worst_case(world)))
        return EXIT_OK
    if args.worlds_command == "show":
        return _show_world(args, library)
    if args.worlds_command == "check":
        from rolecall.cli.check_cmd import cmd_check

        loaded = load_world(args.world, library)
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return cmd_check(args, loaded.world)
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


def _show_world(args: argparse.Namespace, library: RoleLibrary) -> int:
    """``worlds show``: the roles, then the flow (speaker → reply target per step)."""
    from rolecall.flows.view import flow_lines
    from rolecall.world.loader import load_world

    loaded = load_world(args.world, library)
    world = loaded.world
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{world.title or world.name}  ({loaded.path})")
    if world.topic:
        print(f"topic: {world.topic}")
    width = max(len(r.id) for r in world.roles)
    print("roles:")
    for role in world.roles:
        print(f"  {role.id:<{width}}  {role.display_name} · {world.model_for(role)}")
    if world.flow is not None:
        print("\n".join(flow_lines(world.flow, current=world.flow.start_id)))
    elif world.mode is not None:
        print(f"{world.mode} mode: its turns are planned by the mode (docs/modes.md)")
    else:
        print("no flow: a chat (rolecall chat WORLD; @role to address one)")
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
