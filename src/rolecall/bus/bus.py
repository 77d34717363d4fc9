"""The in-process event bus: four topics, ordered delivery, isolated subscribers.

Delivery is synchronous fan-out through a pyee ``EventEmitter``, by its public API only
(``add_listener``, ``emit``, ``remove_listener``; never pyee's asyncio emitter, which
schedules handlers fire-and-forget). Ordering is ours: an event
published from inside a handler is queued and delivered only after the current event
has reached every subscriber, so each subscriber sees events in ``seq`` order. A
handler that raises is reported as a ``system/error`` event and never stops delivery
to the others. Async consumers use :meth:`EventBus.open_stream`, a memory object
stream fed in the same order.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from datetime import UTC, datetime

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from pyee import EventEmitter

from rolecall.bus.events import (
    EVENT_KINDS,
    TOPICS,
    Envelope,
    ErrorEvent,
    Event,
    StreamChunk,
    Topic,
)
from rolecall.bus.protocol import EnvelopeSink, Filter, Handler
from rolecall.bus.soon import call_soon
from rolecall.log import get_logger

log = get_logger(__name__)

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False, slots=True)
class _Listener:
    """A subscription's listener on the emitter: its handler, behind its filter, isolated
    (a handler that raises is reported by the bus and never stops delivery to the others).
    pyee calls it through its public ``emit``; a listener added or removed during a
    delivery takes effect from the next event (``emit`` calls a copy of the list)."""

    bus: EventBus
    handler: Handler
    filter: Filter | None
    name: str

    def __call__(self, envelope: Envelope) -> None:
        try:
            if self.filter is None or self.filter(envelope):
                self.handler(envelope)
        except Exception as exc:  # isolation: one subscriber never breaks another
            self.bus._failed(self, envelope, exc)


@dataclass(eq=False, slots=True)
class Subscription:
    """A live subscription: its listener on the emitter, the channels it listens on and
    its name. ``close()`` removes it."""

    bus: EventBus
    listener: _Listener
    topics: tuple[str, ...]  # the emitter's event names: topics, or topic/type tags
    name: str
    active: bool = True

    def close(self) -> None:
        if not self.active:
            return
        self.active = False
        bus = self.bus
        for t in self.topics:
            with suppress(KeyError):
                bus._emitter.remove_listener(t, self.listener)
            bus._listeners[t] -= 1
            if "/" in t and not bus._listeners[t]:
                bus._typed.pop(EVENT_KINDS[t], None)


def _topics(topic: Topic | Iterable[Topic] | None) -> tuple[Topic, ...]:
    if topic is None:
        return TOPICS
    topics = (topic,) if isinstance(topic, str) else tuple(topic)
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise ValueError(f"unknown topic {unknown[0]!r} (topics: {', '.join(TOPICS)})")
    return topics


class EventBus:
    """Publishes events of one session to subscribers, in order, with a bounded history."""

    def __init__(
        self,
        session_id: str,
        *,
        history_size: int = 5000,
        first_seq: int = 1,
        clock: Clock = utc_now,
    ) -> None:
        self.session_id = session_id
        self.history: deque[Envelope] = deque(maxlen=history_size)
        self._next_seq = first_seq
        self._clock = clock
        self._burst: datetime | None = None  # the time of the chunks stamped in this burst
        self._emitter = EventEmitter()  # pyee's synchronous emitter, its public API only
        self._pending: deque[Envelope] = deque()
        self._delivering = False
        self._delivered_seq = first_seq - 1  # the seq of the latest delivered event
        self._recorders: list[EnvelopeSink] = []
        self._streams: set[MemoryObjectSendStream[Envelope]] = set()
        # event class -> its topic/type tag, for the classes some subscriber asked for
        # by type: such a subscriber is an emitter listener of the tag, not of the topic
        self._typed: dict[type, str] = {}
        # how many subscriptions listen on each emitter channel: an event nobody listens
        # to (a streamed chunk in a session without sinks) is not emitted at all
        self._listeners: dict[str, int] = dict.fromkeys(TOPICS, 0)

    @property
    def last_seq(self) -> int:
        return self._next_seq - 1

    def subscribe(
        self,
        handler: Handler,
        topic: Topic | Iterable[Topic] | None = None,
        *,
        filter: Filter | None = None,
        name: str = "",
        types: Iterable[str] | None = None,
    ) -> Subscription:
        """Call ``handler`` for each event of ``topic`` (all if None) that passes ``filter``.

        ``types`` narrows it to those event types of the topic(s): the handler is then
        called for them only, and the topic's other events never reach it.
        """
        topics = _topics(topic)
        names: tuple[str, ...] = topics
        if types is not None:
            wanted = tuple(types)
            names = tuple(
                f"{t}/{kind}" for t in topics for kind in wanted if f"{t}/{kind}" in EVENT_KINDS
            )
            for kind in wanted:
                if not any(f"{t}/{kind}" in EVENT_KINDS for t in topics):
                    raise ValueError(f"no event type {kind!r} in topic {', '.join(topics)}")
        label = name or getattr(handler, "__name__", "?")
        listener = _Listener(self, handler, filter, label)  # one per subscription
        sub = Subscription(self, listener, names, label)
        for t in names:
            if "/" in t:
                self._typed[EVENT_KINDS[t]] = t
            self._emitter.add_listener(t, listener)
            self._listeners[t] = self._listeners.get(t, 0) + 1
        return sub

    def record_into(self, into: EnvelopeSink) -> None:
        """Append every envelope stamped from now on to ``into``, at stamp time, in order.

        For the store, which writes events in its own transactions: unlike a subscriber
        it also sees the envelopes stamped but not yet delivered (those it is about to
        store), and it costs a list append per event rather than a delivery.
        """
        self._recorders.append(into)

    def publish(self, event: Event) -> Envelope:
        """Stamp ``event`` with the next seq and deliver it (after any delivery in progress)."""
        envelope = self.stamp(event)
        self.deliver(envelope)
        return envelope

    def stamp(self, event: Event) -> Envelope:
        """Give ``event`` its seq and time without delivering it yet.

        Lets a caller store events before any subscriber can see them; stamped
        envelopes must then be delivered, in order, with :meth:`deliver`.
        """
        if type(event) is StreamChunk:
            ts = self._burst or self._burst_began()
        else:  # which ends the burst: every event's time is at or after the one before
            ts = self._clock()
            self._burst = None
        envelope = Envelope(self._next_seq, self.session_id, ts, event)
        self._next_seq += 1
        self.history.append(envelope)
        for into in self._recorders:
            into.append(envelope)
        return envelope

    def _burst_began(self) -> datetime:
        """The clock, read once per burst of streamed chunks: the chunks stamped before
        the event loop runs anything else (a scripted reply's words, a provider's chunks
        read from one network packet) were published at the same time and share it.
        Any other event ends the burst."""
        ts = self._clock()
        if not call_soon(self._burst_ended):  # no event loop: every chunk reads the clock
            return ts
        self._burst = ts
        return ts

    def _burst_ended(self) -> None:
        self._burst = None

    def deliver(self, *envelopes: Envelope) -> None:
        """Deliver stamped envelopes (after any delivery in progress)."""
        self._pending.extend(envelopes)
        if not self._delivering:
            self._drain()

    def _drain(self) -> None:
        self._delivering = True
        emit = self._emitter.emit
        try:
            while self._pending:
                envelope = self._pending.popleft()
                self._delivered_seq = envelope.seq
                event = envelope.event
                if self._listeners[event.topic]:
                    emit(event.topic, envelope)
                tag = self._typed.get(type(event))
                if tag is not None:  # then the subscribers of this type only
                    emit(tag, envelope)
        finally:
            self._delivering = False

    def _failed(self, listener: _Listener, envelope: Envelope, exc: Exception) -> None:
        """Report a subscriber's failure as a ``system/error`` event (never a loop)."""
        name = listener.name
        event = envelope.event
        if isinstance(event, ErrorEvent) and event.source.startswith("subscriber"):
            # an error handler failing on an error report: log, never loop
            log.error("subscriber_failed_on_error", subscriber=name, error=repr(exc))
            return
        log.warning("subscriber_failed", subscriber=name, seq=envelope.seq, error=repr(exc))
        self.publish(
            ErrorEvent(
                error=f"subscriber {name} failed on event {envelope.seq} "
                f"({event.topic}/{event.type}): {exc!r}",
                source=f"subscriber:{name}",
            )
        )

    @contextmanager
    def open_stream(
        self,
        topic: Topic | Iterable[Topic] | None = None,
        *,
        filter: Filter | None = None,
        max_buffer: float = math.inf,
        until: Filter | None = None,
        since: int | None = None,
    ) -> Iterator[MemoryObjectReceiveStream[Envelope]]:
        """A receive stream of matching events, in order, for an async consumer.

        The buffer is unbounded by default so a slow consumer never reorders or drops
        events. The stream ends (``async for`` stops) after the first event for which
        ``until`` is true, or when :meth:`end_streams` is called: either way every event
        delivered before is still read first. Closing the context unsubscribes.

        ``since``: the stream first holds the events from that seq on that were already
        delivered and are still in :attr:`history` (an event stamped but not delivered
        yet, one the store is about to commit, comes when it is delivered).
        """
        send: MemoryObjectSendStream[Envelope]
        receive: MemoryObjectReceiveStream[Envelope]
        send, receive = anyio.create_memory_object_stream[Envelope](max_buffer)
        self._streams.add(send)
        if since is not None:
            topics = _topics(topic)
            for envelope in list(self.history):
                if not since <= envelope.seq <= self._delivered_seq:
                    continue
                if envelope.event.topic in topics and (filter is None or filter(envelope)):
                    send.send_nowait(envelope)
                    if until is not None and until(envelope):
                        self._end_stream(send)
                        break

        def forward(envelope: Envelope) -> None:
            if send in self._streams:
                send.send_nowait(envelope)
                if until is not None and until(envelope):
                    self._end_stream(send)

        sub = self.subscribe(forward, topic, filter=filter, name="stream")
        try:
            yield receive
        finally:
            sub.close()
            self._end_stream(send)
            receive.close()

    def end_streams(self) -> None:
        """End every open stream: its reader gets what was delivered, then the end."""
        for send in list(self._streams):
            self._end_stream(send)

    def _end_stream(self, send: MemoryObjectSendStream[Envelope]) -> None:
        self._streams.discard(send)
        send.close()
