"""The NATS publisher's hand-over at a turn's end, against a link whose acknowledgements
the test releases (what JetStream would do, slowed down at will)."""

from __future__ import annotations

import asyncio
from typing import Any

import anyio
import anyio.lowlevel

from rolecall.nats.bus import MAX_BATCH, Outgoing, Publisher


class HeldAcks:
    """nats-py's client and JetStream context as the publisher uses them; each batch's
    acknowledgement waits until the test releases it."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.acks: list[asyncio.Future[None]] = []
        self.nc, self.js = self, self
        self.on_reconnect: list[Any] = []
        self.stats = {"reconnects": 0}

    async def publish(self, subject: str, payload: bytes, headers: Any = None) -> None:
        self.sent.append(subject)

    async def publish_async(
        self, subject: str, payload: bytes, headers: Any = None
    ) -> asyncio.Future[None]:
        self.sent.append(subject)
        self.acks.append(asyncio.get_running_loop().create_future())
        return self.acks[-1]


def put(publisher: Publisher, n: int) -> None:
    for i in range(n):
        publisher.put(Outgoing(f"rolecall.s.sse.chunk{i}", b"{}", {}))


async def settle() -> None:
    for _ in range(10):
        await anyio.lowlevel.checkpoint()


def test_a_turn_hands_over_when_idle_goes_on_while_a_batch_travels_and_waits_past_a_full_queue() -> (
    None
):
    link = HeldAcks()

    async def main() -> None:
        publisher = Publisher(link)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(publisher.run)
            # idle: the turn's events are in nats-py's hands when the hand-over returns
            put(publisher, 3)
            await publisher.hand_over()
            assert publisher.handed == 3 and len(link.sent) == 3
            assert publisher.in_flight and publisher.acked == 0
            # a batch travels: the next turn goes on, its events wait for the next batch
            put(publisher, 3)
            await publisher.hand_over()
            assert publisher.handed == 3
            # more than a batch queued: the turn waits until all of it is handed over
            put(publisher, MAX_BATCH)
            waited = anyio.Event()

            async def turn_end() -> None:
                await publisher.hand_over()
                waited.set()

            tg.start_soon(turn_end)
            await settle()
            assert not waited.is_set()
            link.acks[0].set_result(None)  # the first batch stored: a full batch leaves
            await settle()
            assert publisher.acked == 3 and publisher.handed == 3 + MAX_BATCH
            assert not waited.is_set()  # 3 messages still queued
            link.acks[1].set_result(None)
            await settle()
            assert waited.is_set() and publisher.handed == publisher.queued == 6 + MAX_BATCH
            link.acks[2].set_result(None)
            await publisher.flush()
            assert publisher.acked == publisher.queued and not publisher.in_flight
            publisher.close()

    anyio.run(main)


def test_a_session_waits_for_its_own_messages_not_for_those_put_after_them() -> None:
    """A worker runs many sessions on one publisher: before its next request a session
    waits until the stream holds its own turns, not the turns other sessions ended since
    (they go in a later batch)."""
    link = HeldAcks()

    async def main() -> None:
        publisher = Publisher(link)  # type: ignore[arg-type]
        async with anyio.create_task_group() as tg:
            tg.start_soon(publisher.run)
            for i in range(3):
                publisher.put(Outgoing(f"rolecall.a.sse.chunk{i}", b"{}", {}, "a"))
            await publisher.hand_over()  # a's turn in flight
            for i in range(3):
                publisher.put(Outgoing(f"rolecall.b.sse.chunk{i}", b"{}", {}, "b"))
            done: list[str] = []

            async def flush(session_id: str | None) -> None:
                await publisher.flush(session_id)
                done.append(session_id or "all")

            for who in ("a", "b", None):
                tg.start_soon(flush, who)
            await settle()
            assert done == []  # nothing stored yet
            link.acks[0].set_result(None)  # a's batch stored; b's goes next
            await settle()
            assert done == ["a"]
            link.acks[1].set_result(None)
            await settle()
            assert sorted(done) == ["a", "all", "b"]
            await publisher.flush("c")  # nothing of it was put: nothing to wait for
            publisher.close()

    anyio.run(main)
