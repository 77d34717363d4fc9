"""The NATS transport of the bus: in-process delivery, and every event on JetStream.

:class:`NatsBus` is the in-process :class:`~rolecall.bus.EventBus` (same ordering, same
subscriber isolation) whose delivered envelopes are also published, in order, to
``rolecall.<session_id>.<topic>.<type>`` by a :class:`Publisher`. Delivery comes after
the local store's commit, so nothing reaches the stream before it is stored here.

A delivery that holds more than streamed chunks carries a checkpoint header: the state
after it, and the messages, execution records and drafts added since the previous
checkpoint. With the world header on the first event, the stream alone holds what a
resume needs (:mod:`rolecall.nats.readback`).

The publisher sends a batch of messages without waiting for each: all but the last as
plain publishes, the last with JetStream's acknowledgement, which comes back only once
the stream has stored it, and so everything the same connection sent before it (a
stream stores one connection's messages in the order sent). It waits for that
acknowledgement before the next batch; :meth:`Publisher.flush` waits until everything
handed to it is acknowledged. A batch that is not acknowledged in time (the connection
was lost) is sent again once reconnected: the message ids let JetStream drop the copies
it already stored.

A worker's session is leased (:meth:`Publisher.claim`): its events are published only
while no other process has claimed the session since. The claim is a message on
``rolecall.<session_id>.lease`` that JetStream stores only if the session's last message
in the stream is the last one the worker read (``Nats-Expected-Last-Subject-Sequence``
over the session's subjects); each batch then carries, before the session's first
message in it, a renewal that JetStream stores only if the last lease message is the
worker's previous one. A worker paused past the ack wait, whose job another worker took
meanwhile, has its next renewal refused: it stops the session (:class:`LeaseLost`), and
readers leave out the events it had on their way after the other's claim
(:class:`~rolecall.nats.readback.SessionLog`). One renewal per batch, not a check per
message: its acknowledgement is awaited with the batch's own, in the same round trip.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from pydantic import BaseModel

from rolecall.bus import Envelope, ErrorEvent, EventBus
from rolecall.errors import RuntimeFailure, StorageError
from rolecall.log import get_logger
from rolecall.nats.link import (
    EVENTS_STREAM,
    H_BATCH,
    H_CHECKPOINT,
    H_LEASE,
    H_MSG_ID,
    H_RUN,
    H_WORLD,
    Link,
    event_subject,
    lease_subject,
)

if TYPE_CHECKING:
    from rolecall.runtime import Dialogue

log = get_logger(__name__)

ACK_TIMEOUT_S = 5.0
MAX_BATCH = 512


@dataclass(slots=True)
class Outgoing:
    subject: str
    payload: bytes
    headers: dict[str, str]
    session: str = ""  # the session whose message it is
    lease: bool = False  # a lease's renewal (its answer is awaited, and may refuse it)


H_EXPECT = "Nats-Expected-Last-Subject-Sequence"
H_EXPECT_SUBJECT = "Nats-Expected-Last-Subject-Sequence-Subject"
WRONG_LAST = 10071  # JetStream's err_code: the subject's last message is not the expected one


class LeaseLost(RuntimeFailure):
    """Another process claimed the session since this one did: this one stops it."""


@dataclass(slots=True)
class Lease:
    epoch: str  # the holder's run of the session (the last part of its message ids)
    seq: int  # the stream sequence of its last lease message stored
    renewals: int = 0
    confirmed: float = 0.0  # time.monotonic() when the last one stored was sent


def _lost(session_id: str) -> str:
    return (
        f"session {session_id} was claimed by another worker: this one lost its job (paused, "
        "or cut off from the NATS server, for longer than the ack wait) and stopped the "
        "session; the other goes on with it"
    )


class Publisher:
    """Publishes messages to JetStream in order; run :meth:`run` in a task group."""

    def __init__(self, link: Link) -> None:
        self.link = link
        # a plain queue and a wake-up: a turn hands over about 17 messages at once, and
        # a memory object stream's send costs several times a deque's append
        self._queue: deque[Outgoing] = deque()
        self._wakeup = anyio.Event()
        self._closed = False
        self.queued = 0
        self._last_of: dict[str, int] = {}  # session -> its last message's place (queued)
        self.handed = 0  # given to nats-py to send (acknowledged or not)
        self.acked = 0
        self.resent = 0
        self._progress = anyio.Event()
        self._awaited: list[Any] = []  # the acknowledgements of the batch in flight
        self.leases: dict[str, Lease] = {}  # the sessions this process holds a lease on
        self.lost: dict[str, str] = {}  # session -> why this process no longer publishes it
        # the answers to renewals: nats-py's publish_async raises a JetStream error in its
        # reply handler instead of setting it on the future, so they come to an inbox here
        self._inbox = ""
        self._listening = anyio.Lock()
        self._answers: dict[str, Any] = {}
        self._tokens = 0
        # how long a lease message stored vouches for the lease, counted from its sending
        # (:meth:`hold`): a worker sets a quarter of the ack wait; 0 asks the stream each time
        self.fence_s = 0.0
        link.on_reconnect.append(self._reconnected)

    def _reconnected(self) -> None:
        """The connection was lost and is back: the batch in flight may have been lost
        with it, so it is sent again now (its copies already stored are dropped by their
        message ids) instead of after :data:`ACK_TIMEOUT_S`."""
        for future in self._awaited:
            if not future.done():
                future.set_exception(ConnectionResetError("reconnected to the NATS server"))

    def put(self, item: Outgoing) -> None:
        if self._closed:
            raise RuntimeError("the publisher is closed")
        self._queue.append(item)
        self.queued += 1
        if item.session:
            self._last_of[item.session] = self.queued
        if not self._wakeup.is_set():
            self._wakeup.set()

    async def _listen(self) -> None:
        nc = self.link.nc
        inbox = nc.new_inbox()

        async def answered(msg: Any) -> None:
            future = self._answers.pop(msg.subject.rpartition(".")[2], None)
            if future is None or future.done():
                return
            try:
                future.set_result(json.loads(msg.data))
            except ValueError:  # a status without a body (no stream answering)
                future.set_result({"error": {"description": "no answer from the stream"}})

        await nc.subscribe(f"{inbox}.*", cb=answered)
        self._inbox = inbox  # set once subscribed: no renewal is answered before

    async def claim(self, session_id: str, epoch: str, after: int) -> None:
        """Take the lease on ``session_id`` for this process's run ``epoch``, having read
        the session from the stream up to its message at sequence ``after`` (0: none of
        it there). :class:`LeaseLost` when another process appended to the session since
        (it is running it). A server restarting meanwhile is waited for."""
        from nats.errors import Error as NatsError
        from nats.js.errors import APIError

        async with self._listening:  # the first lease: its renewals are answered here
            if not self._inbox:
                await self._listen()
        subject = lease_subject(session_id)
        msg_id = f"{session_id}:lease:{epoch}:0"
        headers = {
            H_MSG_ID: msg_id,
            H_LEASE: epoch,
            H_EXPECT: str(after),
            H_EXPECT_SUBJECT: f"rolecall.{session_id}.>",
        }
        payload = json.dumps({"session_id": session_id, "lease": epoch}).encode()
        while True:
            sent = time.monotonic()
            try:
                ack = await self.link.js.publish(
                    subject, payload, timeout=ACK_TIMEOUT_S, headers=headers
                )
                seq = int(ack.seq)
                break
            except APIError as exc:
                if exc.err_code != WRONG_LAST:
                    raise StorageError(f"the NATS server refused the lease: {exc}") from None
                found = await self._stored_as(subject, msg_id)  # sent before a lost answer
                if found is None:
                    raise LeaseLost(_lost(session_id)) from None
                seq, sent = found, 0.0  # sent by an earlier attempt: when is not known
                break
            except (TimeoutError, NatsError, OSError) as exc:
                log.warning("nats_claim_retry", session=session_id, error=repr(exc))
                await anyio.sleep(0.2)
        self.lost.pop(session_id, None)
        self.leases[session_id] = Lease(epoch, seq, 1, sent)
        log.info("nats_claimed", session=session_id, epoch=epoch, after=after, seq=seq)

    def renew(self) -> None:
        """Renew every lease this process holds now (a worker calls it every third of
        the ack wait): a session whose model is slow still shows its holder alive."""
        for sid in self.leases:
            if sid not in self.lost:
                self.put(Outgoing("", b"", {}, sid, lease=True))

    async def hold(self, session_id: str) -> None:
        """Return only while this process still holds the lease on ``session_id`` (at
        once when it holds none: a session that is not a worker's); :class:`LeaseLost`
        otherwise. Awaited before every model request and every tool call of a leased
        session, so nothing is asked or done for a session another worker took.

        Another worker claims a session only after reading it and then seeing no new
        message in it for half the ack wait (:meth:`rolecall.cluster.worker.Worker._stored`),
        so a lease message stored and sent less than :attr:`fence_s` (a quarter of the
        ack wait) ago proves the lease still held; older (the worker was paused, or cut
        off), a renewal is sent and its answer awaited, with everything of the session
        put before it."""
        lost = self.lost.get(session_id)
        if lost is not None:
            raise LeaseLost(lost)
        lease = self.leases.get(session_id)
        if lease is None or time.monotonic() - lease.confirmed < self.fence_s:
            return
        self.put(Outgoing("", b"", {}, session_id, lease=True))
        await self.flush(session_id)
        lost = self.lost.get(session_id)
        if lost is not None:
            raise LeaseLost(lost)

    def release(self, session_id: str) -> str | None:
        """The session ended here: no more lease on it; why it was lost, if it was."""
        self.leases.pop(session_id, None)
        return self.lost.pop(session_id, None)

    async def _stored_as(self, subject: str, msg_id: str) -> int | None:
        """The stream sequence of the last message on ``subject`` if it is ``msg_id``."""
        from nats.js.errors import NotFoundError

        try:
            last = await self.link.js.get_last_msg(EVENTS_STREAM, subject)
        except NotFoundError:
            return None
        if (last.headers or {}).get(H_MSG_ID) == msg_id:
            return int(last.seq or 0)
        return None

    def _framed(self, batch: list[Outgoing]) -> list[Outgoing]:
        """``batch`` with a renewal before each leased session's first message in it."""
        leases = self.leases
        if not leases:
            return [item for item in batch if not item.lease]
        out: list[Outgoing] = []
        renewed: set[str] = set()
        for item in batch:
            sid = item.session
            lease = leases.get(sid)
            if item.lease and (lease is None or sid in renewed):
                continue  # a renewal asked for (renew()): this batch renews it already
            if lease is not None and sid not in renewed:
                renewed.add(sid)
                headers = {
                    H_MSG_ID: f"{sid}:lease:{lease.epoch}:{lease.renewals}",
                    H_LEASE: lease.epoch,
                    H_EXPECT: str(lease.seq),
                }
                lease.renewals += 1
                payload = f'{{"session_id":"{sid}","lease":"{lease.epoch}"}}'.encode()
                out.append(Outgoing(lease_subject(sid), payload, headers, sid, lease=True))
            if not item.lease:
                out.append(item)
        return out

    async def _renewed(
        self, item: Outgoing, answer: dict[str, Any], sent: float
    ) -> Exception | None:
        """Settle the lease of ``item`` (a renewal sent at ``sent``) by the stream's
        ``answer``: None when settled (renewed, or lost), else the problem (the batch
        goes again)."""
        sid, lease = item.session, self.leases.get(item.session)
        if lease is None:
            return None
        error = answer.get("error")
        if error is None:
            lease.seq = int(answer["seq"])
            lease.confirmed = max(lease.confirmed, sent)
            return None
        if error.get("err_code") != WRONG_LAST:
            return RuntimeError(f"the NATS server refused a lease: {error.get('description')}")
        found = await self._stored_as(item.subject, item.headers[H_MSG_ID])
        if found is not None:  # this very renewal, sent before the connection was lost
            lease.seq = found
            return None
        self.lost[sid] = _lost(sid)
        log.warning("nats_session_lost", session=sid, epoch=lease.epoch, expected=lease.seq)
        return None

    async def run(self) -> None:
        queue = self._queue
        while queue or not self._closed:
            if not queue:
                await self._wakeup.wait()
                self._wakeup = anyio.Event()
                continue
            batch = [queue.popleft() for _ in range(min(len(queue), MAX_BATCH))]
            await self._publish(self._framed(batch), self.handed + len(batch))
            self.acked += len(batch)
            self._progress.set()
            self._progress = anyio.Event()

    async def _publish(self, batch: Sequence[Outgoing], handed: int) -> None:
        import asyncio

        from nats.errors import Error as NatsError

        nc, js = self.link.nc, self.link.js
        lost = self.lost
        while True:
            batch = [item for item in batch if item.session not in lost] if lost else batch
            if not batch:
                return
            # the last message that is not a renewal is acknowledged (renewals are answered)
            last = next((i for i in range(len(batch) - 1, -1, -1) if not batch[i].lease), -1)
            futures: list[Any] = []
            renewals: list[tuple[Outgoing, Any]] = []
            tokens: list[str] = []
            connection = nc.stats["reconnects"]
            sent = time.monotonic()
            try:
                # one acknowledgement per batch: the stream stores what one connection
                # sends in the order sent, so the last message's acknowledgement means
                # every message before it is stored too (message ids drop re-sent copies)
                for index, item in enumerate(batch):
                    if index == last:
                        futures.append(
                            await js.publish_async(
                                item.subject, item.payload, headers=dict(item.headers)
                            )
                        )
                    elif item.lease:  # answered to this publisher's inbox
                        self._tokens += 1
                        token = str(self._tokens)
                        tokens.append(token)
                        answer = asyncio.get_running_loop().create_future()
                        self._answers[token] = answer
                        renewals.append((item, answer))
                        futures.append(answer)
                        await nc.publish(
                            item.subject,
                            item.payload,
                            reply=f"{self._inbox}.{token}",
                            headers=item.headers,
                        )
                    else:
                        await nc.publish(item.subject, item.payload, headers=item.headers)
                if self.handed < handed:
                    self.handed = handed
                    self._progress.set()
                    self._progress = anyio.Event()
                self._awaited = futures
                with anyio.fail_after(ACK_TIMEOUT_S):
                    for future in futures:
                        await future
                problem: Exception | None = None
                for item, answer in renewals:
                    problem = await self._renewed(item, answer.result(), sent) or problem
                if problem is None and nc.stats["reconnects"] == connection:
                    return
                # sent over two connections: what the lost one carried may be lost
                # while the last message is stored, so the batch goes again
                problem = problem or ConnectionResetError("reconnected while sending")
            except (TimeoutError, NatsError, OSError) as exc:
                problem = exc
                for future in futures:
                    future.cancel()
            finally:
                self._awaited = []
                for token in tokens:  # an answer that never came is not awaited
                    self._answers.pop(token, None)
            self.resent += 1
            log.warning("nats_publish_retry", messages=len(batch), error=repr(problem))
            await anyio.sleep(0.2)

    async def flush(self, session_id: str | None = None) -> None:
        """Wait until every message put so far is acknowledged (stored); with
        ``session_id``, every message of that session put so far: the batches go in the
        order their messages were put, so those of sessions put after its last one are
        not waited for (a worker running many sessions)."""
        target = self.queued if session_id is None else self._last_of.get(session_id, 0)
        while self.acked < target:
            await self._progress.wait()
        if session_id is not None and self._last_of.get(session_id, 0) <= self.acked:
            self._last_of.pop(session_id, None)  # all of it stored: nothing to remember

    async def sent(self) -> None:
        """Wait until every message put so far is in nats-py's hands: on its way to the
        server (nats-py's writer, woken before this returns, sends it next)."""
        target = self.queued
        while self.handed < target:
            await self._progress.wait()

    @property
    def in_flight(self) -> bool:
        """A batch is in nats-py's hands and its acknowledgement awaited."""
        return self.acked < self.handed

    async def hand_over(self) -> None:
        """At a turn's end: hand what was put to nats-py now if no batch is waiting for
        its acknowledgement; otherwise it goes with the next batch, and this waits only
        when more than :data:`MAX_BATCH` messages are queued (a bounded queue for a
        session that runs ahead of the server)."""
        if not self.in_flight or len(self._queue) > MAX_BATCH:
            await self.sent()

    def close(self) -> None:
        """No more messages; :meth:`run` returns once the queued ones are acknowledged."""
        self._closed = True
        self._wakeup.set()


def message_size(payload: bytes, headers: dict[str, str] | None) -> int:
    """What a message counts against the server's ``max_payload``: its payload and its
    headers (nats-py checks only the payload; the server refuses the whole message and
    closes the connection, so it must be caught before it is sent)."""
    if not headers:
        return len(payload)
    return (
        len(payload) + 12 + sum(len(k.encode()) + len(v.encode()) + 4 for k, v in headers.items())
    )


def too_large(what: str, size: int, link: Link) -> str:
    """The error of a message over the server's ``max_payload``."""
    limit = link.nc.max_payload
    return (
        f"{what} is {size:,} bytes, over the {limit:,} bytes the NATS server at {link.url} "
        "accepts in one message (its max_payload): raise max_payload in the server's "
        "configuration (e.g. `max_payload: 8MB`, at most 64MB), or make it smaller"
    )


class PayloadTooLarge(StorageError):
    """An event of the session is larger than the NATS server accepts: the session pauses
    (stored here as it is), and the stream's copy with it (:meth:`NatsBus._cut`)."""


class NatsBus(EventBus):
    """A session's bus whose events are also published to the ``ROLECALL_EVENTS`` stream."""

    def __init__(
        self,
        session_id: str,
        publisher: Publisher,
        *,
        first_seq: int = 1,
        batch: str | None = None,
        run: int | None = None,
        epoch: str | None = None,
    ) -> None:
        super().__init__(session_id, first_seq=first_seq)
        self.publisher = publisher
        self.epoch = epoch or secrets.token_hex(3)  # this process's run of the session
        self.world_header: str | None = None  # set by attach(): sent with the first event
        self.checkpoint: Callable[[int], str] | None = None
        self._fixed: dict[str, str] = {}
        self._subjects: dict[type, str] = {}  # event class -> its subject in this session
        self.max_payload = publisher.link.nc.max_payload
        self.refused: str | None = None  # an event too large to publish: the session pauses
        if batch is not None:
            self._fixed[H_BATCH] = batch
            self._fixed[H_RUN] = str(run or 0)

    def deliver(self, *envelopes: Envelope) -> None:
        super().deliver(*envelopes)
        if not envelopes:
            return
        last = len(envelopes) - 1
        committed = any(e.event.topic != "sse" for e in envelopes)
        sid, epoch, fixed, put = self.session_id, self.epoch, self._fixed, self.publisher.put
        subjects = self._subjects
        for index, envelope in enumerate(envelopes):
            event = envelope.event
            headers = {H_MSG_ID: f"{sid}:{envelope.seq}:{epoch}"}
            if fixed:
                headers.update(fixed)
            if self.world_header is not None:
                headers[H_WORLD], self.world_header = self.world_header, None
            if index == last and committed and self.checkpoint is not None:
                headers[H_CHECKPOINT] = self.checkpoint(envelope.seq)
            subject = subjects.get(type(event))
            if subject is None:
                subject = subjects[type(event)] = event_subject(sid, event.topic, event.type)
            payload = envelope.to_json().encode()
            if len(payload) + 4 * sum(len(v) for v in headers.values()) > self.max_payload:
                size = message_size(payload, headers)  # exactly, only when it may be over
                if size > self.max_payload:
                    subject, payload = self._cut(envelope, subject, payload, headers, size)
            put(Outgoing(subject, payload, headers, sid))

    def _cut(
        self,
        envelope: Envelope,
        subject: str,
        payload: bytes,
        headers: dict[str, str],
        size: int,
    ) -> tuple[str, bytes]:
        """``envelope``'s message made to fit (``headers`` changed in place): the first
        such event pauses the session (:attr:`refused`, raised by the hooks of
        :func:`attach`). Its checkpoint loses what is too large to travel (the messages,
        records and drafts over an eighth of the limit, the turn with tools in progress:
        :func:`_trimmed`); an event still too large is replaced by a ``system/error`` of
        the same ``seq`` saying so. So the stream's copy ends paused, with the error,
        where the session paused, and readers following it never wait for the ``seq``."""
        sid, event = self.session_id, envelope.event
        problem = too_large(
            f"event {envelope.seq} of session {sid} ({event.topic}/{event.type}, "
            "with the session's state it carries)",
            size,
            self.publisher.link,
        )
        if self.refused is None:
            self.refused = problem
            log.error("nats_event_too_large", session=sid, seq=envelope.seq, size=size)
        checkpoint = headers.pop(H_CHECKPOINT, None)
        if checkpoint is not None:
            small = _trimmed(checkpoint, self.max_payload // 2)
            if small is not None:
                headers[H_CHECKPOINT] = small
        if message_size(payload, headers) <= self.max_payload:
            return subject, payload
        stand_in = Envelope(
            envelope.seq,
            sid,
            envelope.ts,
            ErrorEvent(error=f"not published on NATS: {problem}", source="nats"),
        )
        return event_subject(sid, "system", "error"), stand_in.to_json().encode()


def _trimmed(checkpoint: str, budget: int) -> str | None:
    """``checkpoint`` without what cannot travel in ``budget`` bytes: each message,
    execution record and draft over an eighth of it, and the turn with tools in progress
    when the state is over a quarter (it holds the calls' results: a session resumed
    from the stream asks the model again for that turn). None if still too large."""
    cp = json.loads(checkpoint)
    for key in ("messages", "records", "drafts"):
        cp[key] = [item for item in cp[key] if len(json.dumps(item)) <= budget // 8]
    if len(json.dumps(cp["state"])) > budget // 4:
        (cp["state"].get("extra") or {}).pop("tool_turn", None)
    out = json.dumps(cp, ensure_ascii=False, separators=(",", ":"))
    return out if len(out.encode()) <= budget else None


def attach(session: Dialogue, bus: NatsBus, *, world_source: str | None = None) -> None:
    """Give ``bus`` what its headers carry: the world, and the checkpoints of ``session``.

    Before a model is asked for the next message the session waits until the stream has
    stored every turn before it, so a session taken over from the stream never asks a
    model again for a committed turn. A repeatable model (``scripted``, ``offline``: the
    same reply again, at no cost) does not wait: the stream's acknowledgements follow
    its turns, and a session taken over regenerates, identically and for free, the turns
    the stream did not hold yet.

    When a turn ends, its events are handed to nats-py (:meth:`Publisher.hand_over`),
    so that the next turn's decision and prompt are made while they travel.
    """
    from rolecall.storage.document import state_json, world_dict

    state = session.state
    sent = {
        "messages": len(state.transcript.messages),
        "records": len(state.execution_log),
        "drafts": len(state.drafts),
    }
    if bus.last_seq == 0:
        bus.world_header = json.dumps(
            {
                "world": world_dict(session.world),
                "world_source": world_source,
                "model_override": session.model_override,
                "created_at": session.clock().isoformat(),
            },
            ensure_ascii=False,
        )
        size = message_size(b"", {H_WORLD: bus.world_header})
        if size > bus.max_payload - 4096:  # and the first event's own JSON and headers
            raise PayloadTooLarge(
                too_large(
                    f"the world '{session.world.name}' (sent with the session's first event)",
                    size,
                    bus.publisher.link,
                )
            )

    def checkpoint(seq: int) -> str:
        messages = state.transcript.messages[sent["messages"] :]
        records = state.execution_log[sent["records"] :]
        drafts = state.drafts[sent["drafts"] :]
        sent.update(
            messages=sent["messages"] + len(messages),
            records=sent["records"] + len(records),
            drafts=sent["drafts"] + len(drafts),
        )

        def joined(items: Sequence[BaseModel]) -> str:
            return ",".join(item.model_dump_json() for item in items)

        return (
            f'{{"last_seq":{seq},"state":{state_json(state)},"messages":[{joined(messages)}],'
            f'"records":[{joined(records)}],"drafts":[{joined(drafts)}]}}'
        )

    bus.checkpoint = checkpoint

    publisher = bus.publisher

    def refused() -> None:
        if bus.refused is not None:
            raise PayloadTooLarge(bus.refused)
        lost = publisher.lost.get(bus.session_id)
        if lost is not None:
            raise LeaseLost(lost)

    async def on_its_way(_: Dialogue) -> None:
        refused()
        await publisher.hand_over()

    async def before_request() -> None:
        refused()
        await publisher.flush(bus.session_id)  # this session's turns, not the others'
        refused()  # the flush itself may find the session claimed by another: nothing is asked

    async def still_held(before: str) -> None:
        refused()
        if before == "tool":  # the call is in the stream before it runs: a worker taking
            await publisher.flush(bus.session_id)  # the session over never runs it again
        await publisher.hold(bus.session_id)

    session.turn_hooks.append(on_its_way)
    session.request_hooks.append(before_request)
    session.fence_hooks.append(still_held)
