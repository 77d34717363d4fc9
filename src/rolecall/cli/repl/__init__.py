"""The interactive REPL of ``rolecall chat WORLD`` on a terminal (repl.md).

Three layers, the first two headless and testable without a terminal:

- :func:`parse_command` turns a ``/command`` line into a :class:`SlashCommand` (or a one-line
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

Modules: :mod:`.commands` (the ``/command`` table and parser), :mod:`.display`
(output, in the colours of :mod:`rolecall.cli.palette`), :mod:`.runner` (carrying
commands out; those that only show something in :mod:`.views`, the branches' in
:mod:`.branching`), :mod:`.completion`, :mod:`.live` (session wiring), :mod:`.app`
(:class:`Repl`, composing the front end's parts: :mod:`.prompt`, :mod:`.toolbar`,
:mod:`.keys`, :mod:`.approvals`, :mod:`.signals`, :mod:`.background`, :mod:`.screen`,
:mod:`.typed`, :mod:`.banner`, :mod:`.leaving`) and :mod:`.entry` (the
``chat``/``resume`` entry points; ``python -m rolecall.cli.repl`` runs
``__main__.main``).

The names below are imported on first use: the piped mode's ``/commands``
(:mod:`.runner`) must not pay for prompt-toolkit, which only :mod:`.app` (and the
parts it composes) and :mod:`.completion` need (performance.md, `first_token`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolecall.cli.palette import Palette
    from rolecall.cli.repl.app import Repl
    from rolecall.cli.repl.commands import (
        COMMANDS,
        CommandError,
        CommandSpec,
        LoadRequest,
        SlashCommand,
        help_lines,
        parse_command,
    )
    from rolecall.cli.repl.completion import Candidate, ReplCompleter
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.cli.repl.entry import (
        chat_repl,
        cmd_repl,
        cmd_resume_repl,
        resume_repl,
        run_repl,
    )
    from rolecall.cli.repl.live import mark_quit, open_live_session
    from rolecall.cli.repl.runner import CommandRunner, LoopControl, run_command_line

# each public name -> the module of this package that defines it
_WHERE = {
    "Repl": "app",
    "COMMANDS": "commands",
    "SlashCommand": "commands",
    "CommandError": "commands",
    "CommandSpec": "commands",
    "LoadRequest": "commands",
    "help_lines": "commands",
    "parse_command": "commands",
    "Candidate": "completion",
    "ReplCompleter": "completion",
    "ReplDisplay": "display",
    "chat_repl": "entry",
    "cmd_repl": "entry",
    "cmd_resume_repl": "entry",
    "resume_repl": "entry",
    "run_repl": "entry",
    "mark_quit": "live",
    "open_live_session": "live",
    "Palette": "display",
    "CommandRunner": "runner",
    "LoopControl": "runner",
    "run_command_line": "runner",
}


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_WHERE])


__all__ = [
    "COMMANDS",
    "Candidate",
    "CommandError",
    "CommandRunner",
    "CommandSpec",
    "LoadRequest",
    "LoopControl",
    "Palette",
    "Repl",
    "ReplCompleter",
    "ReplDisplay",
    "SlashCommand",
    "chat_repl",
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
