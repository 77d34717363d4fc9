"""Live sessions for the web view: the ones this server runs, and followers of the others.

A session started from the page runs in the server's process, inside the server's task
group (:class:`LiveRuns`). Its bus feeds a :class:`EventLog`: every event as its JSON
line, in ``seq`` order, appended as it is delivered. Each viewer reads the log from
where it stands and waits for more, so a hundred viewers all see every event in order,
a slow viewer never holds the session up, and a viewer that disconnects leaves
nothing behind.

A session run on a NATS cluster (``rolecall web --nats``) is followed from the stream
(:mod:`rolecall.web.cluster`) into an event log of its own. A session run by another
process on the same data directory is followed through the
store (:func:`follow_store`): the events committed after the last one seen, polled
while the session is running, message by message as its turns commit.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field

import anyio
from anyio.abc import TaskGroup

from rolecall.bus import Envelope
from rolecall.log import get_logger

log = get_logger(__name__)

__all__ = ["EventLog", "follow_store"]

POLL_SECONDS = 0.4
STATE_SEQ = -1  # what EventLog.follow yields, with the watched value, when that changes


@dataclass
class EventLog:
    """A session's events as JSON lines, in order, readable by any number of viewers."""

    lines: list[tuple[int, str]] = field(default_factory=list)  # (seq, JSON line)
    closed: bool = False
    # the messages streaming now: message id -> the seq of its ``sse/start``
    streaming: dict[str, int] = field(default_factory=dict)
    _changed: anyio.Event = field(default_factory=anyio.Event)

    def append(self, envelope: Envelope) -> None:
        topic, kind = envelope.topic, envelope.type
        if topic == "sse" and kind == "start":
            self.streaming[getattr(envelope.event, "message_id", "")] = envelope.seq
        elif (topic == "sse" and kind in ("end", "error")) or (
            topic == "messages" and kind == "message"
        ):  # a tool call (tools.md) names its turn's message: that one still streams
            self.streaming.pop(getattr(envelope.event, "message_id", ""), None)
        self.add_line(envelope.seq, envelope.to_json())

    def join_after(self, stored: int) -> int:
        """Where a page showing the session as stored up to seq ``stored`` follows it
        from: before the start of any message streaming now, so a page opened mid-message
        shows the words streamed so far and goes on streaming."""
        return min([stored, *(seq - 1 for seq in self.streaming.values())])

    def add_line(self, seq: int, line: str) -> None:
        self.lines.append((seq, line))
        self._wake()

    def close(self) -> None:
        """No more events: viewers read what is left and end."""
        self.closed = True
        self._wake()

    def nudge(self) -> None:
        """Wake the viewers without a line (the session came to rest: see ``follow``)."""
        self._wake()

    async def changed(self) -> None:
        """Wait for the next line (or the close)."""
        await self._changed.wait()

    def _wake(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def after(self, seq: int) -> list[tuple[int, str]]:
        """The lines after ``seq`` (seq order: a binary search finds the start)."""
        lo, hi = 0, len(self.lines)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.lines[mid][0] <= seq:
                lo = mid + 1
            else:
                hi = mid
        return self.lines[lo:]

    async def follow(
        self,
        after: int = 0,
        *,
        until: Callable[[], bool] | None = None,
        watch: Callable[[], str] | None = None,
    ) -> AsyncIterator[tuple[int, str]]:
        """Every line after ``after``, then each new one as it comes, until closed (or,
        with ``until``, once every line is read and ``until()`` is true). ``watch``: a
        value read after each batch and each wake (:meth:`nudge`), yielded as
        ``(STATE_SEQ, value)`` whenever it differs from the last one yielded."""
        seen = after
        mark: str | None = None
        while True:
            waiter = self._changed
            batch = self.after(seen)
            for seq, line in batch:
                seen = seq
                yield seq, line
            if watch is not None and (now := watch()) != mark:
                mark = now
                yield STATE_SEQ, now
            if not self.after(seen) and (self.closed or (until is not None and until())):
                return
            if not batch:
                await waiter.wait()


Fetch = Callable[[int], Awaitable[tuple[list[tuple[int, str]], bool]]]


async def follow_store(fetch: Fetch, after: int = 0) -> AsyncIterator[tuple[int, str]]:
    """Events of a session another process runs, from the store, as they are committed.

    ``fetch(seq)`` returns the stored lines after ``seq`` and whether the session is
    still running; following ends once it is not and every line has been read.
    """
    seen = after
    while True:
        lines, running = await fetch(seen)
        for seq, line in lines:
            seen = seq
            yield seq, line
        if not running:
            return
        await anyio.sleep(POLL_SECONDS)


def start_soon(tg: TaskGroup, fn: Callable[[], Awaitable[None]], name: str) -> None:
    """Run ``fn`` in ``tg``; its failure is logged, never fatal to the server."""

    async def guarded() -> None:
        try:
            await fn()
        except Exception as exc:  # a session's failure is shown on its page, not raised
            log.warning("web_task_failed", task=name, error=str(exc))

    tg.start_soon(guarded, name=name)
