"""A model failing in chat: the session pauses, the reply stays due, nothing is retried blindly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager

import anyio
import pytest

import rolecall
from rolecall.errors import ProviderUnavailable
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from tests.helpers import Recorder, opened, world_from

pytestmark = pytest.mark.anyio


class Flaky:
    """Fails its first ``failures`` calls, then answers ``ok <n>``."""

    name = "flaky"

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        yield TextDelta("partial ")
        if self.calls <= self.failures:
            raise ProviderUnavailable("flaky: provider went away", model="flaky")
        yield TextDelta(f"ok {self.calls}")
        yield Usage(1, 1)


def flaky_session(model: Flaky) -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    world = world_from({"name": "f", "model": "flaky", "roles": [{"id": "a"}, {"id": "b"}]})
    return opened(world, models={"flaky": model})


async def test_a_failed_generation_pauses_and_is_not_retried_in_a_loop() -> None:
    model = Flaky(failures=10**9)
    async with flaky_session(model) as (session, rec):
        with anyio.fail_after(2):
            await session.say("hello")
        assert model.calls == 1
        assert session.status.state == "paused" and session.status.pause_reason == "error"
        assert [(p.agent, p.message_id) for p in session.status.pending] == [
            ("a", "m1"),
            ("b", "m1"),
        ]
        assert len(rec.of("sse", "error")) == 1
        assert session.status.turn_counts.get("a", 0) == 0  # a failed call is not counted
