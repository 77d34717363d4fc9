"""Signals while the REPL serves a session (repl.md, Keys).

In the prompt's raw mode Ctrl-C is a key (:mod:`.keys`); a SIGINT from elsewhere (``kill
-INT``, or the terminal outside raw mode) does what Ctrl-C does. SIGTERM and SIGHUP quit
as Ctrl-D does: the session is kept, paused. A resized terminal (SIGWINCH) is
prompt-toolkit's own: it redraws the prompt and the toolbar at the new width, which the
REPL reads on every redraw.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import anyio


async def watch_signals(*, interrupt: Callable[[], object], quit: Callable[[], None]) -> None:
    """Until cancelled: SIGINT calls ``interrupt``; SIGTERM and SIGHUP call ``quit``."""
    with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            if signum == signal.SIGINT:
                interrupt()
            else:
                quit()
