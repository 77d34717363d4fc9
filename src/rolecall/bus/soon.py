"""Run a callback once the event loop has finished what it is doing, on either backend.

anyio has no ``call_soon``; the bus (a burst of streamed chunks shares one clock read)
and the terminal sink (one flush per burst of events) need one. asyncio's loop and
trio's run loop both have it: ``loop.call_soon`` and ``TrioToken.run_sync_soon``.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable


def call_soon(callback: Callable[[], object]) -> bool:
    """Schedule ``callback`` on the running event loop; False when none is running."""
    try:
        asyncio.get_running_loop().call_soon(callback)
        return True
    except RuntimeError:  # not in asyncio: trio, if it is the one running
        pass
    trio = sys.modules.get("trio")  # imported by whoever runs trio; never by us
    if trio is None:
        return False
    try:
        trio.lowlevel.current_trio_token().run_sync_soon(callback)
    except RuntimeError:  # no trio run loop in this thread either
        return False
    return True
