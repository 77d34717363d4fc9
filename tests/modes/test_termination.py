"""The pure termination rules of the debate and consensus presets (modes.md)."""

from __future__ import annotations

import time
from fractions import Fraction

import pytest

from rolecall.modes.termination import (
    CONCESSION_PHRASES,
    DebateVerdict,
    agreement,
    concession,
    consensus_decision,
    debate_decision,
    disengaged,
    jaccard,
    judged_debate_decision,
    keywords,
    objection,
    repetition,
)

PAD = " ".join(["and the of to in a it is on"] * 3)  # 27 short words: no keywords


def turn(*words: str) -> str:
    """A turn of at least 20 words whose keywords are exactly ``words``."""
    return " ".join(words) + " " + PAD


def distinct(i: int) -> str:
    return turn(*(f"unique{i}x{j}" for j in range(5)))


# ------------------------------------------------------------------- concession
@pytest.mark.parametrize("phrase", CONCESSION_PHRASES)
def test_every_concession_phrase_concedes(phrase: str) -> None:
    assert concession(f"Well. {phrase.capitalize()} about the costs.") == phrase


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("YOU'RE RIGHT about the budget.", "you're right"),
        ("You\u2019re right about the budget.", "you're right"),  # typographic apostrophe
        ("Fine, I concede the point on safety.", "i concede"),
        ("No, you're right, I was wrong.", "you're right"),  # the comma ends the negation
        ("That's a fair point, but the costs remain.", "fair point"),
        ("That is not a fair point.", None),
        ("Kai agreed with the plan.", None),
        ("I don't think you're right.", None),
        ("That's hardly a fair point.", None),
        ("I would never say I concede anything.", None),
        ("I agree", "i agree"),
        ("unfair pointers everywhere", None),
        ("I agreed yesterday, not today.", None),  # 'i agreed' is not the phrase 'i agree'
        ("Your point is unfair.", None),
        ("", None),
    ],
)
def test_concession_is_whole_phrase_case_insensitive_and_not_negated(
    text: str, expected: str | None
) -> None:
    assert concession(text) == expected


# --------------------------------------------------------------------- keywords
def test_keywords_are_lowercased_words_longer_than_four_characters() -> None:
    assert keywords("Cities, CARS and buses: safer streets! Four words") == {
        "cities",
        "buses",
        "safer",
        "streets",
        "words",
    }


@pytest.mark.parametrize(
    ("turns", "expected"),
    [
        # four sets sharing a core of 3 plus one unique word: every pair 3/5
        ([turn("alpha", "bravo", "charlie", f"uniq{i}x") for i in range(4)], Fraction(3, 5)),
        # core of 4 plus one unique word: every pair 4/6
        (
            [turn("alpha", "bravo", "charlie", "delta", f"uniq{i}x") for i in range(4)],
            Fraction(2, 3),
        ),
        # two empty sets: only the one pair of non-empty sets counts
        ([turn("alpha", "bravo"), PAD, turn("alpha", "bravo"), PAD], Fraction(1)),
        ([PAD, PAD, PAD, PAD], None),
        ([distinct(i) for i in range(4)], Fraction(0)),
    ],
)
def test_repetition_is_the_average_jaccard_over_pairs(
    turns: list[str], expected: Fraction | None
) -> None:
    assert repetition(turns) == expected


def test_jaccard() -> None:
    assert jaccard(frozenset("ab"), frozenset("bc")) == Fraction(1, 3)
    assert jaccard(frozenset(), frozenset()) == 0


@pytest.mark.parametrize(
    ("counts", "expected"),
    [((19, 19), True), ((20, 19), False), ((19, 20), False), ((20, 20), False), ((1, 5), True)],
)
def test_disengagement_needs_each_of_the_last_two_under_20_words(
    counts: tuple[int, int], expected: bool
) -> None:
    turns = [distinct(0), distinct(1), *(" ".join(["word"] * n) for n in counts)]
    assert disengaged(turns) is expected


# ------------------------------------------------------------- debate decisions
SHORT = "Short words only here."  # 4 words, no keywords
CONCEDE = "You're right, that settles it."  # 5 words
REPEAT = turn("alpha", "bravo", "charlie", "delta")

CASES = [
    # (name, turns, max_turns, dynamic, reason)
    ("three turns: nothing is checked", [distinct(1), distinct(2), CONCEDE], 10, True, None),
    (
        "concession in turn 3 is not checked at turn 4",
        [distinct(1), distinct(2), CONCEDE, distinct(4)],
        10,
        True,
        None,
    ),
    (
        "concession in the last of 4 turns",
        [distinct(1), distinct(2), distinct(3), "Fair point. " + PAD],
        10,
        True,
        "concession",
    ),
    (
        "negated concession",
        [distinct(1), distinct(2), distinct(3), "Not a fair point. " + PAD],
        10,
        True,
        None,
    ),
    ("repetition above 0.6", [REPEAT] * 4, 10, True, "stalemate_repetition"),
    (
        "repetition of exactly 0.6 does not stop",
        [turn("alpha", "bravo", "charlie", f"uniq{i}x") for i in range(4)],
        10,
        True,
        None,
    ),
    (
        "disengagement",
        [distinct(1), distinct(2), SHORT, SHORT + " again"],
        10,
        True,
        "stalemate_disengagement",
    ),
    (
        "exactly 20 words is not disengaged",
        [distinct(1), distinct(2), " ".join(["word"] * 20), SHORT],
        10,
        True,
        None,
    ),
    (
        "order: concession before repetition and disengagement",
        ["You're right.", "You're right.", "You're right.", "You're right."],
        10,
        True,
        "concession",
    ),
    (
        "order: repetition before disengagement",
        ["alpha bravo charlie"] * 4,
        10,
        True,
        "stalemate_repetition",
    ),
    ("max_turns", [distinct(i) for i in range(6)], 6, True, "max_turns"),
    ("below max_turns", [distinct(i) for i in range(5)], 6, True, None),
    (
        "a dynamic rule at the cap wins",
        [*(distinct(i) for i in range(5)), CONCEDE],
        6,
        True,
        "concession",
    ),
    ("dynamic off: only max_turns", [REPEAT] * 4, 10, False, None),
    ("dynamic off: max_turns still ends it", [CONCEDE] * 4, 4, False, "max_turns"),
    ("max_turns 2", [distinct(1), distinct(2)], 2, True, "max_turns"),
]


@pytest.mark.parametrize(
    ("turns", "max_turns", "dynamic", "reason"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_debate_decision(
    turns: list[str], max_turns: int, dynamic: bool, reason: str | None
) -> None:
    decision, checks = debate_decision(turns, max_turns=max_turns, dynamic=dynamic)
    assert (decision.reason if decision else None) == reason
    assert checks["turns"] == len(turns)


def test_decision_details_say_why() -> None:
    decision, checks = debate_decision([REPEAT] * 4, max_turns=10)
    assert decision is not None
    assert "1.000" in decision.detail and "above 0.6" in decision.detail
    assert checks["repetition"] == 1.0
    decision, _ = debate_decision([distinct(1), distinct(2), SHORT, SHORT], max_turns=10)
    assert decision is not None and decision.data == {"word_counts": [4, 4]}


# --------------------------------------------------------------- judged debates
def v(agreement: float, new: int = 1, conceded: int = 0) -> DebateVerdict:
    return DebateVerdict(agreement, new, conceded)


@pytest.mark.parametrize(
    ("verdicts", "max_turns", "reason"),
    [
        ([v(0.9), v(0.9), v(0.9)], 10, None),  # nothing before 4 debater turns
        ([v(0.1), v(0.2), v(0.3), v(0.8)], 10, "concession"),  # at least 0.8
        ([v(0.1), v(0.2), v(0.3), v(0.79)], 10, None),
        ([v(0.1), v(0.2), v(0.3, new=0), v(0.3, new=0)], 10, "stalemate_repetition"),
        ([v(0.1), v(0.2), None, v(0.3, new=0)], 10, None),  # an ignored verdict breaks the pair
        ([v(0.1), v(0.2), v(0.3, new=0), v(0.9, new=0)], 10, "concession"),  # order
        ([v(0.1), None, None, None], 4, "max_turns"),
        ([None, None, None, None], 10, None),
    ],
)
def test_judged_debate_decision(
    verdicts: list[DebateVerdict | None], max_turns: int, reason: str | None
) -> None:
    decision, _ = judged_debate_decision(verdicts, max_turns=max_turns)
    assert (decision.reason if decision else None) == reason


def test_with_dynamic_termination_off_only_max_turns_stops_a_judged_debate() -> None:
    verdicts = [v(0.9, new=0)] * 6
    decision, checks = judged_debate_decision(verdicts, max_turns=8, dynamic=False)
    assert decision is None
    assert checks["dynamic"] is False and checks["agreement"] == 0.9  # measured, not acted on
    decision, _ = judged_debate_decision([*verdicts, v(0.9), v(0.9)], max_turns=8, dynamic=False)
    assert decision is not None and decision.reason == "max_turns"


# -------------------------------------------------------------------- consensus
@pytest.mark.parametrize(
    ("text", "agrees", "objects"),
    [
        ("I agree with the plan.", "i agree", None),
        ("Agreed. Let's ship it.", "agreed", None),
        ("Kai agreed, but I did not.", None, None),
        ("I don't agree with this.", None, "i don't agree"),
        ("I can't say I agree.", None, None),
        ("No objections from me.", "no objections", None),
        ("I agree, but my concern is the cost.", "i agree", "my concern is"),
        ("I wouldn't say I disagree.", None, None),
        ("So my answer is no, not yet.", None, "my answer is no"),
        ("I support it, and I'm on board.", "i support", None),
    ],
)
def test_agreement_and_objection_phrases(
    text: str, agrees: str | None, objects: str | None
) -> None:
    assert agreement(text) == agrees
    assert objection(text) == objects


PEOPLE = ["analyst", "creative", "critic"]


@pytest.mark.parametrize(
    ("turns", "holds"),
    [
        ([("analyst", "I agree."), ("creative", "I agree.")], False),  # no full round
        ([("analyst", "I agree."), ("creative", "I agree."), ("critic", "I agree.")], True),
        (
            [
                ("analyst", "I agree."),
                ("creative", "I agree."),
                ("critic", "I agree, but I object to the cost."),
            ],
            False,
        ),
        ([("analyst", "I agree."), ("creative", "Nice idea."), ("critic", "I agree.")], False),
        # the last full round is the last three turns, whatever round they started in
        (
            [
                ("analyst", "No."),
                ("creative", "I agree."),
                ("critic", "I agree."),
                ("analyst", "Agreed."),
            ],
            True,
        ),
        ([("analyst", "I agree."), ("analyst", "I agree."), ("critic", "I agree.")], False),
    ],
)
def test_consensus_over_the_last_full_round(turns: list[tuple[str, str]], holds: bool) -> None:
    result, detail, _ = consensus_decision(turns, PEOPLE)
    assert result is holds, detail


def test_a_long_reply_full_of_negated_phrases_is_read_in_linear_time() -> None:
    # every phrase found looked back over the whole text: 120 KB took 38 s, holding the loop
    text = "not fair point, you're not right; I don't agree " * 2500
    started = time.perf_counter()
    assert concession(text) is None and agreement(text) is None
    assert time.perf_counter() - started < 5
    assert concession("x" * 300 + " not " + "y" * 600 + " fair point") is None  # long words
    assert concession("not - fair point") == "fair point"  # a dash ends the clause
