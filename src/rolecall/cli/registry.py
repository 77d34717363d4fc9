"""The commands of ``rolecall``: one line each, in the order ``rolecall --help`` lists them.

A line names the command, the one-line help ``rolecall --help`` lists it with, the
function adding its parser (called when the parser is built) and its handler (imported
only when the command runs). The functions are ``module:function``. A handler takes the
parsed arguments, turns them into its typed value (:mod:`rolecall.cli.options`) and
returns the exit code; :func:`rolecall.cli.commands.dispatch` turns its errors into
messages and exit codes. Adding a command is a module with those two functions plus one
line here; its parser is made by :func:`add_command` (as every action of a command with
actions is), which takes its help from here (:func:`summary`), so ``rolecall --help``
lists every command without importing one (:func:`list_commands`).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Subcommand:
    """One `rolecall NAME` command: where its parser and its handler are (imported on use)."""

    name: str
    summary: str  # its line in `rolecall --help` (the help= of its parser)
    parser: str  # module:function(sub) adding the command's parser
    handler: str  # module:function(args) -> exit code


COMMANDS: tuple[Subcommand, ...] = (
    Subcommand(
        "run",
        "run a world's flow to its stop, streaming every message",
        "rolecall.cli.run_cmd:add_run",
        "rolecall.cli.run_cmd:cmd_run",
    ),
    Subcommand(
        "chat",
        "talk to a world (REPL on a terminal, piped mode otherwise)",
        "rolecall.cli.run_cmd:add_chat",
        "rolecall.cli.run_cmd:cmd_chat",
    ),
    Subcommand(
        "resume",
        "continue a saved session (an id or a session file)",
        "rolecall.cli.run_cmd:add_resume",
        "rolecall.cli.run_cmd:cmd_resume",
    ),
    Subcommand(
        "sessions",
        "list, show, trace, export and delete stored sessions",
        "rolecall.cli.manage.sessions:add_parser",
        "rolecall.cli.manage.sessions:cmd_sessions",
    ),
    Subcommand(
        "compare",
        "compare stored runs: figures, scores, the first message where they differ",
        "rolecall.cli.compare_cmd:add_parser",
        "rolecall.cli.compare_cmd:cmd_compare",
    ),
    Subcommand(
        "score",
        "a judge scores stored sessions after the fact (kept beside each session)",
        "rolecall.cli.score_cmd:add_parser",
        "rolecall.cli.score_cmd:cmd_score",
    ),
    Subcommand(
        "roles",
        "the role library: built-in templates and your own roles",
        "rolecall.cli.manage.roles:add_parser",
        "rolecall.cli.manage.roles:cmd_roles",
    ),
    Subcommand(
        "knowledge",
        "index, search and list a world's knowledge collections",
        "rolecall.cli.knowledge_cmd:add_parser",
        "rolecall.cli.knowledge_cmd:cmd_knowledge",
    ),
    Subcommand(
        "memory",
        "show or clear an agent's passive memory in a session",
        "rolecall.cli.manage.memory:add_parser",
        "rolecall.cli.manage.memory:cmd_memory",
    ),
    Subcommand(
        "debate",
        "a PRO/CON debate on TOPIC, then a moderator's synthesis",
        "rolecall.cli.modes_cmd:add_debate",
        "rolecall.cli.modes_cmd:run_debate",
    ),
    Subcommand(
        "consensus",
        "three or more roles seek consensus on TOPIC, then a synthesizer sums up",
        "rolecall.cli.modes_cmd:add_consensus",
        "rolecall.cli.modes_cmd:run_consensus",
    ),
    Subcommand(
        "study",
        "study a document with five roles (explainer, challenger, ...)",
        "rolecall.cli.study_cmd:add_parser",
        "rolecall.cli.study_cmd:run_study",
    ),
    Subcommand(
        "batch",
        "run a world many times (a --vary cross product) and gather the results",
        "rolecall.cli.batch_cmd:add_parser",
        "rolecall.cli.batch_cmd:cmd_batch",
    ),
    Subcommand(
        "watch",
        "follow live events of sessions run on a NATS cluster",
        "rolecall.cli.nats_cmd:add_watch_parser",
        "rolecall.cli.nats_cmd:cmd_watch",
    ),
    Subcommand(
        "worker",
        "run batch runs submitted to a NATS cluster (batch --nats)",
        "rolecall.cli.nats_cmd:add_worker_parser",
        "rolecall.cli.nats_cmd:cmd_worker",
    ),
    Subcommand(
        "agent",
        "serve a role's generations to sessions on a NATS cluster (transport: nats)",
        "rolecall.cli.agent_cmd:add_parser",
        "rolecall.cli.agent_cmd:cmd_agent",
    ),
    Subcommand(
        "models",
        "list the model implementations: built-in, plugins, litellm",
        "rolecall.cli.ecosystem_cmd:add_parser",
        "rolecall.cli.ecosystem_cmd:cmd_models",
    ),
    Subcommand(
        "web",
        "serve the web view: stored sessions, live threads, flow pages",
        "rolecall.cli.web_cmd:add_parser",
        "rolecall.cli.web_cmd:cmd_web",
    ),
    Subcommand(
        "serve",
        "serve rolecall to MCP clients: run worlds and presets, talk, read sessions",
        "rolecall.cli.serve_cmd:add_parser",
        "rolecall.cli.serve_cmd:cmd_serve",
    ),
    Subcommand(
        "worlds",
        "list, validate, check and create world folders",
        "rolecall.cli.worlds_cmd:add_parser",
        "rolecall.cli.worlds_cmd:cmd_worlds",
    ),
    Subcommand(
        "tools",
        "the tools each role of a world may call (MCP servers, Python, built-in)",
        "rolecall.cli.tools_cmd:add_parser",
        "rolecall.cli.tools_cmd:cmd_tools",
    ),
)


def summary(name: str) -> str:
    """Subcommand ``name``'s one-line help, for its parser's ``help=``."""
    for command in COMMANDS:
        if command.name == name:
            return command.summary
    raise KeyError(name)


def add_command(
    sub: Sub,
    name: str,
    *,
    help: str | None = None,
    description: str | None = None,
    examples: Sequence[str] = (),
) -> argparse.ArgumentParser:
    """The parser of ``rolecall NAME`` (or of an action, ``rolecall sessions NAME``), added
    to ``sub``: the one way every parser of the command line is made.

    ``help`` is its line in its parent's listing (a command's: its :func:`summary`, the
    default); ``description`` what its ``--help`` opens with (the help as a sentence when
    not given); ``examples`` the command lines listed under ``examples:`` at its end
    (kept as written: a line may carry its own comment).
    """
    line = summary(name) if help is None else help
    return sub.add_parser(
        name,
        help=line,
        description=description or line[:1].upper() + line[1:] + ".",
        epilog="examples:\n" + "\n".join(f"  {e}" for e in examples) if examples else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _resolve(target: str) -> Any:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


def add_commands(sub: Sub, only: str | None = None) -> dict[str, str]:
    """Add every command's parser to ``sub``, or only that of the command named ``only``
    when there is one; each added command's handler by name."""
    chosen = [c for c in COMMANDS if c.name == only] or COMMANDS
    for command in chosen:
        _resolve(command.parser)(sub)
    return {command.name: command.handler for command in chosen}


def list_commands(sub: Sub) -> None:
    """Add every command to ``sub`` with its name and summary alone, no flags: what
    ``rolecall --help`` lists, and all a mistyped command's "did you mean" needs,
    without importing any command's module (about half of ``--help``'s time)."""
    for command in COMMANDS:
        sub.add_parser(command.name, help=command.summary)


def handler(target: str) -> Handler:
    """The handler named ``module:function``, imported now."""
    return cast(Handler, _resolve(target))
