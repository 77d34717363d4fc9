"""Presets over the same engine (modes.md); the registry is :mod:`rolecall.modes.registry`."""

from rolecall.modes.registry import (
    ModeSpec,
    condition_words,
    expand,
    install,
    known_modes,
    register,
    register_installer,
)

__all__ = [
    "ModeSpec",
    "condition_words",
    "expand",
    "install",
    "known_modes",
    "register",
    "register_installer",
]
