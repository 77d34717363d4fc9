"""uvicorn's HTTP/1.1 connection with a deadline for a request's headers.

uvicorn closes a keep-alive connection that stays idle after a response, but a
connection that never sends a request (or sends half of its headers, a byte at a
time) is kept forever, and enough of them hold the server's sockets. Here a
connection has :func:`rolecall.web.guard.request_timeout` seconds from its opening,
and again from the end of each response, to send a request's headers; the body's own
deadline is the guard's (:class:`rolecall.web.guard.RequestGuard`).
"""

from __future__ import annotations

import asyncio
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from rolecall.web.guard import request_timeout

__all__ = ["TimedH11Protocol"]


class TimedH11Protocol(H11Protocol):
    """:class:`H11Protocol` closing a connection whose headers do not come in time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout = request_timeout()
        self.header_timer: asyncio.TimerHandle | None = None

    def _between_requests(self) -> bool:
        return self.cycle is None or self.cycle.response_complete

    def _arm(self) -> None:
        self._disarm()
        self.header_timer = self.loop.call_later(self.header_timeout, self._headers_late)

    def _disarm(self) -> None:
        if self.header_timer is not None:
            self.header_timer.cancel()
            self.header_timer = None

    def _headers_late(self) -> None:
        self.header_timer = None
        if self._between_requests() and not self.transport.is_closing():
            self.transport.close()  # no request began: nothing to answer

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        if self.header_timer is not None and not self._between_requests():
            self._disarm()  # a request's headers arrived

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self._between_requests():
            self._arm()
