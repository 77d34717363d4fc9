"""Judge roles in any world: extra turns, JSON scores, events, conditions (modes.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from rolecall.errors import ProviderUnavailable, WorldError
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.modes.judgments import (
    MAX_REPLY_CHARS,
    Invalid,
    json_object,
    score_parser,
)
from rolecall.world.judge_block import check_world
from rolecall.world.loader import load_world
from tests.conftest import ROOT
from tests.helpers import opened, run_flow, world_from

pytestmark = pytest.mark.anyio


# ------------------------------------------------------------------- parsing
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"score": 7}', {"score": 7}),
        ('Here you go:\n```json\n{"score": 7}\n```', {"score": 7}),
        ('My verdict is {"scores": {"score": 7}} and that is final.', {"scores": {"score": 7}}),
        ('{oops} then {"score": 2}', {"score": 2}),
        ("No JSON here.", None),
        ("[1, 2, 3]", None),
    ],
)
def test_the_first_json_object_of_a_reply_is_read(
    text: str, expected: dict[str, Any] | None
) -> None:
    if expected is None:
        with pytest.raises(Invalid, match="no JSON object found"):
            json_object(text)
    else:
        assert json_object(text) == expected


@pytest.mark.parametrize(
    ("text", "scores"),
    [
        (
            '{"scores": {"clarity": 7, "evidence": 8.5}, "comment": "ok"}',
            {"clarity": 7.0, "evidence": 8.5},
        ),
        ('{"clarity": 0, "evidence": 10}', {"clarity": 0.0, "evidence": 10.0}),
    ],
)
def test_score_parser_reads_nested_or_top_level_scores(text: str, scores: dict[str, float]) -> None:
    parsed = score_parser(["clarity", "evidence"], (0, 10))(text)
    assert parsed.scores == scores


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("prose only", "no JSON object found"),
        ('{"scores": {"clarity": 7}}', "score 'evidence' missing or not a number"),
        ('{"clarity": 7, "evidence": "high"}', "score 'evidence' missing or not a number"),
        ('{"clarity": true, "evidence": 1}', "score 'clarity' missing or not a number"),
        ('{"clarity": 11, "evidence": 1}', "score 'clarity' = 11 is outside 0..10"),
    ],
)
def test_score_parser_rejects_what_breaks_the_contract(text: str, why: str) -> None:
    with pytest.raises(Invalid, match=why):
        score_parser(["clarity", "evidence"], (0, 10))(text)


HOSTILE = [
    ("[" * 3000 + "]" * 3000, "nests deeper than 32 levels"),
    ('{"scores": ' * 2000 + "1" + "}" * 2000, "nests deeper than 32 levels"),
    ("Verdict: " + '{"a": ' * 3000, "nests deeper than 32 levels"),
    ("```json\n" + "[" * 5000 + "\n```", "nests deeper than 32 levels"),
    ('{"scores": {"score": [' + "[" * 40 + "]" * 40 + "]}}", "nests deeper than 32 levels"),
    ("{" * 50_000, "no JSON object found"),
    ('{"score": 1' + "0" * 5000 + "}", "no JSON object found"),  # past int's digit limit
    ('{"score": 1} ' + "x" * MAX_REPLY_CHARS, "characters long"),
]


@pytest.mark.parametrize(("text", "why"), HOSTILE)
def test_any_reply_text_is_read_or_rejected_with_a_reason(text: str, why: str) -> None:
    with pytest.raises(Invalid, match=why):
        json_object(text)
    with pytest.raises(Invalid, match=why):
        score_parser(["score"], (0, 10))(text)


def test_an_object_nesting_up_to_the_limit_is_read() -> None:
    inner: Any = 5
    for _ in range(31):
        inner = {"x": inner}
    assert json_object(json.dumps({"score": 5, "note": inner}))["score"] == 5


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"score": NaN}', "'score' = nan is outside 0..10"),
        ('{"score": Infinity}', "'score' = inf is outside 0..10"),
        ('{"score": 1e999}', "'score' = inf is outside 0..10"),
        ('{"score": ' + "9" * 400 + "}", "is outside 0..10"),
    ],
)
def test_numbers_beyond_the_scale_break_the_contract(text: str, why: str) -> None:
    with pytest.raises(Invalid, match=why):
        score_parser(["score"], (0, 10))(text)


async def test_a_deeply_nested_judge_reply_is_retried_then_ignored() -> None:
    deep = '{"scores": ' * 2000 + "1" + "}" * 2000
    data = judged_world([deep], {"role": "judge", "after": ["two"]})
    # the parser's own guard, not the reply cap or hygiene's repetition cut (real-models.md)
    data["settings"] = {"reply_hygiene": "off", "max_reply_tokens": 10000}
    world = world_from(data)
    session, rec = await run_flow(world)
    judges = rec.of("system", "judge")
    assert judges and not any(j.valid for j in judges)
    assert judges[0].verdict["error"] == "the JSON nests deeper than 32 levels"
    assert len(rec.of("system", "warning")) == len(judges) // 2
    assert session.status.state == "finished" and len(rec.of("world", "stop")) == 1


# --------------------------------------------------------------------- worlds
def judged_world(
    script: list[str], judge: dict[str, Any] | None = None, **flow: Any
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "t",
        "topic": "testing",
        "model": "scripted",
        "roles": [
            {"id": "a", "script": ["a says {n}"]},
            {"id": "b", "script": ["b says {n}"]},
            {"id": "judge", "script": script},
        ],
        "flow": {
            "steps": [
                {"id": "one", "speaker": "a"},
                {"id": "two", "speaker": "b", "loop": {"to": "one", "max": 5}},
            ],
            **flow,
        },
    }
    if judge is not None:
        data["judge"] = judge
    return data


async def test_a_judge_scores_after_chosen_steps_and_conditions_read_the_scores() -> None:
    script = ['{"scores": {"score": 3}}', 'Score: {"scores": {"score": 8}, "comment": "good"}']
    world = world_from(
        judged_world(
            script,
            {"role": "judge", "after": ["two"]},
            stop=[{"judge": "score", "at_least": 8, "name": "good_enough"}],
        )
    )
    session, rec = await run_flow(world)
    msgs = rec.of("messages", "message")
    assert [m.sender for m in msgs] == ["a", "b", "judge", "a", "b", "judge"]
    assert [m.step_id for m in msgs if m.sender == "judge"] == ["judge:two", "judge:two"]
    assert msgs[2].reply_to == "m2"  # the judge answers the message it judges
    judges = rec.of("system", "judge")
    assert [(j.about, j.message_id, j.scores) for j in judges] == [
        ("m2", "m3", {"score": 3.0}),
        ("m5", "m6", {"score": 8.0}),
    ]
    assert judges[1].verdict == {"scores": {"score": 8}, "comment": "good"}
    assert rec.stop().reason == "good_enough"  # fresh scores, before the flow moved on
    assert session.status.extra["judge_scores"] == {"judge": {"score": 8.0}}


async def test_judge_on_a_step_uses_the_default_score() -> None:
    data = judged_world(['{"score": 9}'], stop=[{"judge": "score", "at_least": 9, "role": "judge"}])
    data["flow"]["steps"][0]["judge"] = "judge"
    _, rec = await run_flow(world_from(data))
    assert [m.sender for m in rec.of("messages", "message")] == ["a", "judge"]
    assert rec.stop().reason == "judge"


async def test_after_all_judges_every_step_but_never_the_judge_itself() -> None:
    data = judged_world(['{"score": 1}'], {"after": "all"})
    data["flow"]["steps"][1]["loop"]["max"] = 1
    data["flow"]["steps"].append({"id": "three", "speaker": "judge"})
    _, rec = await run_flow(world_from(data))
    senders = [m.sender for m in rec.of("messages", "message")]
    assert senders == ["a", "judge", "b", "judge", "judge"]


async def test_a_malformed_score_is_retried_once_then_ignored() -> None:
    script = ["It was fine.", "Still prose.", '{"score": 5}']
    world = world_from(judged_world(script, {"after": ["one"]}))
    world = world.model_copy(
        update={"flow": world.flow.model_copy(update={"steps": world.flow.steps[:1]})}  # type: ignore[union-attr]
    )
    session, rec = await run_flow(world)
    judges = rec.of("system", "judge")
    assert [j.valid for j in judges] == [False, False]
    assert [w.message for w in rec.of("system", "warning")] == [
        "judge judge: no valid JSON verdict on m1 after one retry; the verdict is ignored"
    ]
    retry = rec.of("messages", "message")[2]
    assert retry.sender == "judge" and retry.reply_to == "m1"
    assert session.status.extra["judge_scores"] == {}


class Replies:
    """Says its replies in order and records every request."""

    name = "replies"

    def __init__(self, *replies: str) -> None:
        self.replies = list(replies)
        self.requests: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        yield TextDelta(self.replies[len(self.requests) - 1])
        yield Usage(10, 5)


async def test_the_judge_is_asked_for_json_and_reminded_of_the_format_on_retry() -> None:
    data = judged_world(
        ["unused"], {"after": ["one"], "about": "exchange", "instruction": "Be fair."}
    )
    data["roles"][2] = {"id": "judge", "model": "replies"}
    judge = Replies("prose", '{"score": 4}')
    async with opened(world_from(data), models={"replies": judge}) as (session, _):
        await session.step()
    first, retry = (r.info.instruction or "" for r in judge.requests)
    assert first.startswith(
        "Be fair. As the judge, score the whole exchange so far, up to A (@a)'s message m1"
    )
    assert first.endswith('{"scores": {"score": <number 0-10>}, "comment": "<one sentence>"}')
    assert retry.startswith("Reply again with ONLY the JSON object, exactly in this format:")
    assert retry.endswith("(Your previous reply m2: no JSON object found.)")
    assert session.status.extra["judge_scores"]["judge"] == {"score": 4.0}


async def test_scores_empty_means_comments_only() -> None:
    world = world_from(judged_world(["Nicely put."], {"after": ["one"], "scores": []}))
    async with opened(world) as (session, rec):
        await session.step()
    (judge,) = rec.of("system", "judge")
    assert judge.verdict == {"comment": "Nicely put."} and judge.scores == {}


@pytest.mark.parametrize(
    ("block", "problem"),
    [
        (
            {"role": "referee"},
            "judge.role: no role 'referee' (roles: a, b, judge; add one, e.g. {template: judge})",
        ),
        ({"after": ["one", "tree"]}, "judge.after[1]: no step 'tree' (steps: one, two)"),
        (
            {"scores": ["x"], "scale": [5, 1]},
            "judge.scale: the low end must be below the high end, got [5, 1]",
        ),
        ({"afer": "all"}, "judge.afer: unknown field (did you mean after?)"),
        (
            {"about": "everything"},
            "judge.about: input should be 'message' or 'exchange' (got 'everything')",
        ),
        ("judge", "judge: expected a mapping like {role: judge, after: all}, got 'judge'"),
    ],
)
def test_a_bad_judge_block_is_reported_with_paths(block: Any, problem: str) -> None:
    data = judged_world(['{"score": 1}'], block)
    assert problem in check_world(data)
    if isinstance(block, dict):
        with pytest.raises(WorldError) as info:
            world_from(data)  # the loader lists judge problems with the rest
        assert problem in info.value.problems


# ------------------------------------------------------------------ courtroom
async def test_the_courtroom_world_runs_offline_to_a_ruling() -> None:
    loaded = load_world(Path(ROOT / "worlds" / "courtroom"))
    session, rec = await run_flow(loaded.world)
    assert rec.stop().reason == "case_made"
    assert [j.scores["plaintiff_case"] for j in rec.of("system", "judge")] == [4.0, 6.0, 8.0]
    last = rec.of("messages", "message")[-1]
    assert last.sender == "judge" and last.step_id == "ruling"
    assert last.content.startswith("Ruling:")
    assert session.status.extra["judge_scores"]["judge"]["plaintiff_case"] == 8.0


class FlakyJudge:
    name = "flaky"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        if self.calls == 2:
            raise ProviderUnavailable("flaky: provider went away", model="flaky")
        yield TextDelta('{"score": 5}')
        yield Usage(10, 5)


async def test_resume_after_a_failed_judge_turn_runs_only_the_judges_not_done() -> None:
    data = judged_world(["unused"])
    data["roles"][2]["model"] = "flaky"
    data["roles"][2].pop("script")
    data["roles"].append({"id": "second", "model": "flaky"})
    data["flow"]["steps"] = [{"id": "one", "speaker": "a", "judge": "second"}]
    data["judge"] = {"after": ["one"]}
    async with opened(world_from(data), models={"flaky": FlakyJudge()}) as (session, rec):
        await session.run()
        assert session.status.pause_reason == "error"
        await session.run()
    assert rec.stop().reason == "flow_end"
    assert [m.sender for m in session.transcript] == ["a", "judge", "second"]
    assert [(j.judge, j.about) for j in rec.of("system", "judge")] == [
        ("judge", "m1"),
        ("second", "m1"),
    ]


async def test_the_judges_done_are_typed_state_stored_in_their_layout() -> None:
    from rolecall.modes.judge import judged

    world = world_from(
        judged_world(['{"scores": {"score": 9}}'], {"role": "judge", "after": ["two"]})
    )
    session, _ = await run_flow(world)
    last = [m.id for m in session.transcript if m.step_id == "two"][-1]
    stored = session.status.extra["judged"]  # the session document's state.extra
    assert stored == [last, ["judge"]]  # the layout stored sessions have
    again = SimpleNamespace(state=SimpleNamespace(extra={"judged": stored}))  # read back
    assert judged(again, last).judges == ["judge"]  # validated from the stored list
    assert judged(again, "m999").judges == []  # another message starts afresh
