"""The management commands: ``rolecall sessions``, ``rolecall roles`` and ``rolecall memory``.

Each is a command of :mod:`rolecall.cli.registry` like any other: its module adds its
parser (:func:`rolecall.cli.registry.add_command`) and holds its handler, which takes the
parsed arguments and returns the exit code, raising :class:`~rolecall.errors.UsageError`
(exit 2) or :class:`~rolecall.errors.StorageError` (exit 1) like every other command.

Their modules import little at module level (``rolecall --help`` imports none of them);
each handler imports what it needs. Every id that ends up in a path (session,
agent, role, template) is checked with :func:`rolecall.paths.safe_id` before any file is
opened or created, and a data directory is never created by a command that only reads.
"""

from __future__ import annotations

from rolecall.cli.manage.memory import cmd_memory
from rolecall.cli.manage.roles import cmd_roles, role_library
from rolecall.cli.manage.sessions import cmd_sessions

__all__ = [
    "cmd_memory",
    "cmd_roles",
    "cmd_sessions",
    "role_library",
]
