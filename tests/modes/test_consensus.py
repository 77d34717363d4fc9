"""The consensus preset: round-robin participants, consensus or max rounds, a synthesis."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rolecall.errors import WorldError
from rolecall.modes.consensus import PROFILES
from rolecall.world.models import World
from tests.helpers import Recorder, run_flow, world_from

pytestmark = pytest.mark.anyio

TOPIC = "Which database should the team adopt?"


def consensus(
    options: dict[str, Any] | None = None, roles: list[dict[str, Any]] | None = None, **extra: Any
) -> World:
    data: dict[str, Any] = {"name": "c", "mode": "consensus", "topic": TOPIC}
    if options is not None:
        data["consensus"] = options
    if roles is not None:
        data["roles"] = roles
    data.update(extra)
    return world_from(data)


def say(role: str, *lines: str) -> dict[str, Any]:
    return {"id": role, "model": "scripted", "script": list(lines)}


def messages(rec: Recorder) -> list[Any]:
    return rec.of("messages", "message")


async def test_offline_participants_reach_a_synthesis_in_round_robin() -> None:
    _, rec = await run_flow(consensus())
    msgs = messages(rec)
    people = ["analyst", "creative", "critic"]
    turns = [m.sender for m in msgs[:-1]]
    assert turns == [people[i % 3] for i in range(len(turns))]
    assert len(turns) % 3 == 0
    assert msgs[-1].sender == "synthesizer" and msgs[-1].step_id == "synthesis"
    assert rec.stop().reason in ("consensus", "max_turns")
    kinds = [(e.event.topic, e.event.type) for e in rec.events]
    assert kinds[-1] == ("world", "stop")
    assert rec.steps()[:3] == ["open_analyst", "open_creative", "open_critic"]


async def test_every_participant_agreeing_over_a_full_round_is_consensus() -> None:
    roles = [
        say("analyst", "Proposal: use Postgres.", "I agree with the Postgres plan."),
        say("creative", "Or a document store.", "I agree, Postgres with JSON columns."),
        say("critic", "Backups worry me.", "Agreed. Backups are covered now."),
    ]
    _, rec = await run_flow(consensus(roles=roles))
    assert rec.stop().reason == "consensus"
    assert len(messages(rec)) == 7  # two rounds and the synthesis
    check = rec.of("system", "mode")[-1]
    assert check.mode == "consensus" and check.data["stop"] is True
    assert [s["agrees"] for s in check.data["stances"]] == [True, True, True]


async def test_an_open_objection_blocks_consensus_until_max_rounds() -> None:
    roles = [
        say("analyst", "I agree."),
        say("creative", "I agree."),
        say("critic", "I agree in part, but I object to the cost."),
    ]
    _, rec = await run_flow(consensus({"max_rounds": 3}, roles=roles))
    assert rec.stop().reason == "max_turns"
    assert rec.stop().detail == "3 of 3 rounds without consensus"
    assert len(messages(rec)) == 3 * 3 + 1
    assert messages(rec)[-1].sender == "synthesizer"


async def test_one_round_only() -> None:
    _, rec = await run_flow(consensus({"max_rounds": 1}))
    assert [m.sender for m in messages(rec)] == ["analyst", "creative", "critic", "synthesizer"]


@pytest.mark.parametrize(("profile", "people"), list(PROFILES.items()))
def test_profiles_name_the_roles(profile: str, people: tuple[str, ...]) -> None:
    world = consensus({"profile": profile})
    assert world.role_ids[: len(people)] == list(people)
    assert "synthesizer" in world.role_ids
    assert len(world.role_ids) == len(set(world.role_ids))
    assert world.flow is not None and world.flow.final is not None
    assert world.flow.final.speaker == "synthesizer"


async def test_in_brainstorm_the_synthesizer_participates_and_closes() -> None:
    world = consensus({"profile": "brainstorm", "max_rounds": 2})
    assert world.role_ids == ["dreamer", "realist", "synthesizer"]
    _, rec = await run_flow(world)
    senders = [m.sender for m in messages(rec)]
    assert senders[:3] == ["dreamer", "realist", "synthesizer"]
    assert senders[-1] == "synthesizer" and messages(rec)[-1].step_id == "synthesis"


def test_participants_override_the_profile() -> None:
    world = consensus({"participants": ["engineer", "critic", "tester", "analyst"]})
    assert world.role_ids == ["engineer", "critic", "tester", "analyst", "synthesizer"]
    assert world.flow is not None
    assert [s.id for s in world.flow.steps][:4] == [
        "open_engineer",
        "open_critic",
        "open_tester",
        "open_analyst",
    ]


def test_a_user_defined_participant() -> None:
    world = consensus(
        {"participants": ["analyst", "critic", "mayor"]},
        roles=[{"id": "mayor", "description": "the city's mayor"}],
    )
    assert world.role("mayor").description == "the city's mayor"


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (
            {"participants": ["analyst", "critic"]},
            "consensus.participants: a consensus needs at least 3 participants, got 2 (analyst, critic)",
        ),
        (
            {"participants": []},  # not the profile's participants: an explicit empty list
            "consensus.participants: a consensus needs at least 3 participants, got 0 (none)",
        ),
        (
            {"profile": "party"},
            "consensus.profile: unknown profile 'party' (profiles: balanced, technical-review, brainstorm, five-voices)",
        ),
        (
            {"participants": ["analyst", "critic", "ghost"]},
            "consensus.participants[2]: no role 'ghost' (define it under roles:, or use a role library template such as analyst, creative, critic, engineer, architect, tester)",
        ),
        (
            {"participants": ["analyst", "critic", "critic"]},
            "consensus.participants: duplicate participants (critic)",
        ),
        (
            {"max_rounds": 0},
            "consensus.max_rounds: input should be greater than or equal to 1 (got 0)",
        ),
        ({"rounds": 3}, "consensus.rounds: unknown field (did you mean max_rounds?)"),
        (
            {"speed": 3},
            "consensus.speed: unknown field (fields: profile, participants, max_rounds, judge)",
        ),
        (
            {"judge": "critic"},
            "consensus.judge: 'critic' already speaks in the consensus; use another role",
        ),
    ],
)
def test_bad_consensus_blocks_are_errors(options: dict[str, Any], problem: str) -> None:
    with pytest.raises(WorldError) as info:
        consensus(options)
    assert problem in info.value.problems


def test_repeated_and_too_few_participants_are_reported_at_once() -> None:
    with pytest.raises(WorldError) as info:
        consensus({"participants": ["analyst", "analyst", "ghost"]})
    assert info.value.problems == [
        "consensus.participants: duplicate participants (analyst)",
        "consensus.participants: a consensus needs at least 3 participants, got 2 (analyst, ghost)",
        "consensus.participants[2]: no role 'ghost' (define it under roles:, or use a role "
        "library template such as analyst, creative, critic, engineer, architect, tester)",
    ]


async def test_a_judge_may_declare_consensus_after_a_round() -> None:
    verdict = {"consensus": True, "agreement": 0.9, "open_objections": []}
    roles = [
        say("analyst", "Postgres."),
        say("creative", "Postgres, maybe."),
        say("critic", "Hmm."),
        say("judge", "Round over: " + json.dumps(verdict)),
    ]
    session, rec = await run_flow(consensus({"judge": "judge"}, roles=roles))
    assert rec.stop().reason == "consensus"
    assert [m.sender for m in messages(rec)] == [
        "analyst",
        "creative",
        "critic",
        "judge",
        "synthesizer",
    ]
    (judge,) = rec.of("system", "judge")
    assert judge.valid and judge.about == "m3"
    assert judge.scores == {"consensus": 1.0, "agreement": 0.9, "open_objections": 0.0}
    assert session.status.extra["judge_scores"]["judge"]["agreement"] == 0.9


async def test_a_judge_saying_no_keeps_the_rounds_going() -> None:
    no = json.dumps({"consensus": False, "agreement": 0.4, "open_objections": ["cost"]})
    roles = [
        say("analyst", "I agree."),
        say("creative", "I agree."),
        say("critic", "I agree."),
        say("judge", no),
    ]
    _, rec = await run_flow(consensus({"judge": "judge", "max_rounds": 2}, roles=roles))
    assert rec.stop().reason == "max_turns"  # the judge replaces the phrase rules
    assert len(rec.of("system", "judge")) == 2


async def test_a_hostile_or_boolean_agreement_verdict_is_ignored() -> None:
    boolean = json.dumps({"consensus": True, "agreement": True, "open_objections": []})
    deep = "[" * 3000 + "]" * 3000
    roles = [
        say("analyst", "I agree."),
        say("creative", "I agree."),
        say("critic", "I agree."),
        say("judge", boolean, deep),
    ]
    session, rec = await run_flow(consensus({"judge": "judge", "max_rounds": 1}, roles=roles))
    judges = rec.of("system", "judge")
    assert [j.verdict["error"] for j in judges] == [
        "score 'agreement' missing or not a number (not a boolean or a string)",
        "the JSON nests deeper than 32 levels",
    ]
    assert len(rec.of("system", "warning")) == 1
    assert rec.stop().reason == "max_turns" and session.status.state == "finished"


def test_settings_fit_every_round_and_the_synthesis() -> None:
    assert consensus({"max_rounds": 4}).settings.max_turns == 13
    assert consensus({"max_rounds": 4, "judge": "judge"}).settings.max_turns == 21
