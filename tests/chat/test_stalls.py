"""Stalls (real-models.md): a reply nearly identical to a recent message is warned about;
a second in a row ends the exchange (chat: over to the human) or the run (flows:
``stalled``). Every pass says the rule that decided it."""

from __future__ import annotations

import pytest

from rolecall.session.stalls import similarity
from rolecall.testing import FunctionModel
from tests.helpers import opened, world_from

pytestmark = pytest.mark.anyio

SAME = "I think the answer is clearly forty two and we should all agree on it now"


def saying(lines: dict[str, str]) -> dict[str, FunctionModel]:
    """A model (``echo``) that gives each role the same line every turn: a model stuck in
    a loop (a ``scripted`` role's repeats are its author's, and are never a stall)."""
    return {"echo": FunctionModel(lambda request: lines[request.info.speaker])}


def test_similarity_ignores_case_and_punctuation_and_skips_short_replies() -> None:
    assert similarity(SAME, SAME.upper() + "!") == 1.0
    assert similarity(SAME, SAME.replace("forty two", "forty three")) >= 0.9
    assert similarity(SAME, "We should ship the parser first and test it on real data") < 0.5
    assert similarity("I agree.", "I agree.") == 0.0  # too short to be a stall


async def test_a_chat_ping_pong_of_the_same_words_goes_back_to_the_human() -> None:
    world = world_from(
        {
            "name": "echo",
            "model": "echo",
            "roles": [{"id": "a"}, {"id": "b"}],
        }
    )
    async with opened(world, models=saying({"a": f"@b {SAME}", "b": f"@a {SAME}"})) as (
        session,
        rec,
    ):
        await session.say("@a what is the answer?")

        replies = [m for m in session.transcript if m.kind == "agent"]
        # without the stall rule they would go on to the turn limit (five each)
        assert [m.id for m in replies] == ["m2", "m3", "m4"]
        warnings = [w.message for w in rec.of("system", "warning")]
        assert warnings == [
            "m3 (b) is nearly identical to m2 (a): similarity 0.94",
            "m4 (a) is nearly identical to m2 (a): similarity 1.00; the second such reply in a "
            "row: the exchange ends, over to the human",
        ]
        assert session.status.pending == []
        assert session.status.state == "running"  # a chat goes on: the floor is the human's
        assert rec.of("system", "turn_limit") == []
        await session.say("@b and now?")
        assert session.transcript[-1].sender in ("a", "b")


async def test_a_flow_repeating_itself_stops_stalled_naming_the_two_replies() -> None:
    world = world_from(
        {
            "name": "loop",
            "model": "echo",
            "roles": [{"id": "a"}, {"id": "b"}],
            "flow": {
                "steps": [
                    {"id": "one", "speaker": "a"},
                    {"id": "two", "speaker": "b", "loop": {"to": "one", "max": 10}},
                ]
            },
        }
    )
    async with opened(
        world,
        models=saying(
            {
                "a": "The plan is fine and we should ship it right now.",
                "b": "Then let us review the plan once more before we ship.",
            }
        ),
    ) as (session, rec):
        await session.run()

        assert len(session.transcript) == 4  # not the 20 turns of the loop
        (stop,) = rec.of("world", "stop")
        assert stop.reason == "stalled"
        assert stop.detail == (
            "two replies in a row nearly identical to earlier messages: m3 (a) is nearly "
            "identical to m1 (a): similarity 1.00; then m4 (b) is nearly identical to m2 (b): "
            "similarity 1.00"
        )
        assert session.status.stop_reason == "stalled"


async def test_a_pass_says_the_rule_that_decided_it() -> None:
    world = world_from(
        {
            "name": "passing",
            "model": "scripted",
            "roles": [{"id": "a", "script": ["<world>pass</world>"]}],
        }
    )
    async with opened(world) as (session, rec):
        await session.say("@a anything to add?")
        (passed,) = rec.of("system", "pass")
        assert passed.agent == "a"
        assert "<world>pass</world>" in passed.reason


async def test_a_scripted_role_repeating_its_lines_is_never_a_stall() -> None:
    """A scripted role says the lines its world gives it: a repeat is its author's, so a
    flow of the same lines runs to its end, with no warning."""
    world = world_from(
        {
            "name": "lines",
            "model": "scripted",
            "roles": [{"id": "a", "script": [SAME]}, {"id": "b", "script": [SAME]}],
            "flow": {
                "steps": [
                    {"id": "one", "speaker": "a"},
                    {"id": "two", "speaker": "b", "loop": {"to": "one", "max": 3}},
                ]
            },
        }
    )
    async with opened(world) as (session, rec):
        await session.run()
        assert len(session.transcript) == 6
        assert session.status.stop_reason == "flow_end"
        assert rec.of("system", "warning") == []
