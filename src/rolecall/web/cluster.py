"""Sessions on a NATS cluster, for ``rolecall web --nats URL`` (web.md, nats.md).

Sessions run by other processes or machines with ``--nats`` are not in this server's
store; the ``ROLECALL_EVENTS`` stream holds them. Two readers of that stream:

* the **index** (:meth:`Cluster.index`): every session's ``world`` events, from the
  start of the stream and then as they come, so the sessions page lists each session
  on the cluster with its world, status and stop reason;
* a **feed** per session someone looks at (:meth:`Cluster.feed`): all of that session's
  events, put back in ``seq`` order, folded into its document (as of its last
  checkpoint, as ``sessions import`` does) and appended to an
  :class:`~rolecall.web.live.EventLog` that the live page follows chunk by chunk, like a
  session this server runs. A feed ends with its session's final event; the latest
  :data:`MAX_FEEDS` feeds are kept, so a page visited again opens at once.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from contextlib import aclosing
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from rolecall.log import get_logger
from rolecall.nats.link import (
    EVENTS_STREAM,
    H_BATCH,
    H_WORLD,
    LEASE_SUBJECTS,
    log_filter,
    session_filter,
)
from rolecall.nats.readback import Fence, Reorder, SessionLog, StreamEvent, follow, is_final
from rolecall.session.state import TranscriptMessage
from rolecall.storage.browse import SessionSummary
from rolecall.storage.document import SessionDocument
from rolecall.web.live import EventLog, start_soon

if TYPE_CHECKING:
    from rolecall.nats.link import Link

log = get_logger(__name__)

MAX_FEEDS = 64
CATCH_UP_S = 5.0  # a page waits this long at most for a feed to read the stored events
WORLD_EVENTS = "rolecall.*.world.*"


@dataclass
class Feed:
    """One session as the stream holds it, followed live."""

    session_id: str
    log: SessionLog
    events: EventLog = field(default_factory=EventLog)
    caught_up: anyio.Event = field(default_factory=anyio.Event)
    failed: str | None = None

    def __post_init__(self) -> None:
        self._order = Reorder()

    @property
    def live(self) -> bool:
        return not self.events.closed

    def add(self, event: StreamEvent) -> None:
        if self.log.add(event):  # not a lease, nor a displaced worker's late event
            for ready in self._order.push(event):
                self.events.add_line(ready.seq, ready.line)
                if is_final(ready.record):
                    self.events.close()
        if event.pending == 0:
            self.caught_up.set()

    async def message(self, message_id: str) -> TranscriptMessage | None:
        """A committed message; one the stream has announced but whose checkpoint is
        still on its way (the same delivery's last event) is waited for, briefly."""
        with anyio.move_on_after(CATCH_UP_S):
            while message_id not in self.log.messages and self.live:
                await self.events.changed()
        found = self.log.messages.get(message_id)
        return TranscriptMessage.model_validate(found) if found is not None else None

    def document(self) -> SessionDocument | None:
        """The session as of its last checkpoint; before its first one, its world alone."""
        doc = self.log.document()
        if doc is not None or self.log.start is None:
            return doc
        start = self.log.start
        return SessionDocument.model_validate(
            {
                "session_id": self.session_id,
                "created_at": start["created_at"],
                "updated_at": start["created_at"],
                "world": start["world"],
                "world_source": start.get("world_source"),
                "model_override": start.get("model_override"),
                "state": {"state": "running"},
            }
        )


@dataclass
class Cluster:
    """What this web server knows of the cluster at ``link``."""

    link: Link
    tg: TaskGroup
    rows: dict[str, SessionSummary] = field(default_factory=dict)
    batches: dict[str, str] = field(default_factory=dict)  # session id -> its batch
    feeds: OrderedDict[str, Feed] = field(default_factory=OrderedDict)

    @property
    def url(self) -> str:
        return self.link.url

    # ------------------------------------------------------------ the index
    async def index(self) -> None:
        """Keep :attr:`rows` up to date from every session's ``world`` events."""
        # with the leases: a worker that lost a session may still append to it
        fence = Fence()
        subjects = (WORLD_EVENTS, LEASE_SUBJECTS)
        async with aclosing(follow(self.link, subjects, from_start=True)) as events:
            async for event in events:
                if fence.admits(event):
                    self._index(event)

    def _index(self, event: StreamEvent) -> None:
        record = event.record
        sid = event.session_id
        row = self.rows.get(sid)
        if H_BATCH in event.headers:
            self.batches[sid] = event.headers[H_BATCH]
        if H_WORLD in event.headers:
            world = json.loads(event.headers[H_WORLD])["world"]
            name = str(world.get("name") or "")
            row = SessionSummary(
                id=sid,
                world_name=name,
                title=str(world.get("title") or name),
                state="running",
                stop_reason=None,
                created_at=_stamp(record),
            )
        if row is None:  # a session whose first event the stream no longer holds
            row = SessionSummary(sid, "", sid, "running", None, _stamp(record))
        if record.get("type") == "session" and isinstance(record.get("state"), str):
            state = str(record["state"])
            row = replace(row, state="running" if state == "created" else state)
        elif record.get("type") == "stop":
            row = replace(row, state="finished", stop_reason=str(record.get("reason") or ""))
        self.rows[sid] = row

    def listed(
        self,
        *,
        search: str | None,
        world: str | None,
        status: str | None,
        batch: str | None,
        limit: int,
    ) -> list[SessionSummary]:
        """The indexed sessions that match (``search``: every word in the id, world or
        title), newest first."""
        words = (search or "").lower().split()
        out = []
        for row in self.rows.values():
            if world and row.world_name != world:
                continue
            if (status and row.state != status) or (batch and self.batches.get(row.id) != batch):
                continue
            text = f"{row.id} {row.world_name} {row.title}".lower()
            if all(w in text for w in words):
                out.append(row)
        out.sort(key=lambda r: r.created_at, reverse=True)
        return out[:limit]

    # ------------------------------------------------------------ one session
    async def holds(self, session_id: str) -> bool:
        """Whether the stream holds any event of ``session_id``."""
        from nats.js.errors import NotFoundError

        if session_id in self.rows or session_id in self.feeds:
            return True
        try:
            info = await self.link.js.stream_info(
                EVENTS_STREAM, subjects_filter=session_filter(session_id)
            )
        except NotFoundError:
            return False
        return bool(info.state.subjects)

    async def feed(self, session_id: str) -> Feed | None:
        """The session's feed (started if needed, its stored events read), or None when the
        stream holds nothing of it."""
        feed = self.feeds.get(session_id)
        if feed is None:
            if not await self.holds(session_id):
                return None
            feed = self.feeds[session_id] = Feed(session_id, SessionLog(session_id))
            start_soon(self.tg, lambda: self._follow(feed), f"cluster-feed-{session_id}")
            self._evict()
        else:
            self.feeds.move_to_end(session_id)
        with anyio.move_on_after(CATCH_UP_S):
            await feed.caught_up.wait()
        return feed

    async def _follow(self, feed: Feed) -> None:
        subject = log_filter(feed.session_id)  # its events and its leases
        try:
            async with aclosing(follow(self.link, subject, from_start=True)) as events:
                async for event in events:
                    feed.add(event)
                    if not feed.live:
                        return
        except Exception as exc:
            feed.failed = str(exc)
            raise
        finally:
            feed.caught_up.set()
            feed.events.close()

    def _evict(self) -> None:
        """Forget the oldest ended feeds beyond :data:`MAX_FEEDS`."""
        for sid in list(self.feeds):
            if len(self.feeds) <= MAX_FEEDS:
                return
            if not self.feeds[sid].live:
                del self.feeds[sid]


def _stamp(record: dict[str, object]) -> str:
    ts = record.get("ts")
    return str(ts) if ts else datetime.now(UTC).isoformat()
