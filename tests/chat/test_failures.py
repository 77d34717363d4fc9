"""A model failing in chat: the session pauses, the reply stays due, nothing is retried blindly."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from rolecall.errors import ProviderUnavailable
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.runtime import Dialogue
from tests.helpers import Recorder, world_from

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


def flaky_session(model: Flaky) -> tuple[Dialogue, Recorder]:
    registry = ModelRegistry()
    registry.register("flaky", model)
    world = world_from({"name": "f", "model": "flaky", "roles": [{"id": "a"}, {"id": "b"}]})
    session = Dialogue(world, models=registry)
    return session, Recorder(session)


async def test_a_failed_generation_pauses_and_is_not_retried_in_a_loop() -> None:
    model = Flaky(failures=10**9)
    session, rec = flaky_session(model)
    with anyio.fail_after(2):
        await session.say("hello")
    assert model.calls == 1
    assert session.state.state == "paused" and session.state.pause_reason == "error"
    assert [(p.agent, p.message_id) for p in session.state.pending] == [("a", "m1"), ("b", "m1")]
    assert len(rec.of("sse", "error")) == 1
    assert session.state.turn_counts.get("a", 0) == 0  # a failed call is not counted
