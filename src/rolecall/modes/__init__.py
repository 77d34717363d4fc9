"""Presets over the same engine (modes.md): the drivers of the built-in modes.

The registry has two halves: load time (:mod:`rolecall.mode_registry`: names, options,
stop-condition words, ``expand``; low in the layers, consulted by the world and the flow
conditions) and install time (:mod:`rolecall.modes.install`: attaching a mode to a
session).
"""

from rolecall.mode_registry import ModeSpec, condition_words, expand, known_modes
from rolecall.modes.install import (
    install,
    register_installer,
    register_mode,
    unregister_mode,
)

__all__ = [
    "ModeSpec",
    "condition_words",
    "expand",
    "install",
    "known_modes",
    "register_installer",
    "register_mode",
    "unregister_mode",
]
