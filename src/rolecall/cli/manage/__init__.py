"""The management commands: ``rolecall sessions``, ``rolecall roles`` and ``rolecall memory``.

Wiring: :func:`register` adds the three commands to the top-level subparsers and returns
their handlers by command name; each handler takes the parsed arguments and returns the
exit code, raising :class:`~rolecall.errors.UsageError` (exit 2) or
:class:`~rolecall.errors.StorageError` (exit 1) like every other command.

Only ``argparse`` and ``typing`` are imported at module level so ``rolecall --help``
stays fast; each handler imports what it needs. Every id that ends up in a path (session,
agent, role, template) is checked with :func:`rolecall.paths.safe_id` before any file is
opened or created, and a data directory is never created by a command that only reads.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rolecall.cli.manage import memory, roles, sessions
from rolecall.cli.manage.memory import cmd_memory
from rolecall.cli.manage.roles import cmd_roles, role_library
from rolecall.cli.manage.sessions import cmd_sessions

if TYPE_CHECKING:
    from collections.abc import Callable

    Handler = Callable[[argparse.Namespace], int]

__all__ = [
    "cmd_memory",
    "cmd_roles",
    "cmd_sessions",
    "register",
    "role_library",
]


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
) -> dict[str, Handler]:
    """Add ``sessions``, ``roles`` and ``memory`` to ``sub``; their handlers by command name."""
    sessions.add_parser(sub)
    roles.add_parser(sub)
    memory.add_parser(sub)
    return {"sessions": cmd_sessions, "roles": cmd_roles, "memory": cmd_memory}
