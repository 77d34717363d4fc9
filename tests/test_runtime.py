from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
import pytest

from rolecall.errors import ProviderUnavailable
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.runtime import Dialogue
from tests.backends import anyio_backend  # noqa: F401 - asyncio and trio
from tests.helpers import Recorder, run_flow, scripted_world, world_from

pytestmark = pytest.mark.anyio


class CapturingModel:
    """Records every request; says 'ok <n>'; can fail or stall on chosen calls."""

    name = "capture"

    def __init__(self, fail_on: set[int] | None = None, stall_on: set[int] | None = None) -> None:
        self.requests: list[GenerationRequest] = []
        self.fail_on = fail_on or set()
        self.stall_on = stall_on or set()

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        call = len(self.requests)
        yield TextDelta("partial ")
        if call in self.fail_on:
            raise ProviderUnavailable("capture: provider went away", model="capture")
        if call in self.stall_on:
            await anyio.sleep(30)
        yield TextDelta(f"ok {call}")
        yield Usage(10, 2)


def registry_with(model: CapturingModel) -> ModelRegistry:
    registry = ModelRegistry()
    registry.register("capture", model)
    return registry


async def test_scripted_roles_say_their_script_with_placeholders() -> None:
    world = world_from(
        {
            "name": "s",
            "topic": "tides",
            "model": "scripted",
            "roles": [
                {
                    "id": "alice",
                    "script": ["{speaker} opens turn {turn} on {topic}", "alice again ({n})"],
                },
                {"id": "bob", "script": ["{speaker} to {target}: #{n} at m{turn} {unknown}"]},
            ],
            "flow": {
                "steps": [
                    {"id": "a", "speaker": "alice", "reply_to": "none"},
                    {"id": "b", "speaker": "bob", "loop": {"to": "a", "max": 2}},
                ]
            },
        }
    )
    _, rec = await run_flow(world)
    assert [m.content for m in rec.of("messages", "message")] == [
        "alice opens turn 1 on tides",
        "bob to alice: #1 at m2 {unknown}",
        "alice again (2)",
        "bob to alice: #2 at m4 {unknown}",
    ]


async def test_stream_events_precede_the_message_and_chunks_join_to_it() -> None:
    world = scripted_world([{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}])
    _, rec = await run_flow(world)
    kinds = [(e.event.topic, e.event.type) for e in rec.events]
    assert kinds[:3] == [("world", "session"), ("world", "agent"), ("world", "agent")]
    first = kinds.index(("sse", "start"))
    assert kinds[first : first + 4] == [
        ("sse", "start"),
        ("sse", "chunk"),
        ("sse", "chunk"),
        ("sse", "chunk"),
    ]
    chunks = "".join(c.delta for c in rec.of("sse", "chunk") if c.message_id == "m1")
    assert chunks == rec.of("messages", "message")[0].content
    assert kinds[-1] == ("world", "stop")
    assert [e.seq for e in rec.events] == list(range(1, len(rec.events) + 1))
    states = [e.state for e in rec.of("world", "session")]
    assert states == ["created", "running", "finished"]


async def test_reply_targets_are_recorded_and_quoted_once() -> None:
    model = CapturingModel()
    world = world_from(
        {
            "name": "r",
            "topic": "t",
            "model": "capture",
            "settings": {"memory_window": 1},
            "roles": [{"id": "a"}, {"id": "b"}, {"id": "c"}],
            "flow": {
                "steps": [
                    {"id": "one", "speaker": "a", "reply_to": "none"},
                    {"id": "two", "speaker": "b"},
                    {"id": "three", "speaker": "c", "reply_to": {"step": "one"}},
                    {"id": "four", "speaker": "a", "reply_to": {"message": "m2"}},
                    {"id": "five", "speaker": "b", "reply_to": {"role": "c"}},
                ]
            },
        }
    )
    _, rec = await run_flow(world, models=registry_with(model))
    msgs = rec.of("messages", "message")
    assert [(m.reply_to, m.target) for m in msgs] == [
        (None, None),
        ("m1", "a"),
        ("m1", "a"),
        ("m2", "b"),
        ("m3", "c"),
    ]
    # step three answers m1, which is older than the 1-entry memory window: still quoted
    prompt = model.requests[2].messages
    quoted = [m for m in prompt if "partial ok 1" in m.content]
    assert len(quoted) == 1 and "You are answering" in quoted[0].content
    assert prompt[0].role == "system" and "Topic: t" in prompt[0].content
    # step two answers m1, which IS in the window: it must not appear twice
    second = model.requests[1].messages
    assert sum("partial ok 1" in m.content for m in second) == 1


async def test_a_missing_reply_target_warns_and_gives_no_target() -> None:
    world = scripted_world(
        [{"id": "s1", "speaker": "a", "reply_to": {"role": "b"}}, {"id": "s2", "speaker": "b"}]
    )
    _, rec = await run_flow(world)
    assert rec.of("messages", "message")[0].reply_to is None
    warnings = rec.of("system", "warning")
    assert len(warnings) == 1 and "b has not spoken yet" in warnings[0].message


async def test_one_generation_at_a_time_even_with_concurrent_callers() -> None:
    active = 0
    peak = 0

    class Slow:
        name = "slow"

        async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await anyio.sleep(0.01)
            yield TextDelta("x")
            active -= 1
            yield Usage(1, 1)

    registry = ModelRegistry()
    registry.register("slow", Slow())
    world = world_from(
        {"name": "c", "model": "slow", "roles": [{"id": "a"}, {"id": "b"}, {"id": "c"}]}
    )
    session = Dialogue(world, models=registry)
    async with anyio.create_task_group() as tg:
        for text in ("one", "two", "three"):
            tg.start_soon(session.say, text)
    assert peak == 1
    assert session.state.transcript.agent_turns == 9


async def test_provider_failure_pauses_with_error_and_resume_continues() -> None:
    model = CapturingModel(fail_on={2})
    world = world_from(
        {
            "name": "f",
            "model": "capture",
            "roles": [{"id": "a"}, {"id": "b"}],
            "flow": {
                "steps": [
                    {"id": "s1", "speaker": "a"},
                    {"id": "s2", "speaker": "b"},
                    {"id": "s3", "speaker": "a"},
                ]
            },
        }
    )
    session = Dialogue(world, models=registry_with(model))
    rec = Recorder(session)
    await session.run()
    assert session.state.state == "paused"
    assert rec.of("world", "session")[-1].reason == "error"
    assert rec.of("sse", "error")[0].partial == "partial "
    assert [d.content for d in session.state.drafts] == ["partial "]
    assert len(session.state.transcript) == 1  # the failed message is not in the history
    assert rec.of("system", "error")[0].error == "capture: provider went away"
    await session.run()
    assert rec.steps() == ["s1", "s2", "s3"]
    assert [m.message_id for m in rec.of("messages", "message")] == ["m1", "m2", "m3"]
    assert rec.stop().reason == "flow_end"


async def test_cancelling_a_generation_keeps_a_draft_and_pauses() -> None:
    model = CapturingModel(stall_on={1})
    world = world_from(
        {
            "name": "x",
            "model": "capture",
            "roles": [{"id": "a"}],
            "flow": {"steps": [{"id": "s1", "speaker": "a"}]},
        }
    )
    session = Dialogue(world, models=registry_with(model))
    rec = Recorder(session)
    async with anyio.create_task_group() as tg:
        tg.start_soon(session.run)
        while not session.generator.busy:  # noqa: ASYNC110 - polling a plain attribute
            await anyio.sleep(0.001)
        await anyio.sleep(0.01)
        assert session.interrupt()
    assert session.state.state == "paused"
    assert session.state.drafts[0].reason == "cancelled"
    assert session.state.drafts[0].content == "partial "
    assert len(session.state.transcript) == 0
    await session.run()
    assert rec.stop().reason == "flow_end"
    assert [m.content for m in rec.of("messages", "message")] == ["partial ok 2"]


async def test_human_mention_during_a_flow_is_one_interjection() -> None:
    world = scripted_world([{"id": f"s{i}", "speaker": "a"} for i in range(1, 4)], roles=["a", "b"])
    session = Dialogue(world)
    rec = Recorder(session)
    await session.step()
    await session.say("hey @b what do you think?")
    await session.run()
    msgs = rec.of("messages", "message")
    assert [(m.sender, m.step_id) for m in msgs] == [
        ("a", "s1"),
        ("human", None),
        ("b", "interjection"),
        ("a", "s2"),
        ("a", "s3"),
    ]
    assert msgs[2].reply_to == "m2" and msgs[2].target == "human"
    assert rec.steps() == ["s1", "interjection", "s2", "s3"]


async def test_pause_and_stop_take_effect_after_the_current_turn() -> None:
    world = scripted_world([{"id": f"s{i}", "speaker": "a"} for i in range(1, 6)])
    session = Dialogue(world)
    rec = Recorder(session)

    def pause_after_two(env) -> None:  # type: ignore[no-untyped-def]
        if env.event.type == "message" and env.event.message_id == "m2":
            session.pause()

    session.bus.subscribe(pause_after_two, "messages")
    await session.run()
    assert session.state.state == "paused" and len(rec.steps()) == 2
    session.stop()
    assert rec.stop().reason == "manual"
    await session.run()
    assert len(rec.steps()) == 2


async def test_hard_cap_applies_in_chat_too() -> None:
    world = world_from(
        {
            "name": "c",
            "model": "scripted",
            "settings": {"max_turns": 3, "turn_limit": 50},
            "roles": [{"id": "a", "script": ["@b go"]}, {"id": "b", "script": ["@a go"]}],
        }
    )
    session = Dialogue(world)
    rec = Recorder(session)
    await session.say("@a start")
    assert session.state.transcript.agent_turns == 3
    assert rec.stop().reason == "max_turns"
