"""The interactive REPL of ``rolecall chat WORLD`` on a terminal (cli.md, REPL).

Three layers, the first two headless and testable without a terminal:

- :func:`parse_command` turns a ``/command`` line into a :class:`Command` (or a one-line
  :class:`CommandError`); :class:`CommandRunner` carries it out on a session. The piped
  mode can share both through :func:`run_command_line`.
- :class:`ReplDisplay` is a bus subscriber that turns events into lines (headers
  ``speaker → target``, streamed text, ``↑in ↓out`` tokens, marks for errors) plus a
  *live region* (the line being streamed, a spinner with the speaker and elapsed time)
  drawn just above the input line.
- :class:`Repl` is the prompt-toolkit front end: a prompt with history, multi-line
  input, ``@role`` and ``/command`` completion and a bottom toolbar; the session's turns
  run concurrently in an anyio task group, and the display's lines are printed above
  the prompt while the human types.
"""

from __future__ import annotations

import argparse
import difflib
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import anyio
import structlog

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.completion import CompleteEvent, Completer, Completion
    from prompt_toolkit.document import Document
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.output import Output
    from prompt_toolkit.shortcuts import PromptSession

    from rolecall.bus import Envelope, EventBus
    from rolecall.memory import MemoryFiles
    from rolecall.runtime import Session
    from rolecall.session.document import SessionDocument
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.world.models import World

__all__ = [
    "COMMANDS",
    "Candidate",
    "Command",
    "CommandError",
    "CommandRunner",
    "CommandSpec",
    "LoadRequest",
    "Outcome",
    "Palette",
    "Repl",
    "ReplCompleter",
    "ReplDisplay",
    "cmd_repl",
    "cmd_resume_repl",
    "help_lines",
    "mark_quit",
    "open_live_session",
    "parse_command",
    "resume_repl",
    "run_command_line",
    "run_repl",
]

log = structlog.get_logger(__name__)

# ------------------------------------------------------------------------------ commands


@dataclass(frozen=True)
class CommandSpec:
    """One ``/command``: its usage line, what it does, and what arguments it takes."""

    name: str
    usage: str
    summary: str
    min_args: int = 0
    max_args: int = 0
    options: tuple[str, ...] = ()  # ``--name VALUE`` options
    choices: tuple[str, ...] = ()  # allowed values of the first argument
    aliases: tuple[str, ...] = ()


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("help", "/help [COMMAND]", "list the commands and keys, or explain one", 0, 1),
    CommandSpec("agents", "/agents", "the agents of this world: model, turns, memory"),
    CommandSpec("roles", "/roles", "the role library (templates for world files)"),
    CommandSpec("flow", "/flow", "the flow's steps, the current step and loop counters"),
    CommandSpec("run", "/run", "run the flow in the background (the prompt stays usable)"),
    CommandSpec("next", "/next", "run one turn (step mode; Enter on an empty line in --mode step)"),
    CommandSpec("pause", "/pause", "pause after the current turn"),
    CommandSpec("resume", "/resume", "continue a paused session in the background"),
    CommandSpec("stop", "/stop", "finish the session (reason manual)"),
    CommandSpec("flag", "/flag NAME", "set flag NAME (for {flag: NAME} conditions)", 1, 1),
    CommandSpec(
        "history",
        "/history [--role R] [--search S]",
        "the messages so far, by role and/or containing S",
        options=("role", "search"),
    ),
    CommandSpec("memory", "/memory AGENT", "what an agent remembers (its memory file)", 1, 1),
    CommandSpec("clear", "/clear AGENT", "clear an agent's memory and turn count", 1, 1),
    CommandSpec("save", "/save [FILE]", "write the session file (default <session id>.json)", 0, 1),
    CommandSpec("load", "/load FILE", "switch to the session in FILE (or a stored id)", 1, 1),
    CommandSpec(
        "export",
        "/export md|html|json [FILE]",
        "export (default <session id>.<format>); md/html: --role R --search S",
        1,
        2,
        options=("role", "search"),
        choices=("md", "html", "json"),
    ),
    CommandSpec(
        "model", "/model [MODEL]", "show the models, or use MODEL (`default` resets)", 0, 1
    ),
    CommandSpec(
        "quit", "/quit", "leave; the session is kept, paused (Ctrl-D too)", aliases=("exit",)
    ),
)

_SPECS: dict[str, CommandSpec] = {s.name: s for s in COMMANDS}
_ALIASES: dict[str, str] = {a: s.name for s in COMMANDS for a in s.aliases}

KEYS: tuple[tuple[str, str], ...] = (
    ("Enter", "send the message (or run the command)"),
    ("Esc Enter, or \\ at the end", "a new line"),
    ("Tab", "complete @agents, /commands, files"),
    ("↑ ↓", "history (kept across sessions)"),
    ("Ctrl-C", "cancel the generation; twice at an empty prompt quits"),
    ("Ctrl-D", "quit; the session is kept, paused (`rolecall resume ID`)"),
)


class CommandError(Exception):
    """A command line that cannot be run as typed; the message is one line for the user."""


@dataclass(frozen=True)
class Command:
    name: str
    args: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)

    @property
    def spec(self) -> CommandSpec:
        return _SPECS[self.name]


def _closest(name: str, choices: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.5)
    return f" (did you mean /{close[0]}?)" if close else ""


def parse_command(line: str) -> Command:
    """``/name args...`` → a :class:`Command`; :class:`CommandError` for a bad line."""
    text = line.strip()
    if not text.startswith("/") or len(text) == 1:
        raise CommandError("a command starts with / followed by its name; /help lists them")
    head, _, rest = text[1:].partition(" ")
    name = head.lower()
    name = _ALIASES.get(name, name)
    spec = _SPECS.get(name)
    if spec is None:
        hint = _closest(name, list(_SPECS) + list(_ALIASES))
        raise CommandError(f"unknown command /{head}{hint}; /help lists the commands")
    try:
        tokens = shlex.split(rest)
    except ValueError as exc:
        raise CommandError(f"/{name}: {exc} (usage: {spec.usage})") from None
    args: list[str] = []
    options: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token.startswith("--") and len(token) > 2:
            key, eq, value = token[2:].partition("=")
            if key not in spec.options:
                known = ", ".join(f"--{o}" for o in spec.options) or "none"
                raise CommandError(f"/{name}: unknown option --{key} (options: {known})")
            if not eq:
                if i + 1 >= len(tokens):
                    raise CommandError(f"/{name}: --{key} needs a value (usage: {spec.usage})")
                i += 1
                value = tokens[i]
            if not value:
                raise CommandError(f"/{name}: --{key} needs a value (usage: {spec.usage})")
            options[key] = value
        else:
            args.append(token)
        i += 1
    if not spec.min_args <= len(args) <= spec.max_args:
        if spec.max_args == 0:
            raise CommandError(f"/{name} takes no arguments (usage: {spec.usage})")
        raise CommandError(f"/{name}: wrong number of arguments (usage: {spec.usage})")
    if spec.choices and args and args[0].lower() not in spec.choices:
        raise CommandError(
            f"/{name}: unknown format {args[0]!r} (one of {', '.join(spec.choices)})"
        )
    if spec.choices and args:
        args[0] = args[0].lower()
    return Command(name, tuple(args), options)


def help_lines(topic: str | None = None) -> list[str]:
    """The text of ``/help`` (all commands and keys) or ``/help COMMAND``."""
    if topic:
        name = topic.lstrip("/").lower()
        spec = _SPECS.get(_ALIASES.get(name, name))
        if spec is None:
            raise CommandError(f"no command /{name}{_closest(name, _SPECS)}")
        extra = f" (also /{', /'.join(spec.aliases)})" if spec.aliases else ""
        return [f"{spec.usage}{extra}", f"  {spec.summary}"]
    width = max(len(s.usage) for s in COMMANDS)
    lines = ["commands:"]
    lines += [f"  {s.usage:<{width}}  {s.summary}" for s in COMMANDS]
    lines.append("anything else is a message: @agent addresses one agent, otherwise all answer;")
    lines.append("start it with // to send a message that begins with /.")
    lines.append("keys:")
    kwidth = max(len(k) for k, _ in KEYS)
    lines += [f"  {k:<{kwidth}}  {v}" for k, v in KEYS]
    return lines


# ------------------------------------------------------------------------------ colours

_PALETTE = ("36", "33", "35", "32", "34", "91", "96", "93", "95", "92")
_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def _ansi(code: str, text: str, on: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if on and text else text


class Palette:
    """One colour per role, and the few styles the REPL uses; plain when ``color`` is off."""

    def __init__(self, role_order: Iterable[str], *, color: bool) -> None:
        self.color = color
        self.colors = {rid: _PALETTE[i % len(_PALETTE)] for i, rid in enumerate(role_order)}

    def role(self, who: str, text: str | None = None) -> str:
        code = self.colors.get(who)
        shown = who if text is None else text
        return _ansi(f"1;{code}", shown, self.color) if code else shown

    def bar(self, who: str) -> str:
        code = self.colors.get(who, "2")
        return _ansi(code, "│ ", self.color)

    def dim(self, text: str) -> str:
        return _ansi("2", text, self.color)

    def bold(self, text: str) -> str:
        return _ansi("1", text, self.color)

    def red(self, text: str) -> str:
        return _ansi("1;31", text, self.color)

    def yellow(self, text: str) -> str:
        return _ansi("33", text, self.color)

    def green(self, text: str) -> str:
        return _ansi("32", text, self.color)


def tokens(n_in: int, n_out: int) -> str:
    return f"↑{n_in:,} ↓{n_out:,}"


def header(
    palette: Palette, sender: str, target: str | None, step: str | None, it: int | None
) -> str:
    """``speaker → target  step S · loop n`` (the loop iteration when it is not the first)."""
    head = palette.role(sender)
    if target:
        head += " → " + palette.role(target)
    if step:
        where = "interjection" if step == "interjection" else f"step {step}"
        if it:
            where += f" · loop {it}"
        head += "  " + palette.dim(where)
    return head


def _wrap(text: str, width: int) -> Iterator[str]:
    """Split one line into pieces of at most ``width`` characters, at spaces when possible."""
    width = max(width, 10)
    while len(text) > width:
        cut = text.rfind(" ", 0, width + 1)
        if cut <= 0:
            cut = width
        yield text[:cut].rstrip(" ")
        text = text[cut:].lstrip(" ")
    yield text


def _terminal_width() -> int:
    return shutil.get_terminal_size((100, 40)).columns


# ------------------------------------------------------------------------------ display


@dataclass
class _Live:
    """The generation being streamed."""

    message_id: str
    sender: str
    started: float
    partial: str = ""
    first_token: float | None = None
    out_tokens: int = 0


class ReplDisplay:
    """Bus subscriber: finished lines go to an outbox printed above the prompt; the line
    being streamed and a spinner make up the live region drawn just above the input.

    Headless: call it with envelopes, read :meth:`take_output` and :meth:`live_lines`.
    """

    def __init__(
        self,
        palette: Palette,
        *,
        width: Callable[[], int] = _terminal_width,
        quiet: bool = False,
        verbose: int = 0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[], None] | None = None,
        totals: Callable[[], tuple[int, int]] | None = None,
    ) -> None:
        self.palette = palette
        self.width = width
        self.quiet = quiet
        self.verbose = verbose
        self.clock = clock
        self.on_change = on_change or (lambda: None)
        self.totals = totals
        self.outbox: list[str] = []
        self.live: _Live | None = None
        self._seen_in = 0
        self._seen_out = 0
        self._blank = True  # the last line printed was blank (or nothing was printed)

    # -- output -----------------------------------------------------------------------
    def emit(self, line: str = "") -> None:
        self.outbox.append(line)
        self._blank = line == ""
        self.on_change()

    def gap(self) -> None:
        """A blank line, unless the last one was blank already."""
        if not self._blank:
            self.emit()

    def info(self, text: str) -> None:
        for line in text.split("\n"):
            self.emit(line)

    def note(self, text: str) -> None:
        self.emit(self.palette.dim(text))

    def warn(self, text: str) -> None:
        self.emit(self.palette.yellow(f"⚠ {text}"))

    def error(self, text: str) -> None:
        self.emit(self.palette.red(f"✗ {text}"))

    def take_output(self) -> str:
        """Everything not printed yet, as text ending with a newline (or '')."""
        lines, self.outbox = self.outbox, []
        return "".join(line + "\n" for line in lines)

    @property
    def active(self) -> bool:
        return self.live is not None

    def live_out_tokens(self) -> int:
        return self.live.out_tokens if self.live else 0

    def live_lines(self, now: float | None = None) -> list[str]:
        """The live region: lines not printed yet (at most 3), the streamed line, a status."""
        lines = self.outbox[-3:]
        live = self.live
        if live is None:
            return lines
        now = self.clock() if now is None else now
        if live.partial:
            lines.append(self.palette.bar(live.sender) + live.partial)
        frame = _SPINNER[int(now * 10) % len(_SPINNER)]
        elapsed = f"{now - live.started:.1f}s"
        name = self.palette.role(live.sender)
        if live.first_token is None:
            status = f"{frame} {name} {self.palette.dim('is thinking · ' + elapsed)}"
        else:
            status = f"{frame} {name} " + self.palette.dim(f"· {elapsed} · ↓{live.out_tokens:,}")
        lines.append(status)
        return lines

    # -- streaming --------------------------------------------------------------------
    def _body(self, sender: str, line: str) -> None:
        for piece in _wrap(line, self.width() - 3):
            self.emit(self.palette.bar(sender) + piece)

    def _feed(self, live: _Live, delta: str) -> None:
        live.partial += delta
        while "\n" in live.partial:
            line, live.partial = live.partial.split("\n", 1)
            self._body(live.sender, line)
        limit = max(self.width() - 3, 10)
        while len(live.partial) > limit:
            cut = live.partial.rfind(" ", 0, limit + 1)
            if cut <= 0:
                cut = limit
            self.emit(self.palette.bar(live.sender) + live.partial[:cut].rstrip(" "))
            live.partial = live.partial[cut:].lstrip(" ")

    def _end_live(self) -> _Live | None:
        live, self.live = self.live, None
        if live is not None and live.partial:
            self.emit(self.palette.bar(live.sender) + live.partial)
            live.partial = ""
        return live

    def _session_totals(self) -> tuple[int, int]:
        return self.totals() if self.totals else (self._seen_in, self._seen_out)

    # -- events -----------------------------------------------------------------------
    def __call__(self, envelope: Envelope) -> None:
        from rolecall.bus import (  # imported here: the prompt is drawn before the runtime loads
            ConditionEvent,
            ErrorEvent,
            JudgeEvent,
            MessageEvent,
            ModeEvent,
            PassEvent,
            SessionEvent,
            StepEvent,
            StopEvent,
            StreamChunk,
            StreamEnd,
            StreamError,
            StreamStart,
            WarningEvent,
        )

        event = envelope.event
        p = self.palette
        if isinstance(event, StreamChunk):
            live = self.live
            if live is None or live.message_id != event.message_id:
                return
            if live.first_token is None:
                live.first_token = self.clock()
            live.out_tokens = event.output_tokens
            self._feed(live, event.delta)
            self.on_change()
        elif isinstance(event, StreamStart):
            self._end_live()
            self.gap()
            self.emit(header(p, event.sender, event.target, event.step_id, event.loop_iteration))
            self.live = _Live(event.message_id, event.sender, self.clock())
        elif isinstance(event, StreamEnd):
            live = self._end_live()
            self._seen_in += event.input_tokens
            self._seen_out += event.output_tokens
            if not self.quiet:
                took = f" · {self.clock() - live.started:.1f}s" if live else ""
                self.emit(p.dim(f"  {tokens(event.input_tokens, event.output_tokens)}{took}"))
            self.emit()
        elif isinstance(event, StreamError):
            self._end_live()
            if event.error == "cancelled":
                self.error(
                    f"cancelled: {event.sender}'s reply ({event.message_id}) is kept as an "
                    "incomplete draft, outside the history"
                )
            else:
                self.error(f"{event.sender}'s reply ({event.message_id}) failed: {event.error}")
        elif isinstance(event, MessageEvent):
            if event.sender == "system":
                self.gap()
                self.emit(p.yellow(f"⚑ system: {event.content}"))
        elif isinstance(event, PassEvent):
            self.note(f"  ({event.agent} passes the floor to you)")
        elif isinstance(event, WarningEvent):
            self.warn(event.message)
        elif isinstance(event, ErrorEvent):
            if not event.source.startswith("model:"):  # the stream error says it already
                self.error(event.error)
        elif isinstance(event, SessionEvent):
            if event.state == "paused" and event.reason != "quit":
                self.emit(p.yellow(f"⏸ paused ({event.reason or 'paused'}) · /resume continues"))
        elif isinstance(event, StopEvent):
            self._end_live()
            detail = f" ({event.detail})" if event.detail else ""
            total = tokens(*self._session_totals())
            self.gap()
            self.emit(p.bold(f"■ finished: {event.reason}{detail}") + p.dim(f" · session {total}"))
        elif isinstance(event, JudgeEvent):
            scores = ", ".join(f"{k} {v:g}" for k, v in event.scores.items())
            self.note(
                f"  ⚖ {event.judge}: {scores or 'no scores'}{'' if event.valid else ' (invalid)'}"
            )
        elif isinstance(event, ModeEvent):
            self.note(f"  ◆ {event.mode}: {event.name}")
        elif self.verbose and isinstance(event, ConditionEvent):
            mark = "✓" if event.result else "·"
            self.note(f"  {mark} {event.context} {event.condition}: {event.detail}")
        elif self.verbose and isinstance(event, StepEvent):
            self.note(f"  ↳ #{event.execution_order} {event.step_id}: {event.result}")


# ------------------------------------------------------------------------------ runner


class Outcome(Enum):
    CONTINUE = "continue"
    QUIT = "quit"


@dataclass(frozen=True)
class LoadRequest:
    """``/load``: the REPL switches to the session of ``doc``."""

    doc: SessionDocument
    source: str


Job = Callable[[], Awaitable[object]]
Spawner = Callable[[str, Job], None]


def _models_in_use(session: Session) -> list[str]:
    return sorted({session.model_name(r) for r in session.world.roles})


def _flag_names(world: World) -> list[str]:
    """Flag names the world's conditions look at (for completion)."""
    from rolecall.flows.model import FlagCond

    found: set[str] = set()

    def walk(cond: object) -> None:
        if isinstance(cond, FlagCond):
            found.add(cond.flag)
        for attr in ("any", "all"):
            for inner in getattr(cond, attr, None) or ():
                walk(inner)
        inner_not = getattr(cond, "not_", None)
        if inner_not is not None:
            walk(inner_not)

    flow = world.flow
    if flow is not None:
        for cond in flow.stop:
            walk(cond)
        for step in flow.steps:
            if step.loop is not None and step.loop.until is not None:
                walk(step.loop.until)
            if isinstance(step.next, list):
                for branch in step.next:
                    if branch.when is not None:
                        walk(branch.when)
    return sorted(found)


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _resolve_agent(session: Session, name: str) -> str:
    wanted = name.lstrip("@").lower()
    for rid in session.world.role_ids:
        if rid.lower() == wanted:
            return rid
    ids = session.world.role_ids
    close = difflib.get_close_matches(wanted, ids, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}?" if close else "agents: " + ", ".join(ids)
    raise CommandError(f"no agent {name!r} in this world ({hint})")


class CommandRunner:
    """Carries out parsed commands on one session; no terminal needed.

    ``echo`` prints one line (or several joined by newlines) for the user. ``spawn``
    starts a job (a turn, a run) in the background; without it jobs are awaited in
    place, as the piped mode does. ``busy`` says whether background jobs are running.
    """

    def __init__(
        self,
        session: Session,
        *,
        echo: Callable[[str], None],
        store: SqliteStore | None = None,
        memory: MemoryFiles | None = None,
        spawn: Spawner | None = None,
        busy: Callable[[], bool] = lambda: False,
        palette: Palette | None = None,
        cwd: Path | None = None,
        data_dir: Path | None = None,
        on_model: Callable[[str], None] | None = None,
    ) -> None:
        self.session = session
        self.echo = echo
        self.store = store
        self.memory = memory
        self.spawn = spawn
        self.busy = busy
        self.palette = palette or Palette(session.world.role_ids, color=False)
        self.cwd = cwd
        self.data_dir = data_dir
        self.on_model = on_model

    @property
    def driven(self) -> bool:
        """The world has a flow (or a mode's director) that decides who speaks."""
        return self.session.engine is not None or self.session.director is not None

    async def _start(self, name: str, job: Job) -> None:
        if self.spawn is not None:
            self.spawn(name, job)
        else:
            await job()

    def _path(self, name: str) -> Path:
        path = Path(name).expanduser()
        if not path.is_absolute() and self.cwd is not None:
            path = self.cwd / path
        return path

    async def execute(self, command: Command) -> Outcome | LoadRequest:
        handler: Callable[[Command], Awaitable[Outcome | LoadRequest | None]] = getattr(
            self, "_cmd_" + command.name
        )
        result = await handler(command)
        return Outcome.CONTINUE if result is None else result

    async def run_line(self, line: str) -> Outcome | LoadRequest:
        """Parse and run one ``/command`` line; a bad line or a failure is echoed, not raised."""
        from rolecall.errors import RolecallError

        try:
            return await self.execute(parse_command(line))
        except (CommandError, RolecallError) as exc:
            self.echo(str(exc))
            return Outcome.CONTINUE

    # -- information ------------------------------------------------------------------
    async def _cmd_help(self, cmd: Command) -> None:
        self.echo("\n".join(help_lines(cmd.args[0] if cmd.args else None)))

    async def _cmd_agents(self, cmd: Command) -> None:
        s = self.session
        p = self.palette
        width = max(len(r.id) for r in s.world.roles) + 1
        lines = [f"agents of {s.world.name}:"]
        for role in s.world.roles:
            turns = s.state.transcript.turns_by_role.get(role.id, 0)
            facts = [s.model_name(role), _count(turns, "turn")]
            count = s.state.turn_counts.get(role.id)
            if count:
                facts.append(f"{count}/{s.world.settings.turn_limit} calls since you spoke")
            if self.memory is not None:
                entries = len(self.memory.read(s.session_id, role.id))
                facts.append(_count(entries, "memory entry", "memory entries"))
            about = role.display_name + (f" — {role.description}" if role.description else "")
            at = "@" + role.id
            lines.append(f"  {p.role(role.id, f'{at:<{width}}')}  {_shorten(about, 70)}")
            lines.append("  " + " " * width + "  " + p.dim(" · ".join(facts)))
        self.echo("\n".join(lines))

    async def _cmd_roles(self, cmd: Command) -> None:
        from rolecall.world.library import RoleLibrary

        user_dir = self.data_dir / "roles" if self.data_dir is not None else None
        library = RoleLibrary(user_dir)
        used = {r.template for r in self.session.world.roles if r.template}
        ids = library.ids()
        width = max((len(i) for i in ids), default=4)
        lines = ["role library (templates for `roles:` entries in a world file):"]
        for rid in ids:
            try:
                data = library.get(rid)
            except Exception as exc:  # a broken user file: say so, keep listing
                lines.append(f"  {rid:<{width}}  (unreadable: {exc})")
                continue
            kind = "built-in" if library.is_builtin(rid) else "yours"
            mark = " *" if rid in used else ""
            desc = _shorten(str(data.get("description", "")), 60)
            lines.append(f"  {rid:<{width}}  {desc}  {self.palette.dim(kind + mark)}")
        if used:
            lines.append(self.palette.dim("  * used by this world"))
        self.echo("\n".join(lines))

    async def _cmd_flow(self, cmd: Command) -> None:
        from rolecall.flows.model import describe

        s = self.session
        engine = s.engine
        if engine is None:
            if s.director is not None:
                self.echo(
                    f"this world runs in {s.world.mode} mode: its turns are planned by the mode"
                )
            else:
                self.echo("this world has no flow: it is a chat (type a message, @agent for one)")
            return
        pointer = s.state.pointer
        flow = engine.flow
        p = self.palette
        head = f"flow (start {engine.start}"
        if flow.stop:
            head += "; stop when " + " or ".join(describe(c) for c in flow.stop)
        lines = [head + ")"]
        width = max(len(st.id) for st in flow.steps)
        swidth = max(len(st.speaker) for st in flow.steps)
        current = (
            None if s.finished else (pointer.current or (None if pointer.started else engine.start))
        )
        for st in flow.steps:
            n = pointer.exec_counts.get(st.id, 0)
            mark = "▶" if st.id == current else ("✓" if n else " ")
            speaker = p.role(st.speaker, f"{st.speaker:<{swidth}}")
            line = f"  {mark} {st.id:<{width}}  {speaker}  ran {n}×"
            if st.loop is not None:
                line += f"  loop → {st.loop.to} ({n}/{st.loop.max})"
                if st.loop.until is not None:
                    line += f" until {describe(st.loop.until)}"
            if isinstance(st.next, str):
                line += f"  then {st.next}"
            elif isinstance(st.next, list):
                line += "  then " + ", ".join(
                    (f"{b.goto} if {describe(b.when)}" if b.when is not None else b.goto)
                    for b in st.next
                )
            lines.append(line)
        if flow.final is not None:
            lines.append(f"    {flow.final.id:<{width}}  {flow.final.speaker}  (final step)")
        if s.finished:
            lines.append(f"finished: {s.state.stop_reason}")
        else:
            where = f"next: {current}" if current else "next: (deciding)"
            lines.append(
                f"{where} · {pointer.execution_order} steps executed · state {s.state.state}"
            )
        self.echo("\n".join(lines))

    async def _cmd_history(self, cmd: Command) -> None:
        s = self.session
        role = cmd.options.get("role")
        if role is not None and role.lower() not in ("human", "system"):
            role = _resolve_agent(s, role)
        search = cmd.options.get("search")
        p = self.palette
        shown = 0
        width = _terminal_width() - 3
        lines: list[str] = []
        for m in s.state.transcript.messages:
            if role is not None and m.sender.lower() != role.lower():
                continue
            if search is not None and search.casefold() not in m.content.casefold():
                continue
            shown += 1
            head = f"{p.dim(m.id)} " + header(p, m.sender, m.target, m.step_id, m.loop_iteration)
            if m.kind == "agent":
                head += "  " + p.dim(tokens(m.input_tokens, m.output_tokens))
            lines.append(head)
            for text_line in m.content.split("\n"):
                lines += [p.bar(m.sender) + piece for piece in _wrap(text_line, width)]
        drafts = [d for d in s.state.drafts if role is None or d.sender.lower() == role.lower()]
        what = []
        if role:
            what.append(f"by {role}")
        if search:
            what.append(f"containing {search!r}")
        if not shown:
            lines.append("no messages" + (" " + " ".join(what) if what else " yet"))
        else:
            noun = "message" if shown == 1 else "messages"
            lines.append(p.dim(f"{shown} {noun}" + (" " + " ".join(what) if what else "")))
        if drafts and search is None:
            lines.append(p.dim(f"{len(drafts)} incomplete drafts outside the history"))
        self.echo("\n".join(lines))

    async def _cmd_memory(self, cmd: Command) -> None:
        agent = _resolve_agent(self.session, cmd.args[0])
        if self.memory is None:
            self.echo("memory files are not available here")
            return
        entries = self.memory.read(self.session.session_id, agent)
        start = self.session.state.memory_start.get(agent, 0)
        path = self.memory.path(self.session.session_id, agent)
        p = self.palette
        lines = [f"memory of {agent}: {_count(len(entries), 'entry', 'entries')} ({path})"]
        window = self.session.world.settings.memory_window
        for i, entry in enumerate(entries):
            who = entry.get("name") or entry.get("role", "?")
            role = entry.get("role", "?")
            text = _shorten(str(entry.get("content", "")), max(_terminal_width() - 30, 40))
            lines.append(f"  {p.dim(str(entry.get('message_id', '')))} {role}({who}): {text}")
            if i == len(entries) - window - 1:
                lines.append(p.dim(f"  ── the last {window} entries are in the next prompt ──"))
        if start:
            lines.append(p.dim(f"  (prompts start at message m{start + 1}: memory cleared before)"))
        self.echo("\n".join(lines))

    # -- flow control -----------------------------------------------------------------
    async def _cmd_run(self, cmd: Command) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.state.stop_reason}); /load another one")
            return
        if self.busy():
            self.echo("already running; /pause or /stop it, or type to interject")
            return
        if not self.driven and not s.state.pending:
            self.echo("this world has no flow to run: type a message to talk to the agents")
            return
        await self._start("run", s.run)

    async def _cmd_next(self, cmd: Command) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.state.stop_reason}); nothing to step")
            return
        if self.busy():
            self.echo("a turn is running; /pause first, then /next steps one turn at a time")
            return
        if not self.driven and not s.state.pending:
            self.echo("nothing to step: this world has no flow and no reply is due")
            return

        async def one() -> None:
            if not await s.step():
                self.echo("nothing to run")

        await self._start("next", one)

    async def _cmd_pause(self, cmd: Command) -> None:
        s = self.session
        if s.finished:
            self.echo("the session has finished; nothing to pause")
        elif self.busy() or s.generator.busy:
            s.pause("manual")
            self.echo("pausing after the current turn")
        elif s.state.state == "paused":
            self.echo(f"already paused ({s.state.pause_reason})")
        else:
            s.pause("manual")

    async def _cmd_resume(self, cmd: Command) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.state.stop_reason}); nothing to resume")
            return
        if self.busy():
            self.echo("already running")
            return
        if not self.driven and not s.state.pending:
            self.echo("nothing to resume: no reply is due; type a message")
            return
        await self._start("resume", s.resume)

    async def _cmd_stop(self, cmd: Command) -> None:
        s = self.session
        if s.finished:
            self.echo(f"already finished ({s.state.stop_reason})")
            return
        running = self.busy() or s.generator.busy
        s.stop()
        if running:
            self.echo("stopping after the current turn")

    async def _cmd_flag(self, cmd: Command) -> None:
        name = cmd.args[0]
        self.session.set_flag(name)
        self.echo(f"flag {name} set")

    async def _cmd_clear(self, cmd: Command) -> None:
        agent = _resolve_agent(self.session, cmd.args[0])
        archive = None
        if self.memory is not None:
            archive = await anyio.to_thread.run_sync(
                self.memory.clear, self.session.session_id, agent
            )
        self.session.forget(agent)
        where = f"; the old file is archived as {archive.name}" if archive is not None else ""
        self.echo(f"memory of {agent} cleared{where}")

    async def _cmd_model(self, cmd: Command) -> None:
        s = self.session
        if not cmd.args:
            lines = [f"model override: {s.model_override or 'none'}"]
            for role in s.world.roles:
                base = s.world.model_for(role)
                used = s.model_name(role)
                note = f" (world: {base})" if used != base else ""
                lines.append(f"  {role.id}: {used}{note}")
            self.echo("\n".join(lines))
            return
        name = cmd.args[0]
        if name.lower() in ("default", "none", "-"):
            s.model_override = None
            self.echo("model override removed: every role uses the world's model again")
            return
        s.model_override = name
        self.echo(f"every non-scripted role now uses {name} (from the next turn)")
        if self.on_model is not None:
            self.on_model(name)

    # -- files --------------------------------------------------------------------------
    async def _cmd_save(self, cmd: Command) -> None:
        from rolecall.cli.wiring import save_to_file

        s = self.session
        if self.store is None or self.memory is None:
            self.echo("/save needs the session store")
            return
        path = self._path(cmd.args[0] if cmd.args else f"{s.session_id}.json")
        doc = await save_to_file(s, self.store, self.memory, path)
        self.echo(f"saved {_count(len(doc.messages), 'message')} to {path}")

    async def _cmd_load(self, cmd: Command) -> LoadRequest | None:
        from rolecall.session.document import read_session_file

        name = cmd.args[0]
        path = self._path(name)
        if path.suffix == ".json" or await anyio.Path(path).is_file():
            doc = await anyio.to_thread.run_sync(read_session_file, path)
            source = str(path)
        elif self.store is not None:
            await self.store.flush(self.session)
            doc = await self.store.load(name)
            source = f"the store ({name})"
        else:
            raise CommandError(f"no session file {path}")
        if doc.session_id == self.session.session_id:
            self.echo(f"{source} holds this very session ({doc.session_id}): nothing to switch")
            return None
        return LoadRequest(doc, source)

    async def _cmd_export(self, cmd: Command) -> None:
        from rolecall.cli.wiring import save_to_file

        s = self.session
        fmt = cmd.args[0]
        if self.store is None or self.memory is None:
            self.echo("/export needs the session store")
            return
        path = self._path(cmd.args[1] if len(cmd.args) > 1 else f"{s.session_id}.{fmt}")
        role = cmd.options.get("role")
        search = cmd.options.get("search")
        if fmt == "json":
            if role or search:
                raise CommandError(
                    "/export json writes the whole session; --role/--search are for md and html"
                )
            doc = await save_to_file(s, self.store, self.memory, path)
            self.echo(f"exported {_count(len(doc.messages), 'message')} to {path}")
            return
        from rolecall.export import to_html, to_markdown

        render = to_markdown if fmt == "md" else to_html
        await self.store.flush(s)
        doc = await self.store.load(s.session_id)
        if role is not None and role.lower() not in ("human", "system"):
            role = _resolve_agent(s, role)
        text = render(doc, role=role, search=search)
        await anyio.Path(path).write_text(text, encoding="utf-8")
        self.echo(f"exported {fmt} to {path}")

    async def _cmd_quit(self, cmd: Command) -> Outcome:
        return Outcome.QUIT


async def run_command_line(
    session: Session,
    line: str,
    *,
    store: SqliteStore | None = None,
    memory: MemoryFiles | None = None,
    out: TextIO | None = None,
) -> bool:
    """One ``/command`` line in the piped mode; False means quit (like ``piped.command``).

    Jobs (``/run``, ``/next``, ``/resume``) are awaited in place; messages for the user
    go to ``out`` (stderr by default) so the transcript on stdout stays clean.
    """
    stream = out or sys.stderr

    def echo(text: str) -> None:
        print(text, file=stream, flush=True)

    runner = CommandRunner(session, echo=echo, store=store, memory=memory, cwd=Path.cwd())
    result = await runner.run_line(line)
    if isinstance(result, LoadRequest):
        echo("/load works in the interactive REPL only")
        return True
    return result is not Outcome.QUIT


# ------------------------------------------------------------------------------ completion

_MENTION_PREFIX = re.compile(r"(?:^|(?<=[^\w.@-]))@([\w-]*)$")


@dataclass(frozen=True)
class Candidate:
    """One completion: replace the ``-start`` characters before the cursor with ``text``."""

    text: str
    start: int
    display: str = ""
    meta: str = ""


class ReplCompleter:
    """``/commands`` (with descriptions), their arguments, and ``@agent`` mentions.

    Headless (:meth:`complete`); :meth:`for_prompt` wraps it for prompt-toolkit.
    """

    def __init__(
        self, world: Callable[[], World], session: Callable[[], Session | None] | None = None
    ) -> None:
        self.world = world
        self.session = session or (lambda: None)

    def for_prompt(self) -> Completer:
        from prompt_toolkit.completion import Completer, Completion

        source = self

        class _Completer(Completer):
            def get_completions(
                self, document: Document, complete_event: CompleteEvent
            ) -> Iterator[Completion]:
                for c in source.complete(document.text_before_cursor):
                    yield Completion(
                        c.text,
                        start_position=-c.start,
                        display=c.display or None,
                        display_meta=c.meta,
                    )

        return _Completer()

    def _models(self) -> list[str]:
        session = self.session()
        if session is not None:
            return _models_in_use(session)
        world = self.world()
        return sorted({world.model_for(r) for r in world.roles})

    def complete(self, text: str) -> Iterator[Candidate]:
        """The candidates for ``text``, the input before the cursor."""
        if text.startswith("/") and "\n" not in text:
            if " " not in text:
                yield from self._commands(text[1:])
            else:
                yield from self._arguments(text)
            return
        match = _MENTION_PREFIX.search(text)
        if match is not None:
            yield from self._agents(match.group(1), at=True)

    def _commands(self, prefix: str) -> Iterator[Candidate]:
        low = prefix.lower()
        for spec in COMMANDS:
            if spec.name.startswith(low):
                yield Candidate("/" + spec.name, len(prefix) + 1, spec.usage, spec.summary)

    def _agents(self, prefix: str, *, at: bool) -> Iterator[Candidate]:
        low = prefix.lower()
        world = self.world()
        for role in world.roles:
            if role.id.lower().startswith(low):
                meta = role.display_name + (f" — {role.description}" if role.description else "")
                shown = ("@" if at else "") + role.id
                yield Candidate(role.id, len(prefix), shown, _shorten(meta, 60))
        if at and "all".startswith(low) and low:
            yield Candidate("all", len(prefix), "@all", "every agent answers")

    def _words(self, prefix: str, words: Iterable[str], meta: str = "") -> Iterator[Candidate]:
        for word in words:
            if word.lower().startswith(prefix.lower()):
                yield Candidate(word, len(prefix), "", meta)

    def _paths(self, word: str) -> Iterator[Candidate]:
        from prompt_toolkit.completion import CompleteEvent, PathCompleter
        from prompt_toolkit.document import Document

        completer = PathCompleter(expanduser=True)
        for c in completer.get_completions(Document(word, len(word)), CompleteEvent()):
            yield Candidate(c.text, -c.start_position, c.display_text, c.display_meta_text)

    def _arguments(self, text: str) -> Iterator[Candidate]:
        head, _, rest = text[1:].partition(" ")
        name = _ALIASES.get(head.lower(), head.lower())
        spec = _SPECS.get(name)
        if spec is None:
            return
        parts = rest.split(" ")
        word = parts[-1]
        before = [w for w in parts[:-1] if w]
        previous = before[-1] if before else ""
        positional = [
            w
            for i, w in enumerate(before)
            if not w.startswith("--")
            and not (i and before[i - 1].startswith("--") and "=" not in before[i - 1])
        ]
        if previous == "--role" and "role" in spec.options:
            yield from self._agents(word, at=False)
            return
        if word.startswith("-") and spec.options:
            yield from self._words(word, [f"--{o}" for o in spec.options])
            return
        if name in ("memory", "clear") and not positional:
            yield from self._agents(word.lstrip("@"), at=False)
        elif name == "help" and not positional:
            yield from self._words(word, [s.name for s in COMMANDS])
        elif name == "flag" and not positional:
            yield from self._words(word, _flag_names(self.world()), "a flag the world checks")
        elif name == "model" and not positional:
            yield from self._words(word, ["default", *self._models()])
        elif name == "export" and not positional:
            yield from self._words(word, spec.choices)
        elif name in ("save", "load", "export"):
            yield from self._paths(word)


# ------------------------------------------------------------------------------ wiring


@asynccontextmanager
async def open_live_session(
    args: argparse.Namespace,
    world: World,
    store: SqliteStore,
    *,
    world_source: str | None = None,
    doc: SessionDocument | None = None,
) -> AsyncIterator[Session]:
    """``wiring.live_session`` without its terminal display (the REPL brings its own)."""
    from rolecall.cli import wiring

    def no_display(bus: EventBus) -> None:
        return None  # the REPL subscribes its own display

    async with wiring.live_session(
        args, world, store, world_source=world_source, doc=doc, display=no_display
    ) as session:
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


def _quiet_args(args: argparse.Namespace) -> argparse.Namespace:
    """``args`` for a session switched to with /load: no --session-file of the first one."""
    values = dict(vars(args))
    values["session_file"] = None
    return argparse.Namespace(**values)


def mark_quit(session: Session) -> None:
    """Keep the session for ``rolecall resume``: paused, reason ``quit`` (idle sessions only)."""
    from rolecall.bus import SessionEvent

    if session.finished:
        return
    state = session.state
    if state.state != "paused":
        session.pause("quit")
    elif state.pause_reason != "quit":
        state.pause_reason = "quit"
        session.bus.publish(SessionEvent(state="paused", reason="quit"))


# ------------------------------------------------------------------------------ the REPL

_STYLE = {
    "prompt": "bold",
    "continuation": "#888888",
    "placeholder": "#888888 italic",
    "bottom-toolbar": "noreverse bg:#303030 #d0d0d0",
    "bottom-toolbar.key": "bold",
    "bottom-toolbar.state": "bold",
    "bottom-toolbar.hint": "#a0a0a0",
}
_STYLE_PLAIN = {"bottom-toolbar": "reverse", "placeholder": "italic"}


class _FirstPrompt:
    """The first prompt, started before the session exists (see :meth:`Repl.booting`)."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.done = anyio.Event()
        self.text = ""
        self.error: BaseException | None = None

    async def run(self, prompt: PromptSession[str]) -> None:
        try:
            self.text = await prompt.prompt_async(handle_sigint=False, pre_run=self.started.set)
        except (EOFError, KeyboardInterrupt) as exc:
            self.error = exc
        finally:
            self.started.set()
            self.done.set()

    async def result(self) -> str:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.text


class Repl:
    """The prompt-toolkit front end of one or more sessions (``/load`` switches)."""

    def __init__(
        self,
        args: argparse.Namespace,
        store: SqliteStore | None,
        *,
        memory: MemoryFiles | None = None,
        input: Input | None = None,
        output: Output | None = None,
        color: bool | None = None,
        history_file: Path | None = None,
        handle_signals: bool = True,
        patch_output: bool = True,
        sink: Callable[[str], None] | None = None,
        cwd: Path | None = None,
        width: Callable[[], int] | None = None,
    ) -> None:
        from rolecall.paths import data_dir

        self.args = args
        self.store = store  # None while booting: set before run()
        self.data_dir = data_dir(getattr(args, "data_dir", None))
        self._memory = memory
        self.color = (not os.environ.get("NO_COLOR")) if color is None else color
        self.handle_signals = handle_signals
        self.patch_output = patch_output
        self.step_mode = getattr(args, "mode", "auto") == "step"
        self.verbose = int(getattr(args, "verbose", 0) or 0)
        self.quiet = bool(getattr(args, "quiet", False))
        self.cwd = cwd
        self._width = width or _terminal_width
        self._sink = sink
        self._input = input
        self._output = output
        self._history_file = history_file or self.data_dir / "repl_history"
        self.jobs = 0
        self._armed = False
        self._quit = False
        self._preloading = False
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._tg: TaskGroup | None = None
        self._open: dict[str, Session] = {}
        self._world: World | None = None
        self._first: _FirstPrompt | None = None
        self._boot_banner = False
        self.session: Session | None = None
        self.display: ReplDisplay | None = None
        self.runner: CommandRunner | None = None
        self.prompt: PromptSession[str] | None = None

    @property
    def memory(self) -> MemoryFiles:
        if self._memory is None:
            from rolecall.memory import MemoryFiles

            self._memory = MemoryFiles.in_data_dir(self.data_dir)
        return self._memory

    # -- public -------------------------------------------------------------------------
    @asynccontextmanager
    async def booting(self, world: World) -> AsyncIterator[None]:
        """Draw the banner and the prompt at once; open the session inside, then run().

        The first prompt is up (and takes keys) while the runtime, the store and the
        session are loaded; :meth:`run` then carries on with that very prompt.
        """
        self._world = world
        self.prompt = self._make_prompt()
        palette = Palette(world.role_ids, color=self.color)
        self._print("".join(line + "\n" for line in self._world_banner(world, palette)))
        self._boot_banner = True
        first = _FirstPrompt()
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.run, self.prompt)
            await first.started.wait()  # the prompt is drawn
            self._first = first
            try:
                yield
            finally:
                tg.cancel_scope.cancel()  # still waiting for input when booting failed

    async def run(self, session: Session) -> Session:
        """Serve ``session`` (and those ``/load`` switches to) until quit; the last one."""
        self._open[session.session_id] = session
        if self.prompt is None:
            self.prompt = self._make_prompt()
        current = session
        async with AsyncExitStack() as stack:
            while True:
                result = await self._serve(current)
                if not isinstance(result, LoadRequest):
                    return current
                try:
                    current = await self._switch(stack, result)
                except Exception as exc:
                    self._print(Palette((), color=self.color).red(f"✗ cannot load: {exc}"))
                    self._quit = False
        return current  # pragma: no cover - the loop returns

    # -- sessions -----------------------------------------------------------------------
    async def _switch(self, stack: AsyncExitStack, request: LoadRequest) -> Session:
        doc = request.doc
        known = self._open.get(doc.session_id)
        if known is not None:
            return known
        assert self.store is not None
        session = await stack.enter_async_context(
            open_live_session(_quiet_args(self.args), doc.world_model(), self.store, doc=doc)
        )
        self._open[session.session_id] = session
        return session

    def _world_banner(self, world: World, p: Palette) -> list[str]:
        title = world.title or world.description or world.name
        lines = [
            p.bold(f"rolecall · {world.name}") + (f" — {title}" if title != world.name else "")
        ]
        if world.topic:
            lines.append(p.dim("topic: ") + world.topic)
        lines.append(p.dim("agents: ") + "  ".join(p.role(r.id, "@" + r.id) for r in world.roles))
        if world.flow is not None or world.mode is not None:
            steps = len(world.flow.steps) if world.flow else 0
            what = f"a flow of {steps} steps" if world.flow else f"{world.mode} mode"
            enter = " (or Enter)" if self.step_mode else ""
            lines.append(
                p.dim(f"{what}: /run runs it, /next{enter} one turn, /flow shows where it is")
            )
        lines.append(
            p.dim("type a message · @agent for one agent · /help · Ctrl-C cancels · Ctrl-D quits")
        )
        lines.append("")
        return lines

    def _banner(self, session: Session, *, loaded: bool) -> None:
        d = self.display
        assert d is not None
        p = d.palette
        world = session.world
        if self._boot_banner:
            self._boot_banner = False  # printed while booting
            return
        lines = self._world_banner(world, p)
        for line in lines[:3]:
            d.emit(line)
        if loaded or len(session.state.transcript):
            st = session.state
            state = st.state + (f" ({st.pause_reason})" if st.pause_reason else "")
            if st.stop_reason:
                state += f" ({st.stop_reason})"
            d.emit(
                p.dim(f"session {session.session_id}: ")
                + f"{_count(len(st.transcript), 'message')}, {state}"
            )
            last = st.transcript.latest()
            if last is not None:
                d.emit(header(p, last.sender, last.target, last.step_id, last.loop_iteration))
                for line in _wrap(_shorten(last.content, 400), self._width() - 3):
                    d.emit(p.bar(last.sender) + line)
            driven = session.engine is not None or session.director is not None
            if st.pending or (driven and st.state == "paused" and not session.finished):
                d.note("/resume continues where it stopped")
        for line in lines[3:]:
            d.emit(line)

    async def _serve(self, session: Session) -> Outcome | LoadRequest:
        loaded = self.session is not None
        self.session = session
        palette = Palette(session.world.role_ids, color=self.color)
        transcript = session.state.transcript

        def totals() -> tuple[int, int]:
            return transcript.input_tokens, transcript.output_tokens

        self.display = ReplDisplay(
            palette,
            width=self._width,
            quiet=self.quiet,
            verbose=self.verbose,
            on_change=self._changed,
            totals=totals,
        )
        self.runner = CommandRunner(
            session,
            echo=self.display.info,
            store=self.store,
            memory=self.memory,
            spawn=self._spawn,
            busy=lambda: self.jobs > 0,
            palette=palette,
            cwd=self.cwd,
            data_dir=self.data_dir,
            on_model=lambda name: self._preload([name]),
        )
        subscription = session.bus.subscribe(self.display, name="repl")
        self._armed = False
        self._quit = False
        session.open()
        self._banner(session, loaded=loaded)
        self._changed()  # redraw: the toolbar shows the session now
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._pump)
                tg.start_soon(self._ticker)
                if self.handle_signals:
                    tg.start_soon(self._watch_signals)
                self._preload(_models_in_use(session))
                with self._terminal():
                    try:
                        result = await self._loop()
                    except BaseException:
                        # the terminal went away or the REPL broke: still keep the session
                        with anyio.move_on_after(5, shield=True):
                            await self._leave(session, switching=False)
                        raise
                    await self._leave(session, switching=isinstance(result, LoadRequest))
                    await self._flush()
                tg.cancel_scope.cancel()
        finally:
            subscription.close()
            self._tg = None
        self._print(self.display.take_output())
        return result

    @contextmanager
    def _terminal(self) -> Iterator[None]:
        if not self.patch_output:
            yield
            return
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True), _logs_above_prompt(self.verbose):
            yield

    async def _loop(self) -> Outcome | LoadRequest:
        assert self.prompt is not None
        assert self.runner is not None
        while not self._quit:
            await self._flush()  # what the last line printed comes before the next prompt
            first, self._first = self._first, None
            try:
                if first is not None:
                    text = await first.result()
                else:
                    text = await self.prompt.prompt_async(handle_sigint=False)
            except EOFError:
                return Outcome.QUIT
            except KeyboardInterrupt:  # pragma: no cover - Ctrl-C is bound; belt and braces
                continue
            self._armed = False
            result = await self._handle(text)
            if result is not Outcome.CONTINUE:
                return result
        return Outcome.QUIT

    async def _handle(self, text: str) -> Outcome | LoadRequest:
        session = self.session
        runner = self.runner
        display = self.display
        assert session is not None
        assert runner is not None
        assert display is not None
        message = text.strip()
        if not message:
            if self.step_mode and not session.finished and (runner.driven or session.state.pending):
                return await runner.execute(Command("next"))
            return Outcome.CONTINUE
        if message.startswith("//"):
            message = message[1:]  # a message that starts with "/"
        elif message.startswith("/"):
            from rolecall.errors import RolecallError

            try:
                return await runner.execute(parse_command(message))
            except (CommandError, RolecallError) as exc:
                display.error(str(exc))
            except Exception as exc:
                log.warning("repl_command_failed", command=message.split()[0], exc_info=exc)
                display.error(f"{message.split()[0]} failed: {exc}")
            return Outcome.CONTINUE
        if session.finished:
            display.warn(
                f"the session has finished ({session.state.stop_reason}); "
                "the message was not sent (/load another session, or start a new chat)"
            )
            return Outcome.CONTINUE
        self._spawn("message", lambda: session.say(message))
        return Outcome.CONTINUE

    async def _leave(self, session: Session, *, switching: bool) -> None:
        """Stop what runs, then keep the session paused (reason ``quit``)."""
        if session.generator.busy:
            session.cancel_generation()  # kept as a draft; the turn pauses the session
        elif self.jobs and not session.finished:
            session.pause("quit")  # after the turn in progress
        if self.jobs:
            with anyio.move_on_after(15):
                await self._idle.wait()
        mark_quit(session)
        display = self.display
        assert display is not None
        if switching:
            display.note(f"left session {session.session_id} (kept, {session.state.state})")
        elif not session.finished:
            display.gap()
            display.note(
                f"session {session.session_id} kept (paused) · "
                f"continue it with: rolecall resume {session.session_id}"
            )

    # -- background ----------------------------------------------------------------------
    def _spawn(self, name: str, job: Job) -> None:
        assert self._tg is not None
        if self.jobs == 0:
            self._idle = anyio.Event()
        self.jobs += 1
        self._changed()

        async def run() -> None:
            try:
                await job()
            except Exception as exc:
                log.warning("repl_job_failed", job=name, exc_info=exc)
                if self.display is not None:
                    self.display.error(f"{name} failed: {exc}")
            finally:
                self.jobs -= 1
                if self.jobs == 0:
                    self._idle.set()
                self._changed()

        self._tg.start_soon(run, name=f"repl-{name}")

    def _preload(self, models: list[str]) -> None:
        from rolecall.llm.registry import needs_litellm

        if self._preloading or self._tg is None or not any(needs_litellm(m) for m in models):
            return
        from rolecall.llm import litellm_model

        if litellm_model.is_loaded():
            return
        self._preloading = True

        async def load() -> None:
            try:
                await anyio.to_thread.run_sync(litellm_model.preload, abandon_on_cancel=True)
            except Exception as exc:
                self._preloading = False
                if self.display is not None:
                    self.display.warn(f"could not load litellm: {exc}")

        self._tg.start_soon(load, name="repl-preload-litellm")

    def _changed(self) -> None:
        self._wake.set()
        if self.prompt is not None:
            self.prompt.app.invalidate()

    def _print(self, text: str) -> None:
        if not text:
            return
        if self._sink is not None:
            self._sink(text)
            return
        try:
            if self.prompt is None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                self.prompt.app.output.write_raw(text)
                self.prompt.app.output.flush()
        except OSError:  # the terminal is gone (SIGHUP): nothing left to show
            pass

    async def _flush(self) -> None:
        from prompt_toolkit.application import in_terminal

        display = self.display
        if display is None or not display.outbox:
            return
        async with in_terminal():
            self._print(display.take_output())

    async def _pump(self) -> None:
        """Print the display's finished lines above the prompt, in batches."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._flush()
            await anyio.sleep(0.03)

    async def _ticker(self) -> None:
        """Redraw the spinner and elapsed time while a generation runs."""
        while True:
            await anyio.sleep(0.1)
            if self.prompt is not None and self.display is not None and self.display.active:
                self.prompt.app.invalidate()

    async def _watch_signals(self) -> None:
        """SIGINT (outside the prompt's raw mode) as Ctrl-C; SIGTERM and SIGHUP quit cleanly."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGINT:
                    self.interrupt(None)
                else:
                    self.request_quit()

    # -- keys ------------------------------------------------------------------------------
    def interrupt(self, buffer: Buffer | None) -> str:
        """Ctrl-C: cancel the generation; else pause a run; else clear; twice quits."""
        session = self.session
        display = self.display
        if session is None or display is None:  # still booting
            if buffer is not None and buffer.text:
                buffer.reset()
                return "cleared"
            self.request_quit()
            return "quit"
        if session.generator.busy:
            session.cancel_generation()  # the session pauses itself (reason cancelled)
            self._armed = False
            return "cancelled"
        if self.jobs:
            session.pause("interrupted")
            display.note("pausing after the current turn")
            self._armed = False
            return "pausing"
        if buffer is not None and buffer.text:
            buffer.reset()
            self._armed = False
            return "cleared"
        if self._armed:
            self.request_quit()
            return "quit"
        self._armed = True
        display.note("(press Ctrl-C again to quit; the session is kept · Ctrl-D quits too)")
        return "armed"

    def request_quit(self) -> None:
        self._quit = True
        app = self.prompt.app if self.prompt is not None else None
        if app is not None and app.is_running and not app.is_done:
            app.exit(exception=EOFError())

    def _key_bindings(self) -> KeyBindings:
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

        kb = KeyBindings()

        @kb.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            self.interrupt(event.current_buffer)

        @kb.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            state = buf.complete_state
            if state is not None and state.current_completion is not None:
                buf.apply_completion(state.current_completion)
                return
            if buf.document.is_cursor_at_the_end and buf.text.endswith("\\"):
                buf.delete_before_cursor(1)
                buf.insert_text("\n")
                return
            buf.validate_and_handle()

        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        return kb

    # -- the prompt --------------------------------------------------------------------------
    def _make_prompt(self) -> PromptSession[str]:
        from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from prompt_toolkit.shortcuts import PromptSession
        from prompt_toolkit.styles import Style

        history: History
        try:
            self._history_file.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(self._history_file))
        except OSError:
            history = InMemoryHistory()

        def continuation(width: int, line_number: int, wrap_count: int) -> StyleAndTextTuples:
            return [("class:continuation", "… ".rjust(width))]

        def world() -> World:
            if self.session is not None:
                return self.session.world
            assert self._world is not None
            return self._world

        style = Style.from_dict(_STYLE if self.color else _STYLE_PLAIN)
        return PromptSession(
            message=self._message,
            multiline=True,
            completer=ReplCompleter(world, lambda: self.session).for_prompt(),
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(),
            history=history,
            bottom_toolbar=self._toolbar,
            placeholder=self._placeholder,
            prompt_continuation=continuation,
            key_bindings=self._key_bindings(),
            style=style,
            include_default_pygments_style=False,
            reserve_space_for_menu=6,
            input=self._input,
            output=self._output,
        )

    def _message(self) -> StyleAndTextTuples:
        from prompt_toolkit.application import get_app_or_none
        from prompt_toolkit.formatted_text import ANSI, to_formatted_text

        app = get_app_or_none()
        prompt: StyleAndTextTuples = [("class:prompt", "› ")]
        if self.display is None or (app is not None and app.is_done):
            return prompt
        lines = self.display.live_lines()
        if not lines:
            return prompt
        return to_formatted_text(ANSI("\n".join(lines) + "\n")) + prompt

    def _placeholder(self) -> StyleAndTextTuples:
        from prompt_toolkit.application import get_app_or_none

        session = self.session
        app = get_app_or_none()
        if app is not None and app.is_done:
            return []  # not left behind in the scrollback
        world = session.world if session is not None else self._world
        if self.step_mode and world is not None and (world.flow or world.mode):
            return [("class:placeholder", "Enter runs the next turn · a message · /help")]
        return [("class:placeholder", "message the agents · @ for one · / for commands")]

    def _toolbar(self) -> StyleAndTextTuples:
        session = self.session
        display = self.display
        if session is None or display is None:
            name = self._world.name if self._world is not None else "rolecall"
            return [("class:bottom-toolbar.key", f" {name}"), ("", " │ starting…")]
        st = session.state
        if display.active and session.generator.busy:
            status = "generating"
        elif self.jobs:
            status = "running"
        elif st.state in ("created", "running"):
            status = "ready"  # nothing runs: waiting for you
        else:
            status = st.state
        if st.state == "paused" and st.pause_reason and not self.jobs:
            status += f" ({st.pause_reason})"
        if session.finished:
            status = f"finished ({st.stop_reason})"
        sep = ("class:bottom-toolbar.hint", " │ ")
        parts: StyleAndTextTuples = [
            ("class:bottom-toolbar.key", f" {session.world.name}"),
            sep,
            ("", session.session_id),
            sep,
            ("class:bottom-toolbar.state", status),
        ]
        engine = session.engine
        if engine is not None:
            pointer = st.pointer
            step = pointer.current or ("—" if pointer.started else engine.start)
            if session.finished:
                step = "—"
            counters = " ".join(f"{sid}×{n}" for sid, n in pointer.exec_counts.items() if n)
            parts += [sep, ("", f"step {step}")]
            if counters:
                parts.append(("class:bottom-toolbar.hint", "  " + _shorten(counters, 48)))
        elif session.director is not None:
            parts += [sep, ("", f"{session.world.mode} · turn {st.pointer.execution_order}")]
        t = st.transcript
        parts += [sep, ("", tokens(t.input_tokens, t.output_tokens + display.live_out_tokens()))]
        if self._armed:
            hint = "Ctrl-C again to quit"
        elif self.step_mode and engine is not None and not session.finished:
            hint = "Enter: next turn · /help"
        else:
            hint = "/help"
        parts += [sep, ("class:bottom-toolbar.hint", hint + " ")]
        return parts


# ------------------------------------------------------------------------------ entry points


async def run_repl(args: argparse.Namespace, session: Session, store: SqliteStore) -> None:
    """The REPL over ``session`` until the human quits (``cmd_chat`` on a terminal).

    ``session`` must have been opened without the plain terminal display (see
    :func:`open_live_session`); ``/load`` opens further sessions by itself.
    """
    await Repl(args, store).run(session)


def _run(main: Callable[[], Awaitable[None]]) -> None:
    """``anyio.run(main)``, raising a lone error as itself rather than in a group.

    Task groups wrap what fails inside them; a storage error or a lost terminal is one
    error for the user (``dispatch`` maps rolecall errors to exit codes and messages).
    """
    try:
        anyio.run(main)
    except BaseExceptionGroup as group:
        error: BaseException = group
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        if error is group:
            raise
        raise error from None


def cmd_repl(args: argparse.Namespace) -> int:
    """``rolecall chat WORLD`` on a terminal: open the store and the session, run the REPL."""
    from rolecall.cli.commands import _load, outcome

    world, source = _load(args)
    holder: list[Session] = []

    async def main() -> None:
        repl = Repl(args, None)
        async with repl.booting(world):  # the prompt is up before the runtime is imported
            from rolecall.cli.wiring import open_store

            async with (
                open_store(args) as store,
                open_live_session(args, world, store, world_source=source) as session,
            ):
                repl.store = store
                holder.append(await repl.run(session))

    _run(main)
    return outcome(holder[0])


async def resume_repl(
    args: argparse.Namespace, store: SqliteStore, doc: SessionDocument
) -> Session:
    """The REPL over a stored session (``cmd_resume`` on a terminal); the last session."""
    from rolecall.cli.commands import apply_overrides

    world = apply_overrides(doc.world_model(), args)
    async with open_live_session(args, world, store, doc=doc) as session:
        return await Repl(args, store).run(session)


def cmd_resume_repl(args: argparse.Namespace) -> int:
    """``rolecall resume SESSION`` on a terminal: the REPL over a stored session or file."""
    from rolecall.cli.commands import outcome
    from rolecall.cli.wiring import open_store
    from rolecall.session.document import read_session_file

    holder: list[Session] = []

    async def main() -> None:
        async with open_store(args) as store:
            target = Path(args.session)
            if target.suffix == ".json" or await anyio.Path(target).is_file():
                doc = await anyio.to_thread.run_sync(read_session_file, target)
            else:
                doc = await store.load(args.session)
            holder.append(await resume_repl(args, store, doc))

    _run(main)
    return outcome(holder[0])


def _main(argv: list[str] | None = None) -> int:
    """``python -m rolecall.cli.repl WORLD [options]`` (or ``resume SESSION [options]``):
    the REPL without ``cmd_chat``/``cmd_resume``."""
    from rolecall.cli import logs
    from rolecall.cli.main import build_parser
    from rolecall.errors import RolecallError, RuntimeFailure, UsageError, WorldError

    words = list(sys.argv[1:] if argv is None else argv)
    resume = bool(words) and words[0] == "resume"
    args = build_parser().parse_args(words if resume else ["chat", *words])
    verbosity = -1 if args.quiet else args.verbose
    logs.configure(verbosity, args.log_file)
    try:
        return cmd_resume_repl(args) if resume else cmd_repl(args)
    except WorldError as exc:
        print(str(exc), file=sys.stderr)
        for warning in exc.warnings:
            print(f"  warning: {warning}", file=sys.stderr)
        return 2
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return 2
    except (RuntimeFailure, RolecallError) as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(_main())
