"""The commands behind ``rolecall``: load, wire, run, and map outcomes to exit codes."""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli import logs
from rolecall.errors import RolecallError, RuntimeFailure, UsageError, WorldError

if TYPE_CHECKING:
    from rolecall.runtime import Session

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def dispatch(args: argparse.Namespace) -> int:
    verbosity = -1 if getattr(args, "quiet", False) else getattr(args, "verbose", 0)
    logs.configure(verbosity, getattr(args, "log_file", None))
    handlers: dict[str, Callable[[argparse.Namespace], int]] = {
        "run": cmd_run,
        "chat": cmd_chat,
        "worlds": cmd_worlds,
    }
    try:
        return handlers[args.command](args)
    except WorldError as exc:
        print(str(exc), file=sys.stderr)
        for warning in exc.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        return EXIT_USAGE
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except RuntimeFailure as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE
    except RolecallError as exc:  # pragma: no cover - control signals never escape
        print(f"rolecall: {exc}", file=sys.stderr)
        return EXIT_FAILURE


def _prepare(args: argparse.Namespace) -> Session:
    from rolecall.cli.display import attach_display, use_color
    from rolecall.llm.registry import ModelRegistry
    from rolecall.runtime import Session
    from rolecall.world.loader import load_world

    loaded = load_world(args.world)
    world = loaded.world
    update: dict[str, object] = {}
    if args.max_turns is not None:
        if args.max_turns < 1:
            raise UsageError(f"--max-turns must be at least 1, got {args.max_turns}")
        update["settings"] = world.settings.model_copy(update={"max_turns": args.max_turns})
    if args.topic:
        update["topic"] = args.topic
    if update:
        world = world.model_copy(update=update)
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    # On a terminal the offline model streams at a readable pace; never in pipes or --json.
    delay = 0.015 if (not args.json and use_color(sys.stdout)) else 0.0
    model_override = args.model or os.environ.get("ROLECALL_MODEL") or None
    session = Session(
        world, models=ModelRegistry(offline_delay=delay), model_override=model_override
    )
    attach_display(
        session.bus,
        json_mode=args.json,
        role_order=world.role_ids,
        quiet=args.quiet,
        verbose=args.verbose,
    )
    return session


def _outcome(session: Session) -> int:
    state = session.state
    if state.state != "paused":
        return EXIT_OK
    if state.pause_reason == "error":
        print(
            f"rolecall: the model failed; nothing was lost. "
            f"Session {session.session_id} is paused.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    return EXIT_INTERRUPTED if state.pause_reason == "cancelled" else EXIT_OK


async def _with_interrupts(session: Session, body: Callable[[], Awaitable[None]]) -> None:
    """Run ``body``; Ctrl-C cancels the generation in progress and pauses the session."""
    async with anyio.create_task_group() as tg:

        async def watch() -> None:
            with anyio.open_signal_receiver(signal.SIGINT) as signals:
                async for _ in signals:
                    if not session.cancel_generation():
                        session.pause()

        tg.start_soon(watch)
        await body()
        tg.cancel_scope.cancel()


def cmd_run(args: argparse.Namespace) -> int:
    session = _prepare(args)
    if session.engine is None:
        raise UsageError(
            f"world '{session.world.name}' has no flow to run; use `rolecall chat {args.world}`"
        )

    async def body() -> None:
        if args.mode == "step":
            await _step_loop(session)
        else:
            await session.run()

    anyio.run(_with_interrupts, session, body)
    return _outcome(session)


async def _step_loop(session: Session) -> None:
    session.open()
    while not session.finished and session.state.state != "paused":
        print("[Enter] next turn · q stop", file=sys.stderr, flush=True)
        line = await anyio.to_thread.run_sync(sys.stdin.readline)
        if not line:
            session.pause()
            return
        if line.strip().lower() in ("q", "quit", "/stop"):
            session.stop()
            return
        if not await session.step():
            return


def cmd_chat(args: argparse.Namespace) -> int:
    session = _prepare(args)
    if sys.stdin.isatty():
        raise UsageError("the interactive REPL is not available yet; pipe messages in instead")

    async def body() -> None:
        from rolecall.cli.piped import run_piped

        await run_piped(session, sys.stdin)

    anyio.run(_with_interrupts, session, body)
    return _outcome(session)


def cmd_worlds(args: argparse.Namespace) -> int:
    from rolecall.world.loader import load_world

    if args.worlds_command == "validate":
        loaded = load_world(args.world)
        world = loaded.world
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        steps = len(world.flow.steps) if world.flow else 0
        print(f"{loaded.path}: ok ({len(world.roles)} roles, {steps} steps)")
        return EXIT_OK
    folder = Path(args.dir)
    for path in sorted(folder.glob("*/world.yaml")):
        try:
            world = load_world(path).world
            print(f"{path.parent.name:16} {world.title or world.topic}")
        except WorldError as exc:
            print(f"{path.parent.name:16} invalid: {len(exc.problems)} problems", file=sys.stderr)
    return EXIT_OK
