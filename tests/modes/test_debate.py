"""The debate preset: an ordinary world run by the same engine (modes.md, Debate)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

import rolecall
from rolecall.errors import ProviderUnavailable, WorldError
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.modes.debate import PROFILES
from rolecall.modes.debate_turns import parse_judgment
from rolecall.modes.judgments import Invalid
from rolecall.world.library import builtin_roles
from rolecall.world.models import World
from tests.helpers import Recorder, opened, run_flow, world_from

pytestmark = pytest.mark.anyio

TOPIC = "Cities should ban private cars from their centres"


def debate(
    options: dict[str, Any] | None = None,
    roles: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> World:
    data: dict[str, Any] = {"name": "d", "mode": "debate", "topic": TOPIC}
    if options is not None:
        data["debate"] = options
    if roles is not None:
        data["roles"] = roles
    data.update(extra)
    return world_from(data)


def long_line(tag: str) -> str:
    """At least 20 words, keywords unique to this line (no repetition)."""
    return " ".join(f"{tag}word{j}" for j in range(22))


def scripted(pro: list[str], con: list[str]) -> list[dict[str, Any]]:
    return [
        {"id": "pro", "model": "scripted", "script": pro},
        {"id": "con", "model": "scripted", "script": con},
    ]


def messages(rec: Recorder) -> list[Any]:
    return rec.of("messages", "message")


def stop_reason_of(rec: Recorder) -> str:
    return str(rec.stop().reason)


# ---------------------------------------------------------------- the offline run
async def test_offline_model_plays_a_complete_debate_to_a_synthesis() -> None:
    session, rec = await run_flow(debate({"max_turns": 6}))
    msgs = messages(rec)
    assert [m.sender for m in msgs] == ["pro", "con", "pro", "con", "pro", "con", "moderator"]
    last = msgs[-1]
    assert last.sender == "moderator" and last.step_id == "synthesis"
    kinds = [(e.event.topic, e.event.type) for e in rec.events]
    last_message = max(i for i, k in enumerate(kinds) if k == ("messages", "message"))
    stop_at = kinds.index(("world", "stop"))
    assert stop_at > last_message  # the closing world/stop comes after the synthesis
    assert rec.stop().reason == "max_turns"
    assert rec.stop().detail == "6 of 6 debater turns"
    assert session.status.state == "finished"
    modes = rec.of("system", "mode")
    assert [e.data["turn"] for e in modes] == [1, 2, 3, 4, 5, 6]
    assert modes[-1].data["stop"] is True and modes[-1].data["reason"] == "max_turns"
    assert all(e.mode == "debate" and e.name == "termination" for e in modes)


async def test_pro_speaks_on_odd_turns_and_con_on_even_ones_answering_each_other() -> None:
    _, rec = await run_flow(debate({"max_turns": 7, "dynamic_termination": False}))
    turns = [m for m in messages(rec) if m.sender in ("pro", "con")]
    assert [m.sender for m in turns] == ["pro", "con", "pro", "con", "pro", "con", "pro"]
    assert turns[0].reply_to is None
    for prev, cur in pairwise(turns):
        assert cur.reply_to == prev.message_id and cur.target == prev.sender
    assert rec.steps() == ["opening", "con", "pro", "con", "pro", "con", "pro", "synthesis"]
    assert rec.stop().reason == "max_turns"


async def test_debaters_are_told_to_address_each_other_by_name() -> None:
    world = debate({"profile": "technical"})
    steps = {s.id: s for s in world.flow.steps}  # type: ignore[union-attr]
    assert "Senior Engineer (@con)" in (steps["pro"].instruction or "")
    assert "Solution Architect (@pro)" in (steps["con"].instruction or "")
    assert "by name" in (steps["pro"].instruction or "")


# -------------------------------------------------------------- scripted reasons
REASONS = [
    (
        "concession",
        [long_line("pa"), long_line("pb")],
        [long_line("ca"), "Fair point. " + long_line("cb")],
        4,
    ),
    # the same keywords in another order: the mode's stalemate, not a stall of near-identical
    # replies (real-models.md), which each debater repeating its own line also is at turn 4
    ("stalemate_repetition", [long_line("same")], [" ".join(long_line("same").split()[::-1])], 4),
    ("stalemate_disengagement", ["{speaker} turn {n}."], ["{speaker} turn {n}!"], 4),
    ("max_turns", [long_line("p{n}")], [long_line("c{n}")], 6),
]


@pytest.mark.parametrize(
    ("reason", "pro", "con", "turns"), [r for r in REASONS], ids=[r[0] for r in REASONS]
)
async def test_a_scripted_debate_stops_with_each_reason(
    reason: str, pro: list[str], con: list[str], turns: int
) -> None:
    world = debate({"max_turns": 6}, roles=scripted(pro, con))
    _, rec = await run_flow(world)
    msgs = messages(rec)
    assert stop_reason_of(rec) == reason
    assert len([m for m in msgs if m.sender in ("pro", "con")]) == turns
    assert msgs[-1].sender == "moderator"
    last_mode = rec.of("system", "mode")[-1]
    assert last_mode.data["reason"] == reason
    conditions = [c for c in rec.of("system", "condition") if c.result]
    assert [c.condition for c in conditions] == [
        "concession" if reason == "concession" else "stalemate"
    ]


async def test_no_dynamic_termination_runs_to_max_turns() -> None:
    world = debate(
        {"max_turns": 5, "dynamic_termination": False},
        roles=scripted(["You're right."], ["You're right."]),
    )
    _, rec = await run_flow(world)
    assert stop_reason_of(rec) == "max_turns"
    assert len(messages(rec)) == 6


async def test_the_synthesis_instruction_lists_the_message_ids_to_cite() -> None:
    capture = Capture()
    world = debate({"max_turns": 4}, roles=[{"id": "moderator", "model": "capture"}])
    _, rec = await run_flow(world, models={"capture": capture})
    assert messages(rec)[-1].sender == "moderator"
    instruction = capture.requests[-1].info.instruction or ""
    for mid in ("[m1]", "[m2]", "[m3]", "[m4]"):
        assert mid in instruction
    assert "like [m3]" in instruction
    assert "max_turns" in instruction  # the reason the debate ended
    assert "Optimistic Advocate (PRO)" in instruction


class Capture:
    name = "capture"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        yield TextDelta("synthesis [m1] [m2]")
        yield Usage(10, 3)


# ------------------------------------------------------------------- profiles
@pytest.mark.parametrize("profile", PROFILES)
def test_profiles_give_the_library_personas(profile: str) -> None:
    world = debate({"profile": profile})
    library = builtin_roles()
    for side in ("pro", "con"):
        role = world.role(side)
        template = library[f"{profile}_{side}"]
        assert role.template == f"{profile}_{side}"
        assert role.name == template["name"]
        assert role.system_prompt.startswith(template["system_prompt"].strip())
        assert f"you are {side.upper()}" in role.system_prompt
    assert world.role_ids == ["pro", "con", "moderator"]


def test_an_unknown_profile_is_an_error_listing_the_known_ones() -> None:
    with pytest.raises(WorldError) as info:
        debate({"profile": "comedy"})
    assert info.value.problems == [
        "debate.profile: unknown profile 'comedy' "
        "(profiles: classic, technical, business, scientific, ethical, political)"
    ]


def test_user_personas_win_over_the_profile() -> None:
    world = debate({"profile": "technical", "pro": "a startup founder who ships fast"})
    pro = world.role("pro")
    assert pro.description == "a startup founder who ships fast"
    assert pro.system_prompt.startswith("You are a startup founder who ships fast.")
    assert pro.template is None
    assert world.role("con").template == "technical_con"


def test_roles_override_preset_fields_by_id() -> None:
    world = debate(
        roles=[
            {"id": "moderator", "model": "scripted", "script": ["Summary."]},
            {"id": "pro", "system_prompt": "Argue briefly."},
        ]
    )
    assert world.role("moderator").model == "scripted"
    assert world.role("moderator").template == "moderator"
    assert world.role("pro").system_prompt == "Argue briefly."
    assert world.role("pro").name == "Optimistic Advocate"


@pytest.mark.parametrize(
    ("options", "extra", "problem"),
    [
        ({"profle": "classic"}, {}, "debate.profle: unknown field (did you mean profile or pro?)"),
        (
            {"max_turns": 1},
            {},
            "debate.max_turns: input should be greater than or equal to 2 (got 1)",
        ),
        (
            {"max_turns": 21},
            {},
            "debate.max_turns: input should be less than or equal to 20 (got 21)",
        ),
        (
            {"dynamic_termination": "yes"},
            {},
            "debate.dynamic_termination: input should be a valid boolean (got 'yes')",
        ),
        (
            {"judge": "referee"},
            {},
            "debate.judge: no role 'referee' (define it under roles:, or use a role library template such as judge)",
        ),
        (
            {"judge": "con"},
            {},
            "debate.judge: 'con' already speaks in the debate; use another role",
        ),
        (
            {},
            {"topic": ""},
            "topic: a debate needs a topic, the proposition to argue (e.g. topic: Cities should ban cars from their centres)",
        ),
        (
            {},
            {"flow": {"steps": [{"id": "a", "speaker": "pro"}]}},
            "flow: a debate world builds its own flow; remove flow: (tune the debate with its debate: block)",
        ),
    ],
)
def test_bad_debate_blocks_are_reported_with_paths(
    options: dict[str, Any], extra: dict[str, Any], problem: str
) -> None:
    with pytest.raises(WorldError) as info:
        debate(options, **extra)
    assert problem in info.value.problems


def test_settings_fit_every_debater_turn_judge_turns_and_the_synthesis() -> None:
    assert debate({"max_turns": 8}).settings.max_turns == 9
    assert debate({"max_turns": 8, "judge": "judge"}).settings.max_turns == 25
    assert debate({"max_turns": 8}, settings={"max_turns": 50}).settings.max_turns == 50


# ----------------------------------------------------------------------- judge
def verdict(agreement: float, new: list[str] | None = None, stance: str = "pro") -> str:
    return json.dumps(
        {
            "stance": stance,
            "new_arguments": ["a point"] if new is None else new,
            "concessions": [],
            "agreement": agreement,
        }
    )


def judged(script: list[str], max_turns: int = 6) -> World:
    return debate(
        {"max_turns": max_turns, "judge": "judge"},
        roles=[
            *scripted([long_line("p{n}")], [long_line("c{n}")]),
            {"id": "judge", "model": "scripted", "script": script},
        ],
    )


async def test_a_judge_decides_termination_with_json_verdicts() -> None:
    script = [
        verdict(0.1),
        verdict(0.3),
        "Verdict: " + verdict(0.5) + " (prose is fine)",
        verdict(0.85, stance="undecided"),
    ]
    session, rec = await run_flow(judged(script))
    assert stop_reason_of(rec) == "concession"
    assert "agreement at 0.85" in rec.stop().detail
    judges = rec.of("system", "judge")
    assert [j.valid for j in judges] == [True] * 4
    assert [j.about for j in judges] == ["m1", "m3", "m5", "m7"]
    assert [j.message_id for j in judges] == ["m2", "m4", "m6", "m8"]
    assert judges[-1].scores == {"agreement": 0.85, "new_arguments": 1.0, "concessions": 0.0}
    assert judges[-1].verdict["stance"] == "undecided"
    assert session.status.extra["judge_scores"]["judge"]["agreement"] == 0.85
    senders = [m.sender for m in messages(rec)]
    assert senders == ["pro", "judge", "con", "judge", "pro", "judge", "con", "judge", "moderator"]
    assert all(m.step_id == "judge" for m in messages(rec) if m.sender == "judge")


async def test_the_judge_replaces_the_keyword_rules() -> None:
    world = debate(
        {"max_turns": 4, "judge": "judge"},
        roles=[
            *scripted(["You're right."], ["You're right."]),
            {"id": "judge", "model": "scripted", "script": [verdict(0.1)]},
        ],
    )
    _, rec = await run_flow(world)
    assert stop_reason_of(rec) == "max_turns"  # the concessions are the judge's to weigh


async def test_no_new_arguments_twice_is_a_judged_stalemate() -> None:
    script = [verdict(0.1), verdict(0.1), verdict(0.2, new=[]), verdict(0.2, new=[])]
    _, rec = await run_flow(judged(script))
    assert stop_reason_of(rec) == "stalemate_repetition"


async def test_a_malformed_verdict_is_retried_once_then_ignored_with_a_warning() -> None:
    script = [
        "PRO opened well.",  # turn 1: malformed ...
        verdict(0.1),  # ... retried: valid
        "{not json",  # turn 2: malformed ...
        '{"stance": "pro", "agreement": 3}',  # ... and again: ignored
        verdict(0.2),
        verdict(0.2),
    ]
    session, rec = await run_flow(judged(script, max_turns=4))
    judges = rec.of("system", "judge")
    assert [(j.about, j.valid) for j in judges] == [
        ("m1", False),
        ("m1", True),
        ("m4", False),
        ("m4", False),
        ("m7", True),
        ("m9", True),
    ]
    assert judges[0].verdict == {"error": "no JSON object found", "attempt": 1}
    assert judges[3].verdict["attempt"] == 2
    warnings = [w.message for w in rec.of("system", "warning")]
    assert warnings == [
        "judge judge: no valid JSON verdict on m4 after one retry; the verdict is ignored"
    ]
    retry = [m for m in messages(rec) if m.sender == "judge"][1]
    assert retry.reply_to == "m1"
    assert session.status.extra["debate"]["verdicts"][1] is None
    assert stop_reason_of(rec) == "max_turns"
    assert messages(rec)[-1].sender == "moderator"


async def test_a_deeply_nested_verdict_breaks_the_contract_and_the_debate_ends() -> None:
    deep = "[" * 3000 + "]" * 3000
    session, rec = await run_flow(judged([deep], max_turns=4))
    judges = rec.of("system", "judge")
    assert len(judges) == 8 and not any(j.valid for j in judges)
    assert judges[0].verdict == {"error": "the JSON nests deeper than 32 levels", "attempt": 1}
    assert len(rec.of("system", "warning")) == 4
    assert stop_reason_of(rec) == "max_turns" and len(rec.of("world", "stop")) == 1
    assert messages(rec)[-1].sender == "moderator"
    assert session.status.state == "finished"


@pytest.mark.parametrize(
    ("agreement", "why"),
    [
        (True, "score 'agreement' missing or not a number"),
        ("0.9", "score 'agreement' missing or not a number"),
        (None, "score 'agreement' missing or not a number"),
        (1.5, "score 'agreement' = 1.5 is outside 0..1"),
        (float("nan"), "score 'agreement' = nan is outside 0..1"),
    ],
)
def test_the_agreement_is_a_number_from_0_to_1_as_for_any_judge(agreement: Any, why: str) -> None:
    text = json.dumps(
        {"stance": "pro", "new_arguments": [], "concessions": [], "agreement": agreement}
    )
    with pytest.raises(Invalid, match=why):
        parse_judgment(text)
    assert parse_judgment(verdict(1)).scores["agreement"] == 1.0


async def test_a_boolean_agreement_is_no_concession() -> None:
    true = json.dumps(
        {"stance": "pro", "new_arguments": ["x"], "concessions": [], "agreement": True}
    )
    _, rec = await run_flow(judged([true], max_turns=4))
    assert not any(j.valid for j in rec.of("system", "judge"))
    assert stop_reason_of(rec) == "max_turns"


async def test_with_dynamic_termination_off_the_judge_never_ends_the_debate() -> None:
    world = debate(
        {"max_turns": 8, "judge": "judge", "dynamic_termination": False},
        roles=[
            *scripted([long_line("p{n}")], [long_line("c{n}")]),
            {"id": "judge", "model": "scripted", "script": [verdict(0.9, new=[])]},
        ],
    )
    session, rec = await run_flow(world)
    assert stop_reason_of(rec) == "max_turns"
    assert rec.stop().detail == "8 of 8 debater turns"
    judges = rec.of("system", "judge")
    assert len(judges) == 8 and all(j.valid for j in judges)  # the judge still runs
    assert session.status.extra["judge_scores"]["judge"]["agreement"] == 0.9
    modes = rec.of("system", "mode")
    assert modes[4].data["checks"]["dynamic"] is False
    assert modes[4].data["checks"]["agreement"] == 0.9
    assert "dynamic termination off" in modes[4].data["detail"]


async def test_the_offline_judge_writes_prose_so_its_verdicts_are_ignored() -> None:
    _, rec = await run_flow(debate({"max_turns": 2, "judge": "judge"}))
    assert [j.valid for j in rec.of("system", "judge")] == [False] * 4
    assert len(rec.of("system", "warning")) == 2
    assert stop_reason_of(rec) == "max_turns"
    assert messages(rec)[-1].sender == "moderator"


# ---------------------------------------------------------------------- resume
@pytest.mark.parametrize("anyio_backend", ["asyncio"])  # the SQLite store: asyncio only
async def test_a_restored_debate_continues_counting_where_it_stopped(tmp_path: Path) -> None:
    capture = Capture()
    roles = [
        *scripted([long_line("p{n}")], [long_line("c{n}")]),
        {"id": "moderator", "model": "capture"},
    ]
    world = debate({"max_turns": 6}, roles=roles)
    async with rolecall.open_session(world, data_dir=tmp_path) as first:
        for _ in range(3):
            await first.step()
    rec = Recorder()
    models = {"capture": capture}
    async with rolecall.resume(
        first.session_id, data_dir=tmp_path, models=models, sinks=[rec]
    ) as second:
        await second.run()
    assert [e.data["turn"] for e in rec.of("system", "mode")] == [4, 5, 6]
    assert rec.stop().reason == "max_turns"
    assert second.transcript[-1].sender == "moderator"
    # the synthesis after the resume cites the messages said before it
    assert "[m1]" in (capture.requests[-1].info.instruction or "")


class FlakyJudge:
    """Fails its first call (the provider went away), then answers with a verdict."""

    name = "flaky"

    def __init__(self, fail_on: int, prose_on: int = 0) -> None:
        self.calls = 0
        self.fail_on = fail_on
        self.prose_on = prose_on

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        if self.calls == self.fail_on:
            raise ProviderUnavailable("flaky: provider went away", model="flaky")
        yield TextDelta("Prose." if self.calls == self.prose_on else verdict(0.1))
        yield Usage(10, 10)


@pytest.mark.parametrize(
    ("fail_on", "prose_on", "senders"),
    [
        (1, 0, ["pro", "judge", "con", "judge", "moderator"]),
        # a malformed first reply, then the retry fails: resume asks the judge afresh
        (2, 1, ["pro", "judge", "judge", "con", "judge", "moderator"]),
    ],
)
async def test_a_failed_judge_turn_pauses_and_resume_judges_the_same_turn_once(
    fail_on: int, prose_on: int, senders: list[str]
) -> None:
    world = debate(
        {"max_turns": 2, "judge": "judge"},
        roles=[
            *scripted([long_line("p{n}")], [long_line("c{n}")]),
            {"id": "judge", "model": "flaky"},
        ],
    )
    async with opened(world, models={"flaky": FlakyJudge(fail_on, prose_on)}) as (session, rec):
        await session.run()
        assert session.status.state == "paused" and session.status.pause_reason == "error"
        assert session.status.extra["debate"]["turns"] == []
        await session.run()
    assert rec.stop().reason == "max_turns"
    debaters = [m.id for m in session.transcript if m.sender in ("pro", "con")]
    assert session.status.extra["debate"]["turns"] == debaters
    assert [e.data["turn"] for e in rec.of("system", "mode")] == [1, 2]
    assert [m.sender for m in session.transcript] == senders
