"""Agents on the bus: each role is a participant asking for the floor (docs/architecture.md).

Every agent subscribes to the committed messages; on each message the session will answer
(a human's, an agent's chat reply) it asks the floor scheduler for a turn by the routing
rules; the scheduler grants turns one at a time in role order. A flow's step messages are
answered by nobody, so nobody decides anything about them; each answered message is
routed once, for every agent and the unknown-name notice together.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest
from pydantic import ValidationError

import rolecall
from rolecall.bus import AgentEvent, Envelope
from rolecall.routing import decide
from rolecall.storage.in_memory import InMemoryStore
from rolecall.storage.port import TurnBatch
from tests.helpers import Recorder, opened, world_from

pytestmark = pytest.mark.anyio


def chat(
    scripts: dict[str, list[str]], *, store: InMemoryStore | None = None, **settings: Any
) -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    return opened(
        world_from(
            {
                "name": "chat",
                "model": "scripted",
                "settings": settings,
                "roles": [{"id": rid, "script": lines} for rid, lines in scripts.items()],
            }
        ),
        **({} if store is None else {"store": store}),
    )


def flow_session() -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    return opened(
        world_from(
            {
                "name": "f",
                "model": "scripted",
                "roles": [{"id": "a", "script": ["a {n}"]}, {"id": "b", "script": ["b {n}"]}],
                "flow": {
                    "steps": [
                        {"id": "s1", "speaker": "a"},
                        {"id": "s2", "speaker": "b"},
                        {"id": "s3", "speaker": "a"},
                    ]
                },
            }
        )
    )


async def test_replies_come_in_role_order() -> None:
    async with chat({"a": ["a: @all go"], "b": ["@human b done"], "c": ["@human c done"]}) as (
        session,
        rec,
    ):
        await session.say("hello everyone")
        senders = [(m.sender, m.reply_to) for m in rec.of("messages", "message")]
        # the human's broadcast: a, b, c in role order; then the answers a's @all drew
        assert senders == [
            ("human", None),
            ("a", "m1"),
            ("b", "m1"),
            ("c", "m1"),
            ("b", "m2"),
            ("c", "m2"),
        ]


async def test_the_replies_owed_are_stored_before_the_first_is_generated() -> None:
    stored: list[list[tuple[str, str]]] = []

    class Watched(InMemoryStore):
        async def commit(self, batch: TurnBatch) -> None:
            pending = json.loads(batch.state_json)["pending"]
            stored.append([(p["agent"], p["message_id"]) for p in pending])
            await super().commit(batch)

    async with chat({"a": ["a says"], "b": ["b says"]}, store=Watched()) as (session, _):
        await session.say("hi")
    # the opening (created, joined, running), the human message, then the requests it
    # drew, then a's reply (b still owed), b's
    assert stored[:3] == [[], [], [("a", "m1"), ("b", "m1")]]
    assert stored[3] == [("b", "m1")]


async def test_a_flow_admits_one_direct_address_as_an_interjection() -> None:
    async with flow_session() as (session, rec):
        await session.step()  # the flow has started: human messages interject
        await session.say("@b what do you think?")
        last = session.transcript[-1]
        assert (last.sender, last.reply_to, last.step_id) == ("b", "m2", "interjection")
        await session.say("everyone?")  # a broadcast does not interject in a flow
        answered = {m.reply_to for m in rec.of("messages", "message")}
        assert "m4" not in answered and session.status.pending == []


async def test_each_answered_message_is_routed_once_and_flow_steps_never(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One decision per message, read by every agent and by the unknown-name notice; a
    step's message, which nobody answers, is not routed at all."""
    routed: list[str] = []
    mention = decide.first_mention

    def counted(text: str) -> str | None:
        routed.append(text)
        return mention(text)

    monkeypatch.setattr(decide, "first_mention", counted)
    async with flow_session() as (session, rec):
        await session.step()
        await session.step()
        assert routed == []  # m1, m2: flow steps of a and b
        await session.say("@zed are you there?")  # an unknown name: a notice, nobody answers
        assert [w.message for w in rec.of("system", "warning")] == [
            "nobody answered: no agent 'zed' (agents: a, b)"
        ]
        assert routed == ["@zed are you there?"]

    async with chat({"a": ["@b ping"], "b": ["@human pong"], "c": ["c"]}) as (session, _):
        routed.clear()
        await session.say("@a go")
        texts = [m.content for m in session.transcript]
        assert texts == ["@a go", "@b ping", "@human pong"]
        assert routed == texts  # three agents, the notice: each message routed once


async def test_only_one_generation_at_a_time() -> None:
    scripts = {"a": ["@b one"], "b": ["@c two"], "c": ["@a three"]}
    async with chat(scripts, turn_limit=3) as (session, _):
        streams: list[tuple[str, str]] = []

        def on_stream(envelope: Envelope) -> None:
            if envelope.event.type in ("start", "end", "error"):
                streams.append((envelope.event.type, envelope.event.sender))  # type: ignore[union-attr]

        session.bus.subscribe(on_stream, "sse")
        await session.say("go")
        assert len(streams) >= 6
        # every start is followed by its own end before the next start
        assert streams[0::2] == [("start", sender) for _, sender in streams[1::2]]
        assert streams[1::2] == [("end", sender) for _, sender in streams[0::2]]


async def test_agents_join_when_the_session_is_created_and_never_leave() -> None:
    """world/agent: joined per role, edited when a memory is cleared; no "left" action."""
    async with chat({"a": ["a says"], "b": ["b says"]}) as (session, rec):
        await session.say("hi")
        session.forget("b")
        session.stop()
        changes = [(e.agent, e.action) for e in rec.of("world", "agent")]
        assert changes == [("a", "joined"), ("b", "joined"), ("b", "edited")]
        with pytest.raises(ValidationError, match="action"):
            AgentEvent(agent="a", action="left")  # type: ignore[arg-type]
