"""Presets over the same engine (modes.md): a registry of modes.

A mode expands the raw world mapping before validation (``expand``: fills roles,
flow and settings from its options block, reporting problems with their paths) and
installs its own conditions, hooks or director on a new or restored session
(``install``). Nothing about a mode bypasses the scheduler, the bus or persistence.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.world.library import RoleLibrary

Expand = Callable[[dict[str, Any], "RoleLibrary", list[str]], dict[str, Any]]
Install = Callable[["Session"], None]


@dataclass(frozen=True)
class ModeSpec:
    name: str
    expand: Expand
    install: Install | None = None


_MODES: dict[str, ModeSpec] = {}
_INSTALLERS: list[Install] = []  # run for every session (e.g. judge roles in any world)


def register(spec: ModeSpec) -> None:
    _MODES[spec.name] = spec


def register_installer(install: Install) -> None:
    if install not in _INSTALLERS:
        _INSTALLERS.append(install)


def _load_builtin() -> None:
    """Import the built-in modes so they register themselves (lazily, once)."""
    import importlib

    for module in ("debate", "consensus", "judge", "study"):
        try:
            importlib.import_module(f"rolecall.modes.{module}")
        except ModuleNotFoundError as exc:
            if exc.name != f"rolecall.modes.{module}":
                raise


def known_modes() -> list[str]:
    _load_builtin()
    return sorted(_MODES)


def expand(raw: dict[str, Any], library: RoleLibrary, problems: list[str]) -> dict[str, Any]:
    """The world mapping with the mode's roles and flow filled in."""
    name = raw.get("mode")
    if name is None:
        return raw
    _load_builtin()
    spec = _MODES.get(name) if isinstance(name, str) else None
    if spec is None:
        problems.append(f"mode: no mode {name!r} (modes: {', '.join(sorted(_MODES)) or 'none'})")
        return raw
    return spec.expand(raw, library, problems)


def install(session: Session) -> None:
    """Attach the world's mode (and every general installer) to a session."""
    _load_builtin()
    mode = session.world.mode
    if mode is not None and mode in _MODES:
        spec = _MODES[mode]
        if spec.install is not None:
            spec.install(session)
    for installer in _INSTALLERS:
        installer(session)
