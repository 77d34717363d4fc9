"""Standard output's failures, noted where the command's exit code is decided.

Kept apart from :mod:`rolecall.cli.display` (which imports the bus and the event
models) so that every command's dispatcher can use it without importing a display.
"""

from __future__ import annotations

import os
import sys

_STDOUT_ERRORS: list[OSError] = []


def stdout_failed(exc: OSError | None = None) -> OSError | None:
    """Note that writing to stdout failed (not EPIPE); the first such error, if any.

    Standard output is then pointed at /dev/null, so nothing more fails on it.
    """
    if exc is not None:
        if not _STDOUT_ERRORS:
            _STDOUT_ERRORS.append(exc)
        silence_stdout()
    return _STDOUT_ERRORS[0] if _STDOUT_ERRORS else None


def silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass
