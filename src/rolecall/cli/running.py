"""What every command that runs a session shares: loading, driving, exit codes.

Kept apart from :mod:`rolecall.cli.commands` (the dispatcher) so that the commands it
dispatches to (debate, consensus, study, batch, the REPL) import these without
importing the dispatcher back.
"""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING

from rolecall.cli.exits import (  # the commands import them from here too
    EXIT_FAILURE,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_TERMINATED,
)
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.lines import KeyReader
    from rolecall.cli.options import SessionOptions
    from rolecall.world.models import World


def _load(spec: str, opts: SessionOptions) -> tuple[World, str | None]:
    """The world of WORLD (``spec``) with the command-line overrides applied (nothing
    written yet)."""
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    loaded = load_world(spec, role_library(opts))
    world = loaded.world
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return apply_overrides(world, opts), str(loaded.path) if loaded.path else None


def apply_overrides(world: World, opts: SessionOptions, *, max_turns: bool = True) -> World:
    """``world`` with the common flags ``--max-turns``, ``--max-cost`` and ``--topic``
    applied (each checked: a bad value is a usage error). Every command that runs a
    world applies them here; ``max_turns=False`` for a command whose ``--max-turns``
    means something of its own (``rolecall debate``: debater turns)."""
    update: dict[str, object] = {}
    settings: dict[str, object] = {}
    if max_turns and opts.max_turns is not None:
        if opts.max_turns < 1:
            raise UsageError(f"--max-turns must be at least 1, got {opts.max_turns}")
        settings["max_turns"] = opts.max_turns
    if opts.max_cost is not None:
        if not 0 < opts.max_cost < math.inf:
            raise UsageError(
                f"--max-cost must be more than 0 (USD) and finite, got {opts.max_cost:g}"
            )
        settings["max_cost"] = opts.max_cost
    if settings:
        update["settings"] = world.settings.model_copy(update=settings)
    topic = opts.topic
    if topic is not None:
        if not topic.strip():
            raise UsageError("--topic is empty: give the topic's text (or leave the flag out)")
        update["topic"] = topic
    return world.model_copy(update=update) if update else world


def outcome(session: Session, opts: SessionOptions | None = None) -> int:
    """The exit code for how the session ended (sessions.md, Exit codes).

    The last thing printed says how to go on, pasteable as printed (:mod:`.hints`): a
    paused session the command that continues it, a finished one (outside ``--json``)
    its id and the command that exports it. A session left from the REPL (reason
    ``quit``) has had its hint printed by the REPL.
    """
    from rolecall.cli.hints import export_command, resume_command

    state = session.result
    sid = session.session_id
    resume = resume_command(sid, opts)
    if state.state != "paused":
        if state.state == "finished" and opts is not None and not opts.json:
            print(f"session {sid} · export it: {export_command(sid, opts)}", flush=True)
        return EXIT_OK
    if state.pause_reason == "error":
        print(
            f"rolecall: the model failed; nothing was lost. Session {sid} "
            f"is paused: `{resume}` continues it.",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    from rolecall.cli.wiring import TERMINATED

    if TERMINATED.is_set() and state.pause_reason in ("cancelled", "interrupted"):
        print(
            f"rolecall: terminated; session {sid} is saved as paused (`{resume}`).",
            file=sys.stderr,
        )
        return EXIT_TERMINATED
    if state.pause_reason in ("cancelled", "interrupted"):
        print(
            f"rolecall: interrupted; session {sid} is saved as paused (`{resume}`).",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if state.pause_reason == MORE_TURNS and opts is not None:
        print(
            f"paused after --more-turns {opts.more_turns} more turns; `{resume}` goes on "
            "(add --more-turns N for N more)",
            file=sys.stderr,
        )
        return EXIT_OK
    if state.pause_reason != "quit" and opts is not None:
        print(f"continue it with: {resume}", file=sys.stderr)
    return EXIT_OK


# the pause reason of `resume --more-turns N` once the agents sent N more messages: not
# max_turns (the world's budget, which finishes the session); another resume goes on
MORE_TURNS = "more_turns"


def pause_after(session: Session, turns: int) -> None:
    """Pause ``session`` (reason ``more_turns``) once its agents have sent ``turns`` more
    messages: the cap of one ``resume --more-turns``, which leaves the session resumable."""
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
                session.pause(MORE_TURNS)

    session.bus.subscribe(count, "messages", types=["message"], name="resume-more-turns")


MODE_KEY = "run_mode"  # state.extra[MODE_KEY] == "step": run or resumed with --mode step


def stepped(extra: dict[str, object]) -> str | None:
    """``"step"`` for a session last driven with ``--mode step``, else ``None``."""
    return "step" if extra.get(MODE_KEY) == "step" else None


async def drive(session: Session, mode: str) -> None:
    """Run a flow in auto or step mode, or answer what is due in a chat."""
    from rolecall.cli.wiring import with_interrupts

    async def body() -> None:
        if session.chat:
            await session.run()  # a chat's run answers what is due
            return
        # kept with the session (stored with its next turn): `resume` goes on in this mode
        session.annotate(MODE_KEY, "step" if mode == "step" else None)
        if mode == "step":
            await _step_loop(session)
        else:
            await session.run()

    await with_interrupts(session, body)
    await session.save()  # a stop or pause made between turns (q, Ctrl-D, Ctrl-C)


STEP_KEYS = "[Enter] next turn · q stop · Ctrl-D pause"
STEP_TYPED = (
    "typed text is not sent in `run --mode step`: Enter runs the next turn, q stops, "
    "Ctrl-D pauses (to talk to the roles: rolecall chat WORLD --mode step)"
)


async def _step_loop(session: Session) -> None:
    from rolecall.cli.lines import KeyReader, LineReader

    await session.begin()
    fd = sys.stdin.fileno()
    if sys.stdin.isatty():
        world = session.world
        title = f" — {world.title}" if world.title else ""
        print(
            f"rolecall · {world.name}{title} · session {session.session_id} · step mode",
            file=sys.stderr,
            flush=True,
        )
        with KeyReader(fd) as keys:
            await _step_keys(session, keys)
        return
    reader = LineReader(fd)
    while not session.finished:
        print(STEP_KEYS, file=sys.stderr, flush=True)
        line = await reader.readline()
        if not line:
            session.pause("end_of_input")
            return
        if line.strip().lower() in ("q", "quit", "/stop"):
            session.stop()
            return
        if line.strip():
            print(STEP_TYPED, file=sys.stderr, flush=True)
            continue
        if not await session.step() or session.status.state == "paused":
            return


async def _step_keys(session: Session, keys: KeyReader) -> None:
    """Step mode on a terminal: single keys, nothing echoed (arrows print no ``^[[A``)."""
    print(STEP_KEYS, file=sys.stderr, flush=True)
    while not session.finished:
        key = await keys.read()
        if key in ("", "\x04"):
            session.pause("end_of_input")
            return
        if key.lower() == "q":
            session.stop()
            return
        if key in ("\r", "\n"):
            if not await session.step() or session.status.state == "paused":
                return
            if not session.finished:
                print(STEP_KEYS, file=sys.stderr, flush=True)
        elif not key.startswith("\x1b"):  # arrows and other escape keys: ignored
            print(STEP_TYPED, file=sys.stderr, flush=True)
