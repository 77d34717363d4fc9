"""Session ids: the creation time (UTC) and six random hex digits, ``20260101-120000-a1b2c3``.

Made here, below the runtime, so that what names runs before opening them (a batch's
jobs, its default name) needs no live session to do it.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime

from rolecall.bus import utc_now


def new_session_id(clock: Callable[[], datetime] = utc_now) -> str:
    """A new session id: ``YYYYMMDD-HHMMSS-`` of ``clock()`` and six random hex digits."""
    return clock().strftime("%Y%m%d-%H%M%S-") + secrets.token_hex(3)
