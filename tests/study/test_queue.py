"""Role queues (modes.md, Study): 0.4 structural + 0.3 lexical + 0.3 topic, ties by name."""

from __future__ import annotations

import pytest

from rolecall.study.queue import (
    ROLES,
    STRUCTURAL,
    RoleScore,
    build_plan,
    content_words,
    is_complete,
    lexical_score,
    scaffold,
    score_roles,
    topic_score,
    unit_queue,
)
from rolecall.study.segment import Kind, Unit, words_of
from rolecall.world.library import builtin_roles
from tests.conftest import ROOT

PROFILES = {rid: f"{t['description']}\n{t['system_prompt']}" for rid, t in builtin_roles().items()}
NEUTRAL = "Plain words about nothing in particular, kept neutral on purpose."


def unit(kind: Kind, text: str = NEUTRAL, index: int = 1, heading: str | None = "H") -> Unit:
    return Unit(index, 0, 1, 1, heading, (heading,) if heading else (), kind, (text,))


def test_score_is_weighted_sum_rounded() -> None:
    s = RoleScore("explainer", structural=1.0, lexical=1 / 3, topic=0.25)
    assert s.score == round(0.4 * 1.0 + 0.3 / 3 + 0.3 * 0.25, 6) == 0.575


@pytest.mark.parametrize(
    ("kind", "first"),
    [
        ("introduction", "explainer"),
        ("body", "explainer"),
        ("methodology", "challenger"),
        ("conclusion", "summarizer"),
    ],
)
def test_structural_part_leads_by_kind(kind: Kind, first: str) -> None:
    scores = score_roles(unit(kind), {})
    assert all(s.lexical == 0 and s.topic == 0 for s in scores)
    top = sorted(scores, key=lambda s: (-s.score, s.role))[0]
    assert top.role == first  # the kind's leading role scores highest
    queue = unit_queue(scores)
    # scaffolding: the explainer speaks before the challenger in every unit
    assert queue.index("explainer") < queue.index("challenger")
    if first != "challenger":
        assert queue[0] == first
    else:
        assert queue[:2] == ["explainer", "challenger"]
    assert [s.structural for s in scores] == [STRUCTURAL[kind][r] for r in ROLES]


def test_lexical_cues_move_a_role_up() -> None:
    text = "For example, imagine a student; consider the case of a nurse, such as Ana."
    scores = {s.role: s for s in score_roles(unit("conclusion", text), {})}
    assert scores["example_generator"].lexical == 1.0  # capped at 3 hits
    assert unit_queue(list(scores.values()))[0] == "example_generator"
    assert lexical_score(words_of("however, the evidence"), "challenger") == pytest.approx(2 / 3)
    assert lexical_score(words_of("nothing relevant"), "challenger") == 0.0


def test_phrase_cues_count_once() -> None:
    # "for example" counts once, not also as "example"
    assert lexical_score(words_of("for example"), "example_generator") == pytest.approx(1 / 3)


def test_topic_part_is_overlap_with_the_role_profile() -> None:
    words = content_words("Gardens need water, sunlight and patient gardeners every season.")
    assert topic_score(words, "An expert on gardens, sunlight and water.") == 0.75
    assert topic_score(words, "") == 0.0
    profile = {"misconception_spotter": "gardens sunlight water season gardeners"}
    text = "Gardens need water, sunlight and patient gardeners every season."
    scores = score_roles(unit("body", text), profile)
    assert unit_queue(scores)[0] == "misconception_spotter"  # 0.4*0.6 + 0.3*1.0 = 0.54 > 0.36


def test_ties_are_broken_by_role_name() -> None:
    scores = [RoleScore(r, 0.5, 0.0, 0.0) for r in reversed(ROLES)]
    by_name = sorted(ROLES)  # challenger sorts first, so the scaffold moves explainer ahead
    assert scaffold(by_name) == [
        "explainer",
        "challenger",
        "example_generator",
        "misconception_spotter",
        "summarizer",
    ]
    assert unit_queue(scores) == scaffold(by_name)


def test_first_unit_opens_with_explainer() -> None:
    scores = score_roles(unit("conclusion", index=0), {})
    assert unit_queue(scores)[0] == "summarizer"
    assert unit_queue(scores, first_unit=True)[0] == "explainer"
    plan = build_plan("# Summary\n\nIn short, the key takeaway is this one.\n", PROFILES)
    assert plan.units[0].kind == "conclusion"
    assert plan.queues[0][0] == "explainer"


def test_plan_of_the_sample_notes() -> None:
    text = (ROOT / "worlds/study/notes.md").read_text("utf-8")
    plan = build_plan(text, PROFILES)
    assert plan == build_plan(text, PROFILES)  # deterministic
    assert len(plan.queues) == len(plan.units) == 9
    assert all(sorted(q) == sorted(ROLES) for q in plan.queues)  # one turn per role per unit
    assert plan.slots == 45
    assert plan.queues[0][0] == "explainer"
    kinds_first = {u.kind: q[0] for u, q in zip(plan.units, plan.queues, strict=True)}
    # methodology is the challenger's unit; the explainer still speaks just before it
    methodology = next(
        q for u, q in zip(plan.units, plan.queues, strict=True) if u.kind == "methodology"
    )
    assert list(methodology[:2]) == ["explainer", "challenger"]
    assert kinds_first["methodology"] == "explainer"
    assert all(q.index("explainer") < q.index("challenger") for q in plan.queues)
    assert kinds_first["conclusion"] == "summarizer"
    assert plan.weights[0] == {s.role: s.score for s in plan.scores[0]}


def test_completion_needs_every_unit_role_slot() -> None:
    full = list(ROLES)
    assert is_complete([full, full], 2)
    assert not is_complete([full], 2)
    assert not is_complete([full, full[:-1]], 2)
    assert not is_complete([full[1:], full], 2)
