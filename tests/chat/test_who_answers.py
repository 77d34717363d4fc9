"""Every row of chat.md's "who answers" table, end to end through ``Session.say()``.

Roles use the scripted model; a recording wrapper keeps every request so the tests can
also look at what each agent was shown.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

import rolecall
from rolecall.llm.scripted import ScriptedModel
from rolecall.llm.types import GenerationRequest, StreamItem
from tests.helpers import Recorder, opened, world_from

pytestmark = pytest.mark.anyio


class RecordingScripted:
    """The scripted model, keeping every request it was given."""

    name = "scripted"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []
        self.inner = ScriptedModel()

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        async for item in self.inner.stream(request):
            yield item


def chat_world(scripts: dict[str, list[str]], **settings: Any) -> Any:
    return world_from(
        {
            "name": "chat",
            "topic": "testing",
            "model": "scripted",
            "settings": settings,
            "roles": [{"id": rid, "script": lines} for rid, lines in scripts.items()],
        }
    )


@asynccontextmanager
async def chat_session(
    scripts: dict[str, list[str]], **settings: Any
) -> AsyncIterator[tuple[rolecall.Session, Recorder, RecordingScripted]]:
    model = RecordingScripted()
    world = chat_world(scripts, **settings)
    async with opened(world, models={"scripted": model}) as (session, rec):
        yield session, rec, model


def said(rec: Recorder) -> list[tuple[str, str, str | None]]:
    """(sender, content, reply_to) of every published message, in order."""
    return [(m.sender, m.content, m.reply_to) for m in rec.of("messages", "message")]


def prompt_text(request: GenerationRequest) -> str:
    return "\n".join(m.content for m in request.messages)


# ---------------------------------------------------------------- human sender
async def test_human_without_mention_is_answered_by_every_agent_in_role_order() -> None:
    async with chat_session({"zed": ["zed here"], "amy": ["amy here"], "kim": ["kim here"]}) as (
        session,
        rec,
        model,
    ):
        await session.say("hello everyone")
        assert said(rec) == [
            ("human", "hello everyone", None),
            ("zed", "zed here", "m1"),
            ("amy", "amy here", "m1"),
            ("kim", "kim here", "m1"),
        ]
        assert [r.info.speaker for r in model.requests] == ["zed", "amy", "kim"]
        # each later agent already has the earlier replies in its prompt
        assert "zed here" not in prompt_text(model.requests[0])
        assert "zed here" in prompt_text(model.requests[1])
        assert "amy here" not in prompt_text(model.requests[1])
        assert "zed here" in prompt_text(model.requests[2])
        assert "amy here" in prompt_text(model.requests[2])
        assert rec.of("system", "warning") == []


@pytest.mark.parametrize(
    "text",
    [
        "only malformed: @@ and @ and @-x",
        "write to bob@alice.com please",
        "_@alice_ is emphasis, not a mention",
        "é@alice: a letter before @ makes no mention",
    ],
)
async def test_human_with_only_malformed_mentions_is_a_broadcast(text: str) -> None:
    async with chat_session({"alice": ["alice here"], "bob": ["bob here"]}) as (session, rec, _):
        await session.say(text)
        assert [m.sender for m in rec.of("messages", "message")] == ["human", "alice", "bob"]
        assert rec.of("system", "warning") == []


@pytest.mark.parametrize(
    "text",
    [
        "@bob what do you think?",
        "@BOB what do you think?",
        "**@bob** what do you think?",
        "> (@bob), what do you think?",
        "@bob: and later @alice is ordinary text",
    ],
)
async def test_human_mentioning_an_agent_first_is_answered_by_that_agent_only(text: str) -> None:
    async with chat_session({"alice": ["alice here"], "bob": ["bob here"]}) as (session, rec, _):
        await session.say(text)
        assert said(rec) == [("human", text, None), ("bob", "bob here", "m1")]
        assert rec.of("messages", "message")[1].target == "human"


async def test_human_at_all_is_answered_by_every_agent() -> None:
    async with chat_session(
        {"alice": ["alice here"], "bob": ["bob here"], "carol": ["carol here"]}
    ) as (session, rec, _):
        await session.say("@all status please, and @bob too")
        assert [m.sender for m in rec.of("messages", "message")] == [
            "human",
            "alice",
            "bob",
            "carol",
        ]


async def test_human_unknown_mention_is_answered_by_nobody_with_a_warning_naming_close_ids() -> (
    None
):
    async with chat_session({"alice": ["alice here"], "bob": ["bob here"]}) as (
        session,
        rec,
        model,
    ):
        await session.say("@alcie are you there?")
        assert said(rec) == [("human", "@alcie are you there?", None)]
        assert model.requests == []
        warnings = rec.of("system", "warning")
        assert len(warnings) == 1
        assert "'alcie'" in warnings[0].message and "closest: alice" in warnings[0].message
        # the notice is an event, not a message agents would remember
        assert [m.sender for m in rec.of("messages", "message")] == ["human"]


async def test_human_unknown_mention_with_no_close_id_lists_every_agent() -> None:
    async with chat_session({"alice": ["a"], "bob": ["b"]}) as (session, rec, _):
        await session.say("@zzzz hi")
        (warning,) = rec.of("system", "warning")
        assert "'zzzz'" in warning.message and "agents: alice, bob" in warning.message


async def test_unicode_letters_belong_to_the_name() -> None:
    async with chat_session({"alice": ["a"], "bob": ["b"]}) as (session, rec, _):
        await session.say("@aliceé hello")
        assert [m.sender for m in rec.of("messages", "message")] == ["human"]
        (warning,) = rec.of("system", "warning")
        assert "'aliceé'" in warning.message


async def test_human_at_human_is_answered_by_nobody_without_a_warning() -> None:
    async with chat_session({"alice": ["a"], "bob": ["b"]}) as (session, rec, model):
        await session.say("@human note to self")
        assert [m.sender for m in rec.of("messages", "message")] == ["human"]
        assert model.requests == [] and rec.of("system", "warning") == []


# ---------------------------------------------------------------- agent sender
async def test_agent_mentioning_another_agent_is_answered_by_it() -> None:
    async with chat_session(
        {"alice": ["@bob can you check this?"], "bob": ["@human checked, all good"], "carol": ["c"]}
    ) as (session, rec, _):
        await session.say("@alice start")
        assert said(rec) == [
            ("human", "@alice start", None),
            ("alice", "@bob can you check this?", "m1"),
            ("bob", "@human checked, all good", "m2"),
        ]
        assert rec.of("messages", "message")[2].target == "alice"


@pytest.mark.parametrize(
    "reply",
    [
        "no mention at all",
        "@human over to you",
        "as @alice I say so",  # a mention of itself (not at the start: kept, addresses nobody)
        "mail me at x@bob.com",
    ],
)
async def test_agent_with_no_mention_at_human_or_itself_returns_the_floor(reply: str) -> None:
    async with chat_session({"alice": [reply], "bob": ["bob here"]}) as (session, rec, model):
        await session.say("@alice go")
        assert said(rec) == [("human", "@alice go", None), ("alice", reply, "m1")]
        assert len(model.requests) == 1
        assert session.status.pending == []


async def test_agent_at_all_is_answered_by_every_other_agent_in_role_order() -> None:
    async with chat_session(
        {"alice": ["@human ok"], "bob": ["@all thoughts?", "@human done"], "carol": ["@human fine"]}
    ) as (session, rec, _):
        await session.say("@bob start")
        assert said(rec) == [
            ("human", "@bob start", None),
            ("bob", "@all thoughts?", "m1"),
            ("alice", "@human ok", "m2"),
            ("carol", "@human fine", "m2"),
        ]


async def test_agent_unknown_mention_returns_the_floor_with_a_warning() -> None:
    async with chat_session({"alice": ["@bobb you there?"], "bob": ["b"]}) as (session, rec, _):
        await session.say("@alice go")
        assert [m.sender for m in rec.of("messages", "message")] == ["human", "alice"]
        (warning,) = rec.of("system", "warning")
        assert "'bobb'" in warning.message and "closest: bob" in warning.message


async def test_an_agent_never_answers_its_own_message() -> None:
    async with chat_session({"alice": ["@alice, @ALICE: hello"], "bob": ["b"]}) as (
        session,
        rec,
        model,
    ):
        await session.say("@alice go")
        assert said(rec) == [("human", "@alice go", None), ("alice", "hello", "m1")]
        assert len(model.requests) == 1


# ---------------------------------------------------------------- system sender
async def test_system_message_is_answered_by_nobody_but_agents_remember_it() -> None:
    """The system messages rolecall writes are turn-limit notices (chat.md)."""
    async with chat_session(
        {"alice": ["@bob ping {n}"], "bob": ["@alice pong {n}"]}, turn_limit=1
    ) as (session, rec, model):
        await session.say("@alice go")
        notice = "@human turn limit reached: alice made 1 LLM calls without human input"
        messages = rec.of("messages", "message")
        assert [(m.sender, m.content) for m in messages][-1] == ("system", notice)
        assert all(m.reply_to != messages[-1].message_id for m in messages)
        assert len(model.requests) == 2 and session.status.pending == []
        await session.say("@alice where are we?")
        prompt = model.requests[2].messages
        assert [m.content for m in prompt if m.role == "system"][1:] == [notice]


# ------------------------------------------------- unknown first mentions of agents
@pytest.mark.parametrize(
    ("reply", "notice"),
    [
        ("@zed help", "nobody answered: no agent 'zed' (agents: alice, bob, carol)"),
        (
            "ask @alcie, then @bob",
            "nobody answered: no agent 'alcie' (closest: alice; agents: alice, bob, carol)",
        ),
    ],
)
async def test_an_agent_answering_an_agent_with_an_unknown_first_mention_returns_the_floor(
    reply: str, notice: str
) -> None:
    # not auto-mentioned back to alice: the reply mentions someone, so it is kept as written
    async with chat_session(
        {"alice": ["@bob x", "@bob again"], "bob": [reply], "carol": ["c"]}
    ) as (session, rec, model):
        await session.say("@alice go")
        assert said(rec) == [
            ("human", "@alice go", None),
            ("alice", "@bob x", "m1"),
            ("bob", reply, "m2"),
        ]
        assert [w.message for w in rec.of("system", "warning")] == [notice]
        assert len(model.requests) == 2 and session.status.pending == []


async def test_the_agents_unknown_mention_warning_is_the_humans() -> None:
    async with chat_session({"alice": ["@bob x"], "bob": ["@zed help"]}) as (
        by_agent,
        agent_rec,
        _,
    ):
        await by_agent.say("@alice go")
        async with chat_session({"alice": ["@bob x"], "bob": ["@zed help"]}) as (
            by_human,
            human_rec,
            _,
        ):
            await by_human.say("@zed help")
            (from_agent,) = agent_rec.of("system", "warning")
            (from_human,) = human_rec.of("system", "warning")
            assert from_agent.message == from_human.message
            # both are published right after the message they are about
            for rec in (agent_rec, human_rec):
                kinds = [(e.event.topic, e.event.type) for e in rec.events]
                at = kinds.index(("system", "warning"))
                assert kinds[at - 1] == ("messages", "message")
