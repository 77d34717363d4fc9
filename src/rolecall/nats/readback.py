"""Reading the ``ROLECALL_EVENTS`` stream back: events in order, sessions rebuilt.

Events of one session are put back in ``seq`` order whatever order the stream holds them
in (a batch re-sent after a lost connection), each ``seq`` once: when a session was
continued by another process after its first one died, the later copy of a ``seq``
wins. :class:`SessionLog` rebuilds the session document as of its last checkpoint: what
``sessions import`` stores and what a worker resumes from.

A session run by workers carries their leases (``rolecall.<session_id>.lease``, see
:class:`~rolecall.nats.bus.Publisher`): from a lease on, only the events of the process
holding it count. A worker that lost the session (paused past the ack wait) may still
have had events on their way when the next one claimed it; those come after the claim
in the stream, and are left out.
"""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from rolecall.nats.link import (
    EVENTS_STREAM,
    H_BATCH,
    H_CHECKPOINT,
    H_LEASE,
    H_MSG_ID,
    H_RUN,
    H_WORLD,
    Link,
)

if TYPE_CHECKING:
    from nats.aio.msg import Msg
    from nats.js.api import ConsumerConfig, DeliverPolicy

    from rolecall.storage.document import SessionDocument


@dataclass(frozen=True)
class StreamEvent:
    record: dict[str, Any]
    headers: dict[str, str]
    line: str = ""  # the event's JSON exactly as published (as --json prints it)
    pending: int = 0  # how many stored messages the consumer has not delivered yet
    subject: str = ""
    stream_seq: int = 0  # its sequence in the stream

    @classmethod
    def of(cls, msg: Msg) -> StreamEvent:
        line = msg.data.decode()
        pending, stream_seq = _sequences(msg)
        return cls(
            json.loads(line), dict(msg.headers or {}), line, pending, msg.subject, stream_seq
        )

    @property
    def epoch(self) -> str:
        """The run of a process that published it (a lease's holder, an event's sender)."""
        if H_LEASE in self.headers:
            return self.headers[H_LEASE]
        return self.headers.get(H_MSG_ID, "").rpartition(":")[2]

    @property
    def session_id(self) -> str:
        return str(self.record["session_id"])

    @property
    def seq(self) -> int:
        return int(self.record["seq"])


def _sequences(msg: Msg) -> tuple[int, int]:
    """How many stored messages the consumer has not delivered yet, and the message's
    sequence in its stream (0, 0 without JetStream metadata in its reply subject)."""
    from nats.errors import NotJSMessageError

    try:
        meta = msg.metadata
        return int(meta.num_pending), int(meta.sequence.stream)
    except (NotJSMessageError, ValueError, TypeError):
        return 0, 0


def is_final(record: dict[str, Any]) -> bool:
    """A run's last event (events.md): ``world/stop``, or ``world/session`` paused."""
    kind = (record.get("topic"), record.get("type"))
    return kind == ("world", "stop") or (
        kind == ("world", "session") and record.get("state") == "paused"
    )


def start_after(after: int) -> ConsumerConfig | None:
    """A consumer starting after the stream's message ``after`` (None: the default start)."""
    from nats.js.api import ConsumerConfig, DeliverPolicy

    if not after:
        return None
    return ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_SEQUENCE, opt_start_seq=after + 1)


async def ordered(
    link: Link,
    subject: str | tuple[str, ...],
    *,
    stream: str,
    policy: DeliverPolicy,
    after: int = 0,
    what: str = "following the stream",
) -> AsyncGenerator[Msg, None]:
    """The messages of ``stream`` on ``subject`` (or on any of several subjects) in stream
    order, each once (``policy`` where to start, or after the stream's message ``after``),
    until the caller stops.

    An ordered consumer is ephemeral and kept in the server's memory, so a server that
    restarted has lost it; nats-py notices only after two missed heartbeats of a 10 s
    check (10 to 20 s), during which a ``batch --nats`` or ``watch`` would see nothing.
    So once the connection is back (its reconnect count moved) the subscription is made
    again, starting after the last message received: one request, nothing twice."""
    import anyio
    from nats.errors import TimeoutError as NatsTimeout
    from nats.js.api import ConsumerConfig

    from rolecall.nats.link import answered

    subjects = (subject,) if isinstance(subject, str) else subject

    def subscribe(start: int) -> Awaitable[Any]:
        config = start_after(start)
        if len(subjects) > 1:
            config = config or ConsumerConfig()
            config.filter_subjects = list(subjects)
        return link.js.subscribe(
            subjects[0],
            stream=stream,
            ordered_consumer=True,
            deliver_policy=None if start else policy,
            config=config,
        )

    nc = link.nc
    last = after
    while True:
        connection = nc.stats["reconnects"]
        sub = await answered(link.url, what, partial(subscribe, last))
        try:
            while nc.stats["reconnects"] == connection:
                try:  # the wait is bounded to look at the connection between messages
                    msg = await sub.next_msg(timeout=0.5)
                except NatsTimeout:
                    continue
                last = msg.metadata.sequence.stream
                yield msg
        finally:
            with anyio.CancelScope(shield=True), suppress(Exception):
                await sub.unsubscribe()


class Fence:
    """Whose events count, session by session: the process holding its last lease.

    A worker claims a session's lease before it runs it and renews it with each batch of
    events; a worker that lost the session (paused, cut off) may still append events
    after another's claim. Those are left out, as ``sessions import`` leaves them out.
    Before a session's first lease is seen, every event counts.
    """

    def __init__(self) -> None:
        self.holders: dict[str, str] = {}

    def admits(self, event: StreamEvent) -> bool:
        """False for a lease (noted) and for an event of a process that lost the session."""
        if event.subject.endswith(".lease"):
            self.holders[event.session_id] = event.epoch
            return False
        holder = self.holders.get(event.session_id)
        return holder is None or event.epoch == holder


async def follow(
    link: Link, subject: str | tuple[str, ...], *, from_start: bool, after: int = 0
) -> AsyncGenerator[StreamEvent, None]:
    """Events on ``subject`` as they are stored (after the stored ones with ``from_start``;
    from the stream's message ``after`` on when it is given), until the caller stops
    reading. A reader following a :func:`~rolecall.nats.link.log_filter` subject gets the
    sessions' leases too, and leaves out what its :class:`Fence` does not admit."""
    from nats.js.api import DeliverPolicy

    policy = DeliverPolicy.ALL if from_start else DeliverPolicy.NEW
    async with aclosing(
        ordered(link, subject, stream=EVENTS_STREAM, policy=policy, after=after)
    ) as msgs:
        async for msg in msgs:
            yield StreamEvent.of(msg)


async def read_stream(
    link: Link, subject: str, *, stream: str = EVENTS_STREAM
) -> AsyncIterator[StreamEvent]:
    """Every stored message on ``subject`` (wildcards allowed) of ``stream``, in stream
    order, then stop."""
    from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy
    from nats.js.errors import NotFoundError

    try:
        info = await link.js.stream_info(stream, subjects_filter=subject)
    except NotFoundError:
        return
    if not info.state.subjects:
        return
    sub = await link.js.pull_subscribe(
        subject,
        stream=stream,
        config=ConsumerConfig(
            deliver_policy=DeliverPolicy.ALL,
            ack_policy=AckPolicy.NONE,
            inactive_threshold=30.0,
        ),
    )
    try:
        while True:
            msgs = await sub.fetch(batch=1000, timeout=5)
            for msg in msgs:
                yield StreamEvent.of(msg)
            if msgs[-1].metadata.num_pending == 0:
                return
    finally:
        await sub.unsubscribe()


class Reorder:
    """Hands out one session's events in ``seq`` order, each once (a small buffer)."""

    def __init__(self, next_seq: int = 1) -> None:
        self.next_seq = next_seq
        self.waiting: dict[int, StreamEvent] = {}

    def push(self, event: StreamEvent) -> list[StreamEvent]:
        if event.seq < self.next_seq:
            return []
        self.waiting[event.seq] = event
        out: list[StreamEvent] = []
        while self.next_seq in self.waiting:
            out.append(self.waiting.pop(self.next_seq))
            self.next_seq += 1
        return out


@dataclass
class SessionLog:
    """One session as the stream holds it, folded event by event."""

    session_id: str
    start: dict[str, Any] | None = None  # the world header
    batch: str | None = None
    run: int | None = None
    events: dict[int, dict[str, Any]] = field(default_factory=dict)
    messages: dict[str, dict[str, Any]] = field(default_factory=dict)
    records: dict[int, dict[str, Any]] = field(default_factory=dict)
    drafts: list[dict[str, Any]] = field(default_factory=list)
    checkpoint: dict[str, Any] | None = None
    stream_seq: int = 0  # the stream sequence of its last message (what a claim expects)
    fence: Fence = field(default_factory=Fence)  # only the lease holder's events count

    @property
    def holder(self) -> str | None:
        """The epoch of its last lease (None before one)."""
        return self.fence.holders.get(self.session_id)

    def add(self, event: StreamEvent) -> bool:
        """Fold ``event`` in; False when it does not count (a lease, or an event of a
        process that had lost the session)."""
        self.stream_seq = max(self.stream_seq, event.stream_seq)
        if not self.fence.admits(event):
            return False
        self.events[event.seq] = event.record  # a later copy of a seq wins
        headers = event.headers
        if H_WORLD in headers:
            self.start = json.loads(headers[H_WORLD])
        if H_BATCH in headers:
            self.batch, self.run = headers[H_BATCH], int(headers.get(H_RUN) or 0)
        if H_CHECKPOINT in headers:
            cp = json.loads(headers[H_CHECKPOINT])
            self.checkpoint = cp
            for m in cp["messages"]:
                self.messages[m["id"]] = m
            for r in cp["records"]:
                self.records[int(r["execution_order"])] = r
            self.drafts.extend(d for d in cp["drafts"] if d not in self.drafts)
        return True

    @property
    def state(self) -> str | None:
        return None if self.checkpoint is None else str(self.checkpoint["state"]["state"])

    def document(self) -> SessionDocument | None:
        """The session as of its last checkpoint; None before its first one."""
        from rolecall.storage.document import SessionDocument

        if self.start is None or self.checkpoint is None:
            return None
        last = int(self.checkpoint["last_seq"])
        events = [self.events[s] for s in sorted(self.events) if s <= last]
        stamps = [e["ts"] for e in events if "ts" in e]
        messages = sorted(self.messages.values(), key=lambda m: int(str(m["id"])[1:]))
        return SessionDocument.model_validate(
            {
                "session_id": self.session_id,
                "created_at": self.start["created_at"],
                "updated_at": stamps[-1] if stamps else self.start["created_at"],
                "world": self.start["world"],
                "world_source": self.start.get("world_source"),
                "model_override": self.start.get("model_override"),
                "state": self.checkpoint["state"],
                "last_seq": last,
                "messages": messages,
                "execution_log": [self.records[k] for k in sorted(self.records)],
                "drafts": self.drafts,
                "events": events,
            }
        )

    @property
    def created_at(self) -> datetime | None:
        return None if self.start is None else datetime.fromisoformat(self.start["created_at"])


async def session_logs(link: Link, subject: str) -> dict[str, SessionLog]:
    """Every session on ``subject`` (one session's subjects, or all), folded; with its
    leases when ``subject`` takes them (:func:`~rolecall.nats.link.log_filter`)."""
    logs: dict[str, SessionLog] = {}
    async for event in read_stream(link, subject):
        sid = event.session_id
        log = logs.get(sid)
        if log is None:
            log = logs[sid] = SessionLog(sid)
        log.add(event)
    return logs
