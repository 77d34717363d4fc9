"""The mode registry (modes.md), install time: what a mode attaches to a session.

Loading a world needs only :mod:`rolecall.mode_registry` (a mode's name, options,
stop-condition words and ``expand``). Once a session is built, :func:`install` attaches
its world's mode (conditions, hooks or a director, through :class:`rolecall.plans.DriverSite`)
and every general installer (judge roles in any world). A mode's module registers both
halves with one call, :func:`register_mode`.
"""

from __future__ import annotations

from collections.abc import Callable

from rolecall.mode_registry import ModeSpec, forget, load, register, spec
from rolecall.plans import DriverSite

Install = Callable[[DriverSite], None]
"""Attaches a mode to a session, as drivers see it."""

GENERAL: tuple[str, ...] = ("judge",)
"""The modules under ``rolecall.modes`` whose installers attach to every session (judge
roles in any world)."""

_BY_MODE: dict[str, Install] = {}
_GENERAL: list[Install] = []  # run for every session (e.g. judge roles in any world)


def register_mode(mode: ModeSpec, install: Install | None = None) -> None:
    """Register a mode: its load-time spec and, when it has one, its installer."""
    register(mode)
    if install is None:
        _BY_MODE.pop(mode.name, None)
    else:
        _BY_MODE[mode.name] = install


def unregister_mode(name: str) -> None:
    """Forget a registered mode (both halves)."""
    forget(name)
    _BY_MODE.pop(name, None)


def register_installer(install: Install) -> None:
    """Run ``install`` on every session, whatever its world's mode."""
    if install not in _GENERAL:
        _GENERAL.append(install)


def install(session: DriverSite) -> None:
    """Attach the world's mode (and every general installer) to a session."""
    name = session.world.mode
    if name is not None and spec(name) is not None:  # a built-in's module registers it
        found = _BY_MODE.get(name)
        if found is not None:
            found(session)
    for module in GENERAL:
        load(module)
    for installer in _GENERAL:
        installer(session)
