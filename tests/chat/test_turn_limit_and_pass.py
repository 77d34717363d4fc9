"""Turn limits, system resets and passes (chat.md, Turn limit and Pass)."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.bus import Envelope
from tests.helpers import Recorder, opened, world_from

pytestmark = pytest.mark.anyio

PING_PONG = {"a": ["@b ping {n}"], "b": ["@a pong {n}"]}


def chat_session(
    scripts: dict[str, list[str]], **settings: Any
) -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    world = world_from(
        {
            "name": "chat",
            "model": "scripted",
            "settings": settings,
            "roles": [{"id": rid, "script": lines} for rid, lines in scripts.items()],
        }
    )
    return opened(world)


def agent_messages(rec: Recorder, sender: str) -> list[Any]:
    return [m for m in rec.of("messages", "message") if m.sender == sender]


def notice(agent: str, n: int) -> str:
    return f"@human turn limit reached: {agent} made {n} LLM calls without human input"


def kinds_after(events: list[Envelope], seq: int) -> list[tuple[str, str, str]]:
    return [
        (e.event.topic, e.event.type, getattr(e.event, "sender", "")) for e in events if e.seq > seq
    ]


# ------------------------------------------------------------------ turn limit
async def test_two_agents_mentioning_each_other_stop_after_five_replies_each() -> None:
    async with chat_session(PING_PONG) as (session, rec):
        await session.say("@a start")
        assert [m.content for m in agent_messages(rec, "a")] == [
            f"@b ping {i}" for i in range(1, 6)
        ]
        assert [m.content for m in agent_messages(rec, "b")] == [
            f"@a pong {i}" for i in range(1, 6)
        ]
        notices = agent_messages(rec, "system")
        assert [m.content for m in notices] == [notice("a", 5)]
        (limit,) = rec.of("system", "turn_limit")
        assert (limit.agent, limit.count, limit.limit) == ("a", 5, 5)
        # then silence: nothing after the limit event, nothing queued
        limit_seq = next(e.seq for e in rec.events if e.event.type == "turn_limit")
        assert kinds_after(rec.events, limit_seq) == []
        assert session.status.pending == []
        # the notice is the last message and answers nothing
        assert rec.of("messages", "message")[-1].content == notice("a", 5)
        assert rec.of("messages", "message")[-1].reply_to is None


async def test_a_new_human_message_restarts_the_exchange_for_another_five_each() -> None:
    async with chat_session(PING_PONG) as (session, rec):
        await session.say("@a start")
        first = len(rec.events)
        await session.say("@b again")
        later = [e.event for e in rec.events[first:]]
        messages = [e for e in later if e.topic == "messages"]
        assert messages[0].sender == "human"
        assert [m.sender for m in messages[1:11]] == ["b", "a"] * 5
        assert [m.content for m in messages[11:]] == [notice("b", 5)]
        assert [(e.agent, e.count) for e in later if e.type == "turn_limit"] == [("b", 5)]
        # ten more LLM calls for each across both episodes, one notice per episode
        assert len(agent_messages(rec, "a")) == 10 and len(agent_messages(rec, "b")) == 10
        assert len(rec.of("system", "turn_limit")) == 2


async def test_turn_limit_setting_is_honoured() -> None:
    async with chat_session(PING_PONG, turn_limit=2) as (session, rec):
        await session.say("@a start")
        assert [m.sender for m in rec.of("messages", "message")] == [
            "human",
            "a",
            "b",
            "a",
            "b",
            "system",
        ]
        assert agent_messages(rec, "system")[0].content == notice("a", 2)


async def test_a_limit_drops_every_reply_still_queued_in_the_exchange() -> None:
    # a broadcast fans out: both agents answer the human and each other; when the first
    # agent hits its limit the floor returns to the human, queued replies included
    async with chat_session(PING_PONG, turn_limit=2) as (session, rec):
        await session.say("hello both")
        senders = [m.sender for m in rec.of("messages", "message")]
        assert senders.count("a") == 2 and senders.count("b") == 2
        assert senders[-1] == "system" and len(rec.of("system", "turn_limit")) == 1
        assert session.status.pending == []


async def test_the_turn_limit_notice_does_not_reset_counts() -> None:
    async with chat_session(PING_PONG) as (session, _):
        await session.say("@a start")
        assert session.status.turn_counts == {"a": 5, "b": 5}


# ------------------------------------------------------------------------ pass
async def test_a_pass_ends_the_exchange_and_publishes_the_remaining_text() -> None:
    async with chat_session(
        {"a": ["@b over to you"], "b": ["Not my area. <World> PASS </world> Sorry!"], "c": ["c"]}
    ) as (session, rec):
        await session.say("@a start")
        messages = rec.of("messages", "message")
        assert [(m.sender, m.content) for m in messages] == [
            ("human", "@a start"),
            ("a", "@b over to you"),
            ("b", "Not my area. Sorry!"),  # tag removed, no auto-mention
        ]
        (passed,) = rec.of("system", "pass")
        assert passed.agent == "b" and passed.message_id == "m3"
        pass_seq = next(e.seq for e in rec.events if e.event.type == "pass")
        assert [k for k in kinds_after(rec.events, pass_seq) if k[0] in ("messages", "sse")] == []
        assert session.status.pending == []
        # until the human speaks again
        await session.say("@c your view?")
        assert [m.sender for m in rec.of("messages", "message")][3:] == ["human", "c"]


async def test_a_pass_with_no_text_publishes_no_message() -> None:
    async with chat_session({"a": ["<world>pass</world>"], "b": ["b here"]}) as (session, rec):
        await session.say("@a anything to add?")
        assert [m.sender for m in rec.of("messages", "message")] == ["human"]
        (passed,) = rec.of("system", "pass")
        assert passed.agent == "a" and passed.message_id is None


async def test_a_pass_in_a_broadcast_drops_the_replies_still_queued() -> None:
    async with chat_session(
        {"a": ["fine by me <world>pass</world>"], "b": ["b here"], "c": ["c here"]}
    ) as (session, rec):
        await session.say("hello all")
        assert [(m.sender, m.content) for m in rec.of("messages", "message")] == [
            ("human", "hello all"),
            ("a", "fine by me"),
        ]
        assert [e.agent for e in rec.of("system", "pass")] == ["a"]


async def test_a_pass_mentioning_someone_starts_nothing() -> None:
    async with chat_session({"a": ["@b take it <world>pass</world>"], "b": ["b here"]}) as (
        session,
        rec,
    ):
        await session.say("@a go")
        assert [(m.sender, m.content) for m in rec.of("messages", "message")] == [
            ("human", "@a go"),
            ("a", "@b take it"),
        ]
        assert session.status.pending == []


# ------------------------------------------- a human message during an exchange
async def say_during(session: rolecall.Session, first: str, second: str) -> None:
    """Say ``first``; ``second`` arrives while the exchange ``first`` started is running."""
    heard = anyio.Event()

    def watch(envelope: Envelope) -> None:
        if getattr(envelope.event, "content", None) == first:
            heard.set()

    session.bus.subscribe(watch, "messages")

    async def interrupt() -> None:
        await heard.wait()
        await session.say(second)

    async with anyio.create_task_group() as tg:
        tg.start_soon(interrupt)
        await session.say(first)


async def test_a_pass_keeps_the_replies_owed_to_a_later_human_message() -> None:
    async with chat_session(
        {"a": ["@b ping"], "b": ["<world>pass</world>"], "c": ["c answers"]}
    ) as (session, rec):
        await say_during(session, "@a go", "@c hello")
        messages = [(m.sender, m.content, m.reply_to) for m in rec.of("messages", "message")]
        assert ("human", "@c hello", None) in messages
        assert messages[-1] == ("c", "c answers", "m3")
        assert [e.agent for e in rec.of("system", "pass")] == ["b"]
        assert session.status.pending == []


# the exact interleaving asserted below is asyncio's order of ready tasks (trio shuffles it)
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_turn_limit_keeps_the_replies_owed_to_a_later_human_message() -> None:
    async with chat_session(PING_PONG, turn_limit=1) as (session, rec):
        # the broadcast queues a and b; a's reply queues b again; then the second human message
        # comes in (counts reset) and queues a behind them. b answers m1, then is due for m2 at
        # its limit: only the first exchange is dropped, a still answers the human.
        await say_during(session, "hello both", "@a hello")
        messages = [
            (m.message_id, m.sender, m.content, m.reply_to) for m in rec.of("messages", "message")
        ]
        assert messages[:5] == [
            ("m1", "human", "hello both", None),
            ("m2", "a", "@b ping 1", "m1"),
            ("m3", "human", "@a hello", None),
            ("m4", "b", "@a pong 1", "m1"),
            (
                "m5",
                "system",
                "@human turn limit reached: b made 1 LLM calls without human input",
                None,
            ),
        ]
        assert ("m6", "a", "@b ping 2", "m3") in messages
        assert session.status.pending == []
