"""A long-running command stopped by a signal: the first one cancels its task group.

``rolecall worker``, ``rolecall agent`` and ``rolecall watch`` run until Ctrl-C (or
SIGTERM); each takes the signal over through anyio (the event loop's own SIGINT handler
would raise KeyboardInterrupt wherever the loop happens to be, or be swallowed while a
connection is set up or torn down) and ends through its cancel scope, so everything it
opened is closed on the way out.
"""

from __future__ import annotations

import signal

import anyio
from anyio import CancelScope


class StopOnSignal:
    """Awaited in a task group (``tg.start_soon(stop)``): the first of ``signums``
    (SIGINT by default) cancels ``scope``; :attr:`heard` says whether one came."""

    def __init__(self, scope: CancelScope, *signums: signal.Signals) -> None:
        self.scope = scope
        self.signums = signums or (signal.SIGINT,)
        self.heard = False

    async def __call__(self) -> None:
        with anyio.open_signal_receiver(*self.signums) as signals:
            async for _ in signals:
                self.heard = True
                self.scope.cancel()
                return
