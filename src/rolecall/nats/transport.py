"""Opening the NATS transport for a command: the connection, the publisher, the buses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio

from rolecall.nats.bus import NatsBus, Publisher
from rolecall.nats.link import Link, connect, subject_token


@dataclass
class Transport:
    link: Link
    publisher: Publisher

    def bus(
        self,
        session_id: str,
        first_seq: int = 1,
        *,
        batch: str | None = None,
        run: int | None = None,
        epoch: str | None = None,
    ) -> NatsBus:
        subject_token(session_id, "session id")  # before the session starts, not at its first event
        return NatsBus(
            session_id, self.publisher, first_seq=first_seq, batch=batch, run=run, epoch=epoch
        )


@asynccontextmanager
async def open_transport(url: str, *, name: str = "rolecall") -> AsyncIterator[Transport]:
    """Connected, publishing; on the way out every event handed over is stored first."""
    async with connect(url, name=name) as link, anyio.create_task_group() as tg:
        publisher = Publisher(link)
        tg.start_soon(publisher.run)
        try:
            yield Transport(link, publisher)
        finally:
            publisher.close()
