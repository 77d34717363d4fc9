"""The REPL's ``/command`` table: :func:`parse_command` and :func:`help_lines`."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.storage.document import SessionDocument


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
    rest: bool = False  # the words after the first argument are one argument, as typed


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec(
        "help",
        "/help [COMMAND]",
        "list the commands and keys, or explain one",
        0,
        1,
        aliases=("commands",),  # what people type for the list (it once suggested /load)
    ),
    CommandSpec("agents", "/agents", "the agents of this world: model, turns, memory"),
    CommandSpec("roles", "/roles", "the role library (templates for world files)"),
    CommandSpec("flow", "/flow", "the flow's steps, the current step and loop counters"),
    CommandSpec("run", "/run", "run the flow in the background (the prompt stays usable)"),
    CommandSpec("next", "/next", "run one turn (step mode; Enter on an empty line in --mode step)"),
    CommandSpec("pause", "/pause", "pause after the current turn"),
    CommandSpec("resume", "/resume", "continue a paused session in the background"),
    CommandSpec("skip", "/skip", "drop the replies still due (the one streaming finishes)"),
    CommandSpec(
        "stream",
        "/stream [preview|full]",
        "replies while streaming: one-line preview or full",
        0,
        1,
    ),
    CommandSpec("stop", "/stop", "finish the session (reason manual)"),
    CommandSpec("flag", "/flag NAME", "set flag NAME (for {flag: NAME} conditions)", 1, 1),
    CommandSpec(
        "whisper",
        "/whisper @A [@B ...] TEXT",
        "a message only those agents (and you) see; their replies stay private",
        1,
        2,
        rest=True,
    ),
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
        "fork", "/fork mK [TEXT]", "fork after mK (TEXT replaces it), switch to it", 1, 2, rest=True
    ),
    CommandSpec("retry", "/retry", "ask the last speaker again; both answers kept as branches"),
    CommandSpec("branch", "/branch [N|ID]", "list the branches at this point, or switch", 0, 1),
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
class SlashCommand:
    name: str
    args: tuple[str, ...] = ()
    options: dict[str, str] = field(default_factory=dict)

    @property
    def spec(self) -> CommandSpec:
        return _SPECS[self.name]


@dataclass(frozen=True)
class LoadRequest:
    """What ``/load`` (``/fork``, ``/retry``, ``/branch``) asks of the REPL: switch to the
    session of ``doc``, then run ``after`` there (``/retry``: the turn asked again)."""

    doc: SessionDocument
    source: str
    after: Callable[[Session], Awaitable[object]] | None = None


def _closest(name: str, choices: Iterable[str]) -> str:
    # 0.6, as the command line's did-you-mean: 0.5 offered /load for /commands
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean /{close[0]}?)" if close else ""


def parse_command(line: str) -> SlashCommand:
    """``/name args...`` → a :class:`SlashCommand`; :class:`CommandError` for a bad line."""
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
    if spec.rest and rest.strip():  # e.g. /fork m4 Let's talk about it: the text as typed
        first, _, more = rest.strip().partition(" ")
        rest = shlex.quote(first) + (" " + shlex.quote(more.strip()) if more.strip() else "")
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
    return SlashCommand(name, tuple(args), options)


def parse_whisper(text: str) -> tuple[list[str], str]:
    """``@a @b the text`` (what follows ``/whisper``) → ``(["a", "b"], "the text")``
    (audiences.md); :class:`CommandError` when it names nobody or says nothing."""
    usage = "(usage: /whisper @A [@B ...] TEXT)"
    words = text.split()
    names: list[str] = []
    while words and words[0].startswith("@"):
        name = words.pop(0)[1:].rstrip(",:;")
        if not name:
            raise CommandError(f"/whisper: a name follows @ {usage}")
        if name in ("all", "human"):
            raise CommandError(f"/whisper: @{name} is not an agent; name the agents {usage}")
        names.append(name)
    if not names:
        raise CommandError(f"/whisper: name who hears it first, as @agent {usage}")
    said = text.strip()
    for _ in names:  # the text as typed, after the names
        said = said.split(None, 1)[1] if len(said.split(None, 1)) > 1 else ""
    if not said.strip():
        raise CommandError(f"/whisper: nothing to say after the names {usage}")
    return names, said.strip()


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
