"""Reallocation and stability (modes.md, Study): the gate, bounded delay, hysteresis
locks and no A,B,A,B oscillation, on the pure scheduler."""

from __future__ import annotations

import json

import pytest

from rolecall.study.intent import classify
from rolecall.study.queue import ROLES, build_plan
from rolecall.study.realloc import (
    choose_speaker,
    completes_oscillation,
    count_oscillations,
    osa_distance,
    realloc_order,
    realloc_scores,
)
from rolecall.study.scheduler import NextTurn, Scheduler, StudyState
from rolecall.world.library import builtin_roles

E, C, S, X, M = (
    "explainer",
    "challenger",
    "summarizer",
    "example_generator",
    "misconception_spotter",
)
BASE = [E, C, S, X, M]
FLAT = dict.fromkeys(ROLES, 0.5)
EXAMPLE = classify("Give me an example")  # example_request, 0.8
# with flat weights and nobody having spoken, the order an example request asks for:
EXAMPLE_ORDER = [X, E, M, C, S]


def scheduler(
    units: int = 4, queue: list[str] | None = None, *, delay: int = 3, lock: int = 7
) -> Scheduler:
    return Scheduler([list(queue or BASE)] * units, [FLAT] * units, delay=delay, lock=lock)


def speak(s: Scheduler, turns: int) -> list[str]:
    """Let ``turns`` turns happen; the speakers, in order."""
    out = []
    for _ in range(turns):
        nxt = s.next_turn()
        assert nxt is not None
        s.note_avoided(nxt)
        s.record(nxt.speaker)
        out.append(nxt.speaker)
    return out


def names(events: list[tuple[str, dict[str, object]]]) -> list[str]:
    return [name for name, _ in events]


# ----------------------------------------------------------------- helpers
@pytest.mark.parametrize(
    ("a", "b", "d"),
    [
        (BASE, BASE, 0),
        ([E, C, S, X, M], [C, E, S, X, M], 1),  # one adjacent swap
        ([E, C, S, X, M], [S, C, E, X, M], 2),  # a swap of non-neighbours
        ([E, C, S, X, M], [X, E, C, S, M], 2),  # one role moved three places forward
        ([E, C, S, X, M], [M, X, S, C, E], 4),
        ([], [E], 1),
    ],
)
def test_osa_distance(a: list[str], b: list[str], d: int) -> None:
    assert osa_distance(a, b) == d == osa_distance(b, a)


def test_realloc_score_formula_and_order() -> None:
    weights = {E: 0.475, C: 0.12, S: 0.24, X: 0.2, M: 0.235}
    times = {E: 3, C: 1, S: 0, X: 2, M: 0}
    scores = realloc_scores("example_request", weights, times)
    assert scores[X] == round(10 * 1.0 + 0.1 * 0.2 - 0.2 * 2, 6) == 9.62
    assert scores[E] == round(10 * 0.5 + 0.1 * 0.475 - 0.2 * 3, 6)
    assert realloc_order("example_request", weights, times) == [X, E, M, S, C]
    # a locked role goes last whatever its score
    assert realloc_order("example_request", weights, times, locked={X}) == [E, M, S, C, X]
    # ties by role name
    assert realloc_order("example_request", FLAT, {}) == EXAMPLE_ORDER  # C before S at 1.05


# -------------------------------------------------------------------- gate
def test_below_threshold_nothing_changes() -> None:
    s = scheduler()
    speak(s, 2)
    before = s.state.to_dict()
    tie = classify("Can you clarify with an example?")
    assert tie.confidence == 0.65
    events = s.interrupt(tie, "m3")
    assert names(events) == ["classification", "reallocation_skipped"]
    skipped = events[1][1]
    assert skipped["reason"] == "low_confidence"
    assert "0.65 is below 0.7" in str(skipped["reasons"])
    other = s.interrupt(classify("xyzabc123"), "m4")
    assert other[1][1]["reason"] == "low_confidence"
    after = s.state.to_dict()
    assert {k: v for k, v in after.items() if k != "counters"} == {
        k: v for k, v in before.items() if k != "counters"
    }
    assert speak(s, 3) == [S, X, M]


def test_too_little_change_is_refused() -> None:
    s = scheduler(queue=[E, X, M, C, S])  # one adjacent swap from EXAMPLE_ORDER
    events = s.interrupt(EXAMPLE, "m1")
    assert names(events) == ["classification", "reallocation_skipped"]
    data = events[1][1]
    assert (data["reason"], data["distance"], data["new"]) == (
        "too_little_change",
        1,
        EXAMPLE_ORDER,
    )
    assert s.state.pending is None
    same = scheduler(queue=EXAMPLE_ORDER)
    assert same.interrupt(EXAMPLE, "m1")[1][1]["distance"] == 0


def test_too_soon_while_a_reallocation_is_pending() -> None:
    s = scheduler(delay=3)
    assert names(s.interrupt(EXAMPLE, "m1")) == ["classification", "reallocation"]
    speak(s, 2)
    events = s.interrupt(classify("A summary of the key points please"), "m4")
    assert events[1][0] == "reallocation_skipped"
    assert events[1][1]["reason"] == "too_soon"
    assert events[1][1]["pending"] == "r1"
    speak(s, 1)  # r1 takes effect now (turn 3)
    assert s.state.pending is None
    assert names(s.interrupt(classify("A summary of the key points please"), "m6"))[1] == (
        "reallocation"
    )


# ------------------------------------------------------------------- delay
@pytest.mark.parametrize("delay", [2, 3])
def test_reallocation_takes_effect_d_turns_later(delay: int) -> None:
    s = scheduler(delay=delay)
    speak(s, 1)  # E
    events = s.interrupt(EXAMPLE, "m2")
    data = events[1][1]
    assert data["due_turn"] == 1 + delay
    assert data["old"] == BASE
    assert data["new"] == EXAMPLE_ORDER
    assert data["distance"] >= 2
    assert "scores" in data and data["scores"][X]["alignment"] == 1.0
    # with the old order the next speakers would be C, S, X, M
    before = speak(s, delay)
    assert before == [C, S, X][:delay]
    assert s.state.active is not None and s.state.order == EXAMPLE_ORDER
    nxt = s.next_turn()
    assert nxt is not None and nxt.answer == "m2"  # the first turn under the new order answers
    remaining = [r for r in EXAMPLE_ORDER if r not in [E, *before]]
    assert speak(s, len(remaining)) == remaining
    assert s.next_turn() is not None and s.next_turn().answer is None  # type: ignore[union-attr]


def test_delay_and_lock_bounds_are_taken_from_the_scheduler() -> None:
    s = scheduler(delay=2, lock=5)
    s.interrupt(EXAMPLE, None)
    speak(s, 2)
    assert s.state.locks  # applied at turn 2: pushed-back roles locked until 2 + 5
    assert set(s.state.locks.values()) == {7}


def test_reallocation_rules_the_rest_of_the_unit_and_the_next_then_ends() -> None:
    s = scheduler(units=4, delay=2)
    s.interrupt(EXAMPLE, "m1")  # due at turn 2, in unit 0
    history = speak(s, 15)
    assert history[:5] == [E, C, X, M, S]  # E, C kept; then the example order's remaining roles
    # unit 1 follows the reallocated order (with the roles it pushed back locked last)
    assert history[5:10][0] == X
    # unit 2: the unit's own queue again (locks have expired by turn 10: applied 2 + 7 = 9)
    assert history[10:15] == BASE
    assert s.state.active is None


# -------------------------------------------------------------- hysteresis
def test_roles_pushed_back_are_locked_for_h_turns() -> None:
    s = scheduler(units=6, delay=3, lock=7)
    s.interrupt(EXAMPLE, "m1")
    speak(s, 3)  # applied at turn 3
    applied = s.state.active
    assert applied is not None
    # BASE -> EXAMPLE_ORDER moves C and S two places back; E only one (X overtook it)
    assert s.state.locks == {C: 10, S: 10}
    assert s.locked() == [C, S]
    # a summary request while S is locked: S is aligned but stays last
    events = s.interrupt(classify("A summary of the key points please"), "m5")
    name, data = events[1]
    assert name == "reallocation"
    assert data["locked"] == [C, S]
    assert data["new"][-2:] == [S, C]  # locked roles last, by score among themselves
    assert data["scores"][S]["locked"] is True
    speak(s, 7)  # turn 10: the locks are over
    assert s.locked() == []
    assert s.state.locks == {}


def test_lock_keeps_a_role_at_the_back_of_a_new_units_queue() -> None:
    queues = [BASE, BASE, BASE, [S, E, C, X, M]]
    s = Scheduler(queues, [FLAT] * 4, delay=3, lock=10)
    speak(s, 8)
    s.interrupt(EXAMPLE, "m9")  # due at turn 11, unit 2; S, C pushed back until 21
    speak(s, 7)  # turn 15: unit 3 starts; the window (units 2..3) is still on
    assert s.state.unit == 3
    assert s.state.order[-2:] == [C, S]


# ------------------------------------------------------------- oscillation
def test_a_b_a_b_detection() -> None:
    assert completes_oscillation([E, X, M], X) is False
    assert completes_oscillation([X, M, X], M) is True
    assert completes_oscillation([M, M, M], M) is False  # A == B is not an oscillation
    assert count_oscillations([E, C, E, C, E]) == 2
    assert count_oscillations([E, C, S, E, C]) == 0
    assert choose_speaker([M, E, C], [X, M, X]) == (E, [M])
    assert choose_speaker([E, C], [X, M, X]) == (E, [])


def test_oscillation_across_a_unit_boundary_is_avoided() -> None:
    # unit 1 ends with X, M; unit 2's queue would open with X, M: X, M, X, M
    s = Scheduler([[E, C, S, X, M], [X, M, E, C, S]], [FLAT, FLAT])
    speak(s, 6)
    nxt = s.next_turn()
    assert nxt == NextTurn(unit=1, speaker=E, skipped=[M], answer=None)
    event = s.note_avoided(nxt)
    assert event is not None and event[0] == "oscillation_avoided"
    assert event[1]["passed_over"] == [M] and event[1]["recent"] == [X, M, X]
    s.record(nxt.speaker)
    speak(s, 3)
    history = s.state.history
    assert history == [E, C, S, X, M, X, E, M, C, S]
    assert count_oscillations(history) == 0
    assert s.complete and s.next_turn() is None


def fifty_turn_plan() -> Scheduler:
    kinds = ["Introduction", "Methods", "Results", "Discussion", "Examples"] * 2
    sections = [
        f"## {i + 1}. {k} part {i}\n\nFor example, imagine the claim; however the key "
        f"evidence is a common misconception about part {i}.\n"
        for i, k in enumerate(kinds)
    ]
    profiles = {rid: t["system_prompt"] for rid, t in builtin_roles().items()}
    plan = build_plan("\n".join(sections), profiles)
    assert len(plan.units) == 10
    return Scheduler([list(q) for q in plan.queues], plan.weights, delay=3, lock=7)


def test_no_oscillation_with_an_example_request_every_third_turn_over_50_turns() -> None:
    s = fifty_turn_plan()
    log: list[str] = []
    for turn in range(50):
        if turn % 3 == 2:
            log += names(s.interrupt(classify("Give me an example"), f"h{turn}"))
        nxt = s.next_turn()
        assert nxt is not None
        event = s.note_avoided(nxt)
        if event is not None:
            log.append(event[0])
        log += names(s.record(nxt.speaker))
    history = s.state.history
    assert len(history) == 50
    assert count_oscillations(history) == 0
    assert s.complete and s.next_turn() is None
    # every (unit, role) slot spoke exactly once
    assert [sorted(u) for u in s.state.spoken] == [sorted(ROLES)] * 10
    # the stability rules were exercised, not idle
    assert log.count("reallocation") >= 3
    assert log.count("reallocation_applied") >= 3
    assert "reallocation_skipped" in log


def test_no_oscillation_for_any_request_pattern() -> None:
    texts = ["Give me an example", "Summarize please", "I disagree, that's wrong", "Why?"]
    for period in (1, 2, 3, 4, 5):
        for text in texts:
            s = fifty_turn_plan()
            for turn in range(50):
                if turn % period == 0:
                    s.interrupt(classify(text), None)
                nxt = s.next_turn()
                assert nxt is not None
                s.record(nxt.speaker)
            assert count_oscillations(s.state.history) == 0, (period, text)


# ------------------------------------------------------------ persistence
def test_state_survives_a_json_round_trip_mid_run() -> None:
    def run(restore_at: int | None) -> list[str]:
        s = scheduler(units=5, delay=2, lock=5)
        for turn in range(25):
            if restore_at == turn:
                data = json.loads(json.dumps(s.state.to_dict()))
                s = Scheduler(
                    [BASE] * 5, [FLAT] * 5, delay=2, lock=5, state=StudyState.from_dict(data)
                )
            if turn in (1, 7, 13):
                s.interrupt(classify("Give me an example, for instance"), f"m{turn}")
            nxt = s.next_turn()
            assert nxt is not None
            s.record(nxt.speaker)
        return s.state.history

    straight = run(None)
    assert run(2) == straight
    assert run(8) == straight
    assert run(14) == straight
