"""Replies between agents (auto-mention, redirects, self-mentions), their order, and prompts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from typing import Any

import pytest

import rolecall
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from tests.helpers import Recorder, opened, world_from

pytestmark = pytest.mark.anyio


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


def said(rec: Recorder) -> list[tuple[str, str, str | None]]:
    return [(m.sender, m.content, m.reply_to) for m in rec.of("messages", "message")]


# ---------------------------------------------------------------- auto-mention
async def test_a_reply_to_an_agent_without_mention_gets_an_auto_mention() -> None:
    async with chat_session({"a": ["@b your turn", "@human done"], "b": ["sounds good"]}) as (
        session,
        rec,
    ):
        await session.say("@a start")
        assert said(rec) == [
            ("human", "@a start", None),
            ("a", "@b your turn", "m1"),
            ("b", "@a sounds good", "m2"),  # auto-mention, so a answers it
            ("a", "@human done", "m3"),
        ]
        assert rec.of("messages", "message")[2].mentions == ["a"]


async def test_replies_to_the_human_get_no_auto_mention() -> None:
    async with chat_session({"a": ["plain answer"]}) as (session, rec):
        await session.say("question")
        assert said(rec)[-1] == ("a", "plain answer", "m1")


async def test_a_redirect_is_kept_and_routes_to_the_new_agent() -> None:
    async with chat_session(
        {
            "a": ["@b what do you think?"],
            "b": ["@c you know this better"],
            "c": ["@human here is the answer"],
        }
    ) as (session, rec):
        await session.say("@a start")
        assert said(rec) == [
            ("human", "@a start", None),
            ("a", "@b what do you think?", "m1"),
            ("b", "@c you know this better", "m2"),
            ("c", "@human here is the answer", "m3"),
        ]


async def test_self_mentions_at_the_start_are_stripped_before_auto_mention() -> None:
    async with chat_session(
        {"a": ["@b question", "@human thanks"], "b": ["@b, @B: my answer"]}
    ) as (session, rec):
        await session.say("@a start")
        assert said(rec)[2] == ("b", "@a my answer", "m2")


async def test_self_mention_stripped_then_redirect_kept() -> None:
    async with chat_session({"a": ["@a @b over to you"], "b": ["@human fine"]}) as (session, rec):
        await session.say("@a go")
        assert said(rec) == [
            ("human", "@a go", None),
            ("a", "@b over to you", "m1"),
            ("b", "@human fine", "m2"),
        ]


async def test_a_reply_to_the_human_that_only_mentions_itself_goes_nowhere() -> None:
    async with chat_session({"a": ["@a: hello there"], "b": ["b"]}) as (session, rec):
        await session.say("@a hi")
        assert said(rec) == [("human", "@a hi", None), ("a", "hello there", "m1")]


# --------------------------------------------------------------- empty replies
@pytest.mark.parametrize("reply", ["", "   \n ", "@b", "@b, @B:", "@B - "])
async def test_an_empty_reply_to_an_agent_publishes_nothing_and_nobody_answers(reply: str) -> None:
    # empty, or empty once its self-mentions are removed: not an empty message, and no
    # bare "@a" auto-mention (a would answer nothing); like a pass with no text left
    async with chat_session({"a": ["@b your view?", "@b again?"], "b": [reply], "c": ["c"]}) as (
        session,
        rec,
    ):
        await session.say("@a start")
        assert said(rec) == [("human", "@a start", None), ("a", "@b your view?", "m1")]
        (warning,) = rec.of("system", "warning")
        assert warning.message == "nothing published: b's reply to m2 was empty"
        assert session.status.pending == []
        assert session.status.turn_counts == {"a": 1, "b": 1}  # the call was made: it counts
        assert len(session.transcript) == 2  # nothing stored for b's turn


@pytest.mark.parametrize("reply", ["", "@a"])
async def test_an_empty_reply_to_the_human_publishes_nothing_and_the_broadcast_goes_on(
    reply: str,
) -> None:
    # not a pass: the replies still due in the exchange are answered
    async with chat_session({"a": [reply], "b": ["b here"]}) as (session, rec):
        await session.say("hello all")
        assert said(rec) == [("human", "hello all", None), ("b", "b here", "m1")]
        assert [w.message for w in rec.of("system", "warning")] == [
            "nothing published: a's reply to m1 was empty"
        ]
        assert rec.of("system", "pass") == []


# ----------------------------------------------------------------------- order
async def test_replies_due_at_the_same_time_are_answered_first_in_first_out() -> None:
    # the broadcast's answerers in role order first, then replies triggered by replies
    async with chat_session(
        {"a": ["@c have a look"], "b": ["nothing to add"], "c": ["@human ok"]}
    ) as (session, rec):
        await session.say("hi all")
        assert said(rec) == [
            ("human", "hi all", None),
            ("a", "@c have a look", "m1"),
            ("b", "nothing to add", "m1"),
            ("c", "@human ok", "m1"),
            ("c", "@human ok", "m2"),
        ]


# --------------------------------------------------------------------- prompts
class Capture:
    """Records every request; replies with a unique line per call."""

    name = "capture"

    def __init__(self, replies: dict[str, list[str]] | None = None) -> None:
        self.requests: list[GenerationRequest] = []
        self.replies = replies or {}

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        lines = self.replies.get(request.info.speaker)
        text = lines[(request.info.n - 1) % len(lines)] if lines else f"reply-{len(self.requests)}"
        yield TextDelta(text)
        yield Usage(10, 2)


def capture_session(
    model: Capture, roles: list[str], **settings: Any
) -> AbstractAsyncContextManager[tuple[rolecall.Session, Recorder]]:
    world = world_from(
        {"name": "p", "model": "capture", "settings": settings, "roles": [{"id": r} for r in roles]}
    )
    return opened(world, models={"capture": model})


def occurrences(request: GenerationRequest, needle: str) -> int:
    return sum(needle in m.content for m in request.messages)


async def test_an_empty_reply_never_reaches_a_prompt() -> None:
    # an empty assistant entry is refused by some providers; nothing was said, so none
    model = Capture({"a": [""]})
    async with capture_session(model, ["a", "b"]) as (session, _):
        await session.say("hello")
        await session.say("@a and?")
        assert [(r.info.speaker, r.info.target) for r in model.requests] == [
            ("a", "human"),
            ("b", "human"),
            ("a", "human"),
        ]
        for request in model.requests:
            assert all(m.content.strip() for m in request.messages)


@pytest.mark.parametrize("window", [0, 1, 12])
async def test_the_prompt_carries_the_message_being_answered_exactly_once(window: int) -> None:
    model = Capture({"a": ["@b token-from-a"], "b": ["@human token-from-b"], "c": ["c-says"]})
    async with capture_session(model, ["a", "b", "c"], memory_window=window) as (session, _):
        await session.say("hello token-from-human")
        requests = {(r.info.speaker, r.info.target): r for r in model.requests}
        assert set(requests) == {("a", "human"), ("b", "human"), ("c", "human"), ("b", "a")}
        for request in model.requests:
            quoted = request.messages[-1].content
            assert "You are answering" in quoted
            assert request.info.target_text is not None and request.info.target_text in quoted
            assert occurrences(request, request.info.target_text) == 1
        # b answers the human first (a's reply is memory), then a's reply (the human's is memory)
        b_to_a = requests[("b", "a")]
        assert occurrences(b_to_a, "token-from-a") == 1
        assert occurrences(b_to_a, "token-from-human") == (1 if window >= 3 else 0)


async def test_the_answered_message_is_quoted_even_when_older_than_the_window() -> None:
    model = Capture({"a": ["@b token-a"], "b": ["@human token-b"], "c": ["token-c"]})
    async with capture_session(model, ["a", "b", "c"], memory_window=1) as (session, _):
        await session.say("very old token-h")
        c_request = next(r for r in model.requests if r.info.speaker == "c")
        # by the time c answers m1, two newer messages exist; m1 is still quoted, once
        assert occurrences(c_request, "token-h") == 1
        assert "token-h" in c_request.messages[-1].content


async def test_the_prompt_sees_earlier_replies_as_named_user_entries_and_own_as_assistant() -> None:
    model = Capture({"a": ["a-first", "a-second"], "b": ["b-first"]})
    async with capture_session(model, ["a", "b"]) as (session, _):
        await session.say("round one")
        await session.say("@a round two")
        last = model.requests[-1]
        entries = [(m.role, m.name, m.content) for m in last.messages[1:-1]]
        assert entries == [
            ("user", "human", "[human] round one"),
            ("assistant", "a", "a-first"),
            ("user", "b", "[b] b-first"),
        ]
