"""Agents on the bus: each role is a participant asking for the floor (docs/architecture.md).

Every agent subscribes to the four topics; on each committed message it asks the floor
scheduler for a turn (or declines) by the routing rules; the scheduler grants turns one
at a time in role order. A participant that answers later (another transport) is waited
for, and the order is still the role order.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from rolecall.bus import Envelope, MessageEvent
from rolecall.floor import FloorGrant, FloorRequest
from rolecall.runtime import Dialogue
from tests.helpers import Recorder, world_from

pytestmark = pytest.mark.anyio


def chat(scripts: dict[str, list[str]], **settings: Any) -> Dialogue:
    return Dialogue(
        world_from(
            {
                "name": "chat",
                "model": "scripted",
                "settings": settings,
                "roles": [{"id": rid, "script": lines} for rid, lines in scripts.items()],
            }
        )
    )


def watched(session: Dialogue) -> list[tuple[str, str, str]]:
    """Every floor request and grant, as (what, agent, message id), in order."""
    seen: list[tuple[str, str, str]] = []

    def watch(item: FloorRequest | FloorGrant) -> None:
        what = "request" if isinstance(item, FloorRequest) else "grant"
        seen.append((what, item.agent, item.message_id))

    session.floor.watch(watch)
    return seen


async def test_each_agent_learns_from_all_four_topics() -> None:
    session = chat({"a": ["@b ping {n}"], "b": ["@a pong {n}"], "c": ["c here"]}, turn_limit=2)
    await session.say("@a start")
    a, b, c = (session.agents[rid] for rid in ("a", "b", "c"))
    size = len(session.state.transcript)
    # messages: every committed message is in each agent's memory
    assert [agent.remembered for agent in (a, b, c)] == [size, size, size]
    assert a.last_message_id == session.state.transcript.messages[-1].id
    # sse: each saw its own generations start, and nothing is streaming now
    assert (a.generations, b.generations, c.generations) == (2, 2, 0)
    assert a.streaming is None
    # system: a reached its turn limit and was told so; the others were not
    assert (a.limit_notices, b.limit_notices, c.limit_notices) == (1, 0, 0)
    # world: the session's lifecycle, and a memory edit
    assert {agent.session_state for agent in (a, b, c)} == {session.state.state}
    session.forget("b")
    assert (b.remembered, a.remembered) == (0, size)
    session.stop()
    assert a.session_state == "finished"


async def test_floor_requests_and_grants_come_in_role_order() -> None:
    session = chat({"a": ["a: @all go"], "b": ["@human b done"], "c": ["@human c done"]})
    seen = watched(session)
    rec = Recorder(session)
    await session.say("hello everyone")
    assert seen == [
        # the human's broadcast: everyone asks, in role order, then a speaks first
        ("request", "a", "m1"),
        ("request", "b", "m1"),
        ("request", "c", "m1"),
        ("grant", "a", "m1"),
        # a's @all: the others ask to answer it
        ("request", "b", "m2"),
        ("request", "c", "m2"),
        ("grant", "b", "m1"),
        ("grant", "c", "m1"),
        ("grant", "b", "m2"),
        ("grant", "c", "m2"),
    ]
    senders = [(m.sender, m.reply_to) for m in rec.of("messages", "message")]
    assert senders == [
        ("human", None),
        ("a", "m1"),
        ("b", "m1"),
        ("c", "m1"),
        ("b", "m2"),
        ("c", "m2"),
    ]


async def test_the_replies_owed_are_stored_before_the_first_is_generated() -> None:
    session = chat({"a": ["a says"], "b": ["b says"]})
    stored: list[list[tuple[str, str]]] = []

    class Store:
        async def commit(self, s: Dialogue) -> None:
            stored.append([(p.agent, p.message_id) for p in s.state.pending])

    session.store = Store()
    await session.say("hi")
    # the opening (created, joined, running), the human message, then the requests it
    # drew, then a's reply (b still owed), b's
    assert stored[:3] == [[], [], [("a", "m1"), ("b", "m1")]]
    assert stored[3] == [("b", "m1")]


async def test_a_flow_admits_one_direct_address_as_an_interjection() -> None:
    session = Dialogue(
        world_from(
            {
                "name": "f",
                "model": "scripted",
                "roles": [{"id": "a", "script": ["a {n}"]}, {"id": "b", "script": ["b {n}"]}],
                "flow": {"steps": [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}]},
            }
        )
    )
    seen = watched(session)
    await session.step()  # the flow has started: human messages interject
    await session.say("@b what do you think?")
    assert ("request", "b", "m2") in seen
    assert seen[-1] == ("grant", "b", "m2")
    assert session.state.transcript.messages[-1].step_id == "interjection"
    await session.say("everyone?")  # a broadcast does not interject in a flow
    assert [g for g in seen if g[0] == "grant" and g[2] != "m2"] == []


async def test_only_one_generation_at_a_time() -> None:
    session = chat({"a": ["@b one"], "b": ["@c two"], "c": ["@a three"]}, turn_limit=3)
    streams: list[tuple[str, str]] = []
    at_grant: list[str | None] = []

    def on_stream(envelope: Envelope) -> None:
        if envelope.event.type in ("start", "end", "error"):
            streams.append((envelope.event.type, envelope.event.sender))  # type: ignore[union-attr]

    session.bus.subscribe(on_stream, "sse")
    session.floor.watch(
        lambda item: (
            at_grant.append(session.agents["a"].streaming) if isinstance(item, FloorGrant) else None
        )
    )
    await session.say("go")
    assert len(streams) >= 6
    # every start is followed by its own end before the next start
    assert streams[0::2] == [("start", sender) for _, sender in streams[1::2]]
    assert streams[1::2] == [("end", sender) for _, sender in streams[0::2]]
    # the floor is granted only while nobody is streaming
    assert at_grant and set(at_grant) == {None}


async def test_a_participant_that_answers_later_is_waited_for_and_keeps_its_place() -> None:
    """The seam of an agent on another transport: it answers the floor asynchronously."""
    session = chat({"a": ["a says"], "b": ["b says"]})
    session.agents["a"].detach()  # a takes part from "elsewhere" instead
    send, inbox = anyio.create_memory_object_stream[MessageEvent](100)

    def remote_a(envelope: Envelope) -> None:  # what a transport forwards to a
        assert isinstance(envelope.event, MessageEvent)
        send.send_nowait(envelope.event)

    session.bus.subscribe(remote_a, "messages")

    async def a_elsewhere() -> None:  # answers each message a little later
        async for event in inbox:
            await anyio.sleep(0.05)
            wants = event.sender == "human"
            request = FloorRequest("a", event.message_id, "broadcast") if wants else None
            session.floor.answer("a", event.message_id, request)

    with send, inbox, anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(a_elsewhere)
            await session.say("hi")
            tg.cancel_scope.cancel()
    replies = [m.sender for m in session.state.transcript.messages]
    assert replies == ["human", "a", "b"]  # a's late request still comes first


async def test_a_participant_that_never_answers_counts_as_declining() -> None:
    session = chat({"a": ["a says"], "b": ["b says"]})
    session.agents["a"].detach()
    session.floor.answer_timeout = 0.05
    with anyio.fail_after(10):
        await session.say("hi")
    assert [m.sender for m in session.state.transcript.messages] == ["human", "b"]


async def test_an_answer_from_a_stranger_is_refused() -> None:
    session = chat({"a": ["a says"]})
    with pytest.raises(ValueError, match="'zed' is not a participant"):
        session.floor.answer("zed", "m1", None)
    with pytest.raises(ValueError, match="answered 'm1' with another's request"):
        session.floor.answer("a", "m1", FloorRequest("a", "m2", "broadcast"))
