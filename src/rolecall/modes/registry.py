"""The mode registry (modes.md): one :class:`ModeSpec` per mode.

A mode expands the raw world mapping before validation (``expand``: fills roles, flow
and settings from its options block, reporting problems with their paths), declares
its options model and the stop conditions it answers (``concession``, ...), and
installs its conditions, hooks or director on a new or restored session
(``install``). Nothing about a mode bypasses the scheduler, the bus or persistence.

This module is low in the layers (the world and the flow conditions consult it); a
built-in mode's module is imported when that mode is first used (its name is known
without it, from :data:`BUILTIN`), so a world without a mode imports none of them. A new
mode is one module that calls :func:`register` plus one name in :data:`BUILTIN`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

if TYPE_CHECKING:
    from rolecall.world.library import RoleLibrary

BUILTIN: tuple[str, ...] = ("debate", "consensus", "study")
"""The built-in modes, each registered by the module of its name under ``rolecall.modes``."""
GENERAL: tuple[str, ...] = ("judge",)
"""The modules under ``rolecall.modes`` whose installers attach to every session (judge
roles in any world)."""

Expand = Callable[[dict[str, Any], "RoleLibrary", list[str]], dict[str, Any]]
Install = Callable[[Any], None]
"""Attaches a mode to a session (``rolecall.runtime.Session``; typed loosely so that
this registry stays below the runtime)."""


@dataclass(frozen=True)
class ModeSpec:
    name: str
    expand: Expand
    install: Install | None = None
    options: type[BaseModel] | None = None  # the world's ``<name>:`` block
    conditions: dict[str, str] = field(default_factory=dict)  # word -> what it means


_MODES: dict[str, ModeSpec] = {}
_INSTALLERS: list[Install] = []  # run for every session (e.g. judge roles in any world)


def register(spec: ModeSpec) -> None:
    _MODES[spec.name] = spec


def register_installer(install: Install) -> None:
    if install not in _INSTALLERS:
        _INSTALLERS.append(install)


def _load(module: str) -> None:
    """Import ``rolecall.modes.<module>``, which registers what it brings (once)."""
    importlib.import_module(f"rolecall.modes.{module}")


def known_modes() -> list[str]:
    return sorted({*BUILTIN, *_MODES})


def spec(name: str) -> ModeSpec | None:
    if name in BUILTIN and name not in _MODES:
        _load(name)
    return _MODES.get(name)


def condition_words() -> list[str]:
    """Every mode condition's word (``concession``, ...): built-in modes first, in order."""
    for name in BUILTIN:
        spec(name)
    names = [m for m in BUILTIN if m in _MODES] + [m for m in _MODES if m not in BUILTIN]
    words: dict[str, None] = {}
    for name in names:
        words.update(dict.fromkeys(_MODES[name].conditions))
    return list(words)


def expand(raw: dict[str, Any], library: RoleLibrary, problems: list[str]) -> dict[str, Any]:
    """The world mapping with the mode's roles and flow filled in."""
    name = raw.get("mode")
    if name is None:
        return raw
    found = spec(name) if isinstance(name, str) else None
    if found is None:
        problems.append(f"mode: no mode {name!r} (modes: {', '.join(known_modes()) or 'none'})")
        return raw
    return found.expand(raw, library, problems)


def install(session: Any) -> None:
    """Attach the world's mode (and every general installer) to a session."""
    name = session.world.mode
    found = spec(name) if name is not None else None
    if found is not None and found.install is not None:
        found.install(session)
    for module in GENERAL:
        _load(module)
    for installer in _INSTALLERS:
        installer(session)
