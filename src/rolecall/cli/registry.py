"""The commands of ``rolecall``: one line each, in the order ``rolecall --help`` lists them.

A line names the command, the function adding its parser (called when the parser is
built) and its handler (imported only when the command runs, so ``rolecall --help``
loads no command's dependencies). Both are ``module:function``. A handler takes the
parsed arguments and returns the exit code; :func:`rolecall.cli.commands.dispatch`
turns its errors into messages and exit codes. Adding a command is a module with those
two functions plus one line here.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[argparse.ArgumentParser]

Handler = Callable[[argparse.Namespace], int]


@dataclass(frozen=True, slots=True)
class Command:
    name: str
    parser: str  # module:function(sub) adding the command's parser
    handler: str  # module:function(args) -> exit code


COMMANDS: tuple[Command, ...] = (
    Command("run", "rolecall.cli.run_cmd:add_run", "rolecall.cli.commands:cmd_run"),
    Command("chat", "rolecall.cli.run_cmd:add_chat", "rolecall.cli.commands:cmd_chat"),
    Command("resume", "rolecall.cli.run_cmd:add_resume", "rolecall.cli.commands:cmd_resume"),
    Command(
        "sessions",
        "rolecall.cli.manage.sessions:add_parser",
        "rolecall.cli.manage.sessions:cmd_sessions",
    ),
    Command("roles", "rolecall.cli.manage.roles:add_parser", "rolecall.cli.manage.roles:cmd_roles"),
    Command(
        "memory", "rolecall.cli.manage.memory:add_parser", "rolecall.cli.manage.memory:cmd_memory"
    ),
    Command("debate", "rolecall.cli.modes_cmd:add_debate", "rolecall.cli.modes_cmd:run_debate"),
    Command(
        "consensus", "rolecall.cli.modes_cmd:add_consensus", "rolecall.cli.modes_cmd:run_consensus"
    ),
    Command("study", "rolecall.cli.study_cmd:add_parser", "rolecall.cli.study_cmd:run_study"),
    Command("batch", "rolecall.cli.batch_cmd:add_parser", "rolecall.cli.batch_cmd:cmd_batch"),
    Command("watch", "rolecall.cli.nats_cmd:add_watch_parser", "rolecall.cli.nats_cmd:cmd_watch"),
    Command(
        "worker", "rolecall.cli.nats_cmd:add_worker_parser", "rolecall.cli.nats_cmd:cmd_worker"
    ),
    Command("agent", "rolecall.cli.agent_cmd:add_parser", "rolecall.cli.agent_cmd:cmd_agent"),
    Command(
        "models", "rolecall.cli.ecosystem_cmd:add_parser", "rolecall.cli.ecosystem_cmd:cmd_models"
    ),
    Command("web", "rolecall.cli.web_cmd:add_parser", "rolecall.cli.web_cmd:cmd_web"),
    Command("worlds", "rolecall.cli.worlds_cmd:add_parser", "rolecall.cli.worlds_cmd:cmd_worlds"),
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


def handler(target: str) -> Handler:
    """The handler named ``module:function``, imported now."""
    return cast(Handler, _resolve(target))
