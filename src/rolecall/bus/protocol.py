"""The bus seam: what a session, its agents and its sinks need from a transport.

:class:`~rolecall.bus.bus.EventBus` is the in-process implementation (pyee fan-out,
in order, subscribers isolated from each other). Another transport (NATS, a web
socket) implements the same protocol; nothing above this layer names a transport.

Publishing is split in two for the store: :meth:`Bus.stamp` gives an event its place
in the session's order (``seq`` and time) so it can be committed, and
:meth:`Bus.deliver` hands committed envelopes to subscribers, in order. A subscriber
therefore never sees an event that is not stored. :meth:`Bus.publish` is both at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from anyio.streams.memory import MemoryObjectReceiveStream

from rolecall.bus.events import Envelope, Event, Topic

Handler = Callable[[Envelope], None]
Filter = Callable[[Envelope], bool]
Topics = Topic | Iterable[Topic] | None


class EnvelopeSink(Protocol):
    """Where :meth:`Bus.record_into` appends stamped envelopes (a list will do)."""

    def append(self, envelope: Envelope, /) -> None: ...


class Closable(Protocol):
    """A live subscription."""

    def close(self) -> None:
        """Stop receiving events (idempotent)."""
        ...


class Bus(Protocol):
    """One session's event bus: four topics (``messages``, ``sse``, ``system``, ``world``)."""

    @property
    def session_id(self) -> str: ...

    @property
    def last_seq(self) -> int:
        """The seq of the latest stamped event (0 before the first)."""
        ...

    def publish(self, event: Event) -> Envelope:
        """Stamp ``event`` and deliver it after any delivery in progress."""
        ...

    def stamp(self, event: Event) -> Envelope:
        """Give ``event`` its seq and time without delivering it yet."""
        ...

    def deliver(self, *envelopes: Envelope) -> None:
        """Deliver stamped envelopes, in order, after any delivery in progress."""
        ...

    def record_into(self, into: EnvelopeSink) -> None:
        """Append every envelope stamped from now on to ``into``, at stamp time (the store)."""
        ...

    def subscribe(
        self,
        handler: Handler,
        topic: Topics = None,
        *,
        filter: Filter | None = None,
        name: str = "",
        types: Iterable[str] | None = None,
    ) -> Closable:
        """Call ``handler`` for each event of ``topic`` (all when None) passing ``filter``.

        ``types`` narrows it to those event types of the topic (``("start", "end")`` of
        ``sse``): the other events cost such a subscriber nothing, not even a call.
        A handler that raises is reported as a ``system/error`` event; the others still
        get the event.
        """
        ...

    def open_stream(
        self,
        topic: Topics = None,
        *,
        filter: Filter | None = None,
        until: Filter | None = None,
        since: int | None = None,
    ) -> AbstractContextManager[MemoryObjectReceiveStream[Envelope]]:
        """The matching events as an async stream, in order, for the context's lifetime.

        The stream ends after the first event for which ``until`` is true, or at
        :meth:`end_streams`; either way every event delivered before is read first.
        ``since``: first the events from that seq on already delivered and still in the
        bus's history.
        """
        ...

    def end_streams(self) -> None:
        """End every open stream (the session is over): readers drain, then stop."""
        ...
