"""``regex:`` conditions are bounded in time (issue 13, defect 1).

``(a|aa)+$`` against forty ``a`` and a ``!`` backtracks for ever under Python's ``re``:
the session hung, Ctrl-C and ``max_seconds`` could not stop it, and the message was
never stored. Now the search gives up after ``patterns.SEARCH_SECONDS``, the message is
kept, the session pauses with an error naming the condition, and a bad pattern is a
world error at load time.
"""

from __future__ import annotations

from typing import Any

import pytest

from rolecall.errors import ConditionTimeout, WorldError
from rolecall.flows import patterns
from tests.helpers import opened, run_flow, world_from

pytestmark = pytest.mark.anyio

EVIL = "a" * 40 + "!"


def evil_world(flow: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": "rx",
        "topic": "patterns",
        "model": "scripted",
        "roles": [{"id": "a", "script": [EVIL]}, {"id": "b", "script": ["b says {n}"]}],
        "flow": flow,
    }


@pytest.fixture(autouse=True)
def quick_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(patterns, "SEARCH_SECONDS", 0.05)


@pytest.mark.parametrize(
    ("flow", "where"),
    [
        (
            {"stop": [{"regex": "^(a|aa)+$"}], "steps": [{"id": "s", "speaker": "a"}]},
            "flow stop condition {regex: ^(a|aa)+$}",
        ),
        (
            {
                "steps": [
                    {
                        "id": "s",
                        "speaker": "a",
                        "next": [{"when": {"regex": "(a|aa)+$"}, "goto": "t"}],
                    },
                    {"id": "t", "speaker": "b"},
                ]
            },
            "when: of step 's' {regex: (a|aa)+$}",
        ),
        (
            {
                "steps": [
                    {
                        "id": "s",
                        "speaker": "a",
                        "loop": {"to": "s", "max": 3, "until": {"not": {"regex": "(a|aa)+$"}}},
                    },
                ]
            },
            "loop until: of step 's' {regex: (a|aa)+$}",
        ),
    ],
)
async def test_a_backtracking_pattern_pauses_with_the_condition_named(
    flow: dict[str, Any], where: str
) -> None:
    async with opened(world_from(evil_world(flow))) as (session, rec):
        with pytest.raises(ConditionTimeout) as caught:
            await session.run()
        message = str(caught.value)
        assert message.startswith(where), message
        assert "latest message (m1)" in message and "took longer than 0.05 s" in message
        # the message is kept, the session paused; the error was published
        assert [m.content for m in session.transcript] == [EVIL]
        assert session.status.state == "paused" and session.status.pause_reason == "error"
        assert [e.error for e in rec.of("system", "error")] == [message]
        # resuming decides again, without a new generation, and fails the same way at once
        with pytest.raises(ConditionTimeout):
            await session.run()
        assert len(session.transcript) == 1


async def test_a_pattern_that_terminates_still_decides() -> None:
    flow = {"stop": [{"regex": "^a+!$"}], "steps": [{"id": "s", "speaker": "a"}]}
    _, rec = await run_flow(world_from(evil_world(flow)))
    assert rec.stop().reason == "keyword"


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [
        ("(a", "flow.stop[0].regex: value error, not a valid regular expression: missing )"),
        (
            "x" * 1001,
            "flow.stop[0].regex: value error, regex is 1001 characters long; at most 1000",
        ),
    ],
)
def test_a_bad_pattern_is_refused_at_load(pattern: str, problem: str) -> None:
    with pytest.raises(WorldError) as caught:
        world_from(
            evil_world({"stop": [{"regex": pattern}], "steps": [{"id": "s", "speaker": "a"}]})
        )
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_lookarounds_and_backreferences_keep_working() -> None:
    assert patterns.search(r"(?<=say )(\w)\1", "say ooh")
    assert not patterns.search(r"(?i)^no\b", "nothing")


async def test_a_human_message_that_times_out_the_stop_pauses_the_session() -> None:
    flow = {
        "stop": [{"regex": "(a|aa)+$", "role": "human"}],
        "steps": [{"id": "s", "speaker": "b"}],
    }
    async with opened(world_from(evil_world(flow))) as (session, rec):
        message = await session.say(EVIL)
        assert message.content == EVIL
        assert session.status.state == "paused" and session.status.pause_reason == "error"
        (error,) = rec.of("system", "error")
        assert error.error.startswith("flow stop condition {regex: (a|aa)+$, role: human}")
