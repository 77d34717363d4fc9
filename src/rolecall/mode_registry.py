"""The mode registry (modes.md), load time: one :class:`ModeSpec` per mode.

A mode expands the raw world mapping before validation (``expand``: fills roles, flow
and settings from its options block, reporting problems with their paths), and declares
its options model and the stop conditions it answers (``concession``, ...). That is all
loading a world needs, so this module is low in the layers (the world and the flow
conditions consult it) and imports nothing of rolecall's, not even through importlib.
Attaching a mode to a session (its conditions, hooks or director) is install time:
:mod:`rolecall.modes.install`. Nothing about a mode bypasses the scheduler, the bus or
persistence.

The built-in modes' names and stop-condition words are data here (:data:`BUILTIN`,
:data:`BUILTIN_CONDITIONS`; a test checks them against each mode's spec), so validating a
flow's ``stop_when: concession`` imports no mode. A built-in mode's module is imported
when that mode is first used, by the loader the package root installs
(:func:`set_loader`, called in ``rolecall/__init__.py``, which sits above every layer), so
a world without a mode imports none of them. A new built-in mode is one module that calls
:func:`rolecall.modes.install.register_mode` plus its entry in
:data:`BUILTIN_CONDITIONS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pydantic import BaseModel

BUILTIN_CONDITIONS: dict[str, tuple[str, ...]] = {
    "debate": ("concession", "stalemate"),
    "consensus": ("consensus", "stalemate"),
    "study": (),
}
"""Each built-in mode's stop-condition words, in the order its spec declares them."""

BUILTIN: tuple[str, ...] = tuple(BUILTIN_CONDITIONS)
"""The built-in modes, each registered by the module of its name under ``rolecall.modes``."""


class Roles(Protocol):
    """The role templates an ``expand`` may take roles from
    (``rolecall.world.library.RoleLibrary``)."""

    def get(self, role_id: str) -> dict[str, Any]:
        """The template's fields (a fresh dict); ``UnknownRoleError`` for no such role."""
        ...


Expand = Callable[[dict[str, Any], Roles, list[str]], dict[str, Any]]


@dataclass(frozen=True)
class ModeSpec:
    name: str
    expand: Expand
    options: type[BaseModel] | None = None  # the world's ``<name>:`` block
    conditions: dict[str, str] = field(default_factory=dict)  # word -> what it means


_MODES: dict[str, ModeSpec] = {}


def register(spec: ModeSpec) -> None:
    _MODES[spec.name] = spec


def forget(name: str) -> None:
    """Unregister a mode (an application's or a test's; a built-in loads again on use)."""
    _MODES.pop(name, None)


_loader: Callable[[str], None] | None = None


def set_loader(loader: Callable[[str], None]) -> None:
    """How :func:`load` brings a module of ``rolecall.modes`` in: given from above (the
    package root), so this bottom-layer module names no module above it."""
    global _loader
    _loader = loader


def load(module: str) -> None:
    """Bring in ``rolecall.modes.<module>``, which registers what it brings (once)."""
    if _loader is None:
        raise RuntimeError("no mode loader installed (rolecall/__init__.py installs it)")
    _loader(module)


def known_modes() -> list[str]:
    return sorted({*BUILTIN, *_MODES})


def spec(name: str) -> ModeSpec | None:
    if name in BUILTIN and name not in _MODES:
        load(name)
    return _MODES.get(name)


def condition_words() -> list[str]:
    """Every mode condition's word (``concession``, ...): built-in modes first, in order,
    then those of modes registered since. Imports no mode."""
    words: dict[str, None] = {}
    for found in BUILTIN_CONDITIONS.values():
        words.update(dict.fromkeys(found))
    for name, registered in _MODES.items():
        if name not in BUILTIN:
            words.update(dict.fromkeys(registered.conditions))
    return list(words)


def expand(raw: dict[str, Any], library: Roles, problems: list[str]) -> dict[str, Any]:
    """The world mapping with the mode's roles and flow filled in."""
    name = raw.get("mode")
    if name is None:
        return raw
    found = spec(name) if isinstance(name, str) else None
    if found is None:
        problems.append(f"mode: no mode {name!r} (modes: {', '.join(known_modes()) or 'none'})")
        return raw
    return found.expand(raw, library, problems)
