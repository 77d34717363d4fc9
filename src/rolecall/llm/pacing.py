"""``ROLECALL_STREAM_DELAY``: seconds between the streamed words of the built-in models."""

from __future__ import annotations

import math
import os

from rolecall.errors import UsageError


def env_stream_delay() -> float | None:
    """The delay ``ROLECALL_STREAM_DELAY`` asks for; None when unset or empty.

    A usage error for anything but a finite number of seconds, 0 or more.
    """
    raw = os.environ.get("ROLECALL_STREAM_DELAY")
    if not raw:
        return None
    try:
        delay = float(raw)
    except ValueError:
        delay = math.nan
    if not 0.0 <= delay < math.inf:
        raise UsageError(
            f"ROLECALL_STREAM_DELAY must be a number of seconds, 0 or more, got {raw!r}"
        )
    return delay
