"""Built-in tools (tools.md): rolecall's own tools, registered by the packages that
provide them (``knowledge.search``, knowledge.md), so that the tools layer needs none
of them.

A provider registers a :class:`BuiltinTool` under its full name; a role lists the name
in its ``tools:`` as any other. ``available(world)`` says whether a world can offer it
(a knowledge base declared, for instance); ``call(world, arguments)`` returns its text
or raises :class:`ToolFailed` with a one-line reason.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from rolecall.world.models import World


class ToolFailed(Exception):
    """A tool could not do what it was asked; the message is the model's one-line reason."""


@dataclass(frozen=True)
class BuiltinTool:
    name: str  # its full name, e.g. "knowledge.search"
    description: str
    parameters: dict[str, Any]  # JSON Schema of its arguments
    call: Callable[[World, dict[str, Any]], Awaitable[str]]
    available: Callable[[World], bool] = lambda world: True


_REGISTRY: dict[str, BuiltinTool] = {}


def register(tool: BuiltinTool) -> None:
    """Offer ``tool`` to every world (a later registration of the name replaces it)."""
    _REGISTRY[tool.name] = tool


def unregister(name: str) -> None:
    _REGISTRY.pop(name, None)


def builtins() -> dict[str, BuiltinTool]:
    """The built-in tools registered in this process, by full name."""
    return dict(_REGISTRY)
