"""Reallocation and stability: who speaks next in a study run (pure; no I/O).

The rules, as pure functions of plain values; :class:`~rolecall.study.scheduler.Scheduler`
walks the (unit, role) slots with them and reacts to the learner's interruptions. Its
whole state is a :class:`~rolecall.study.scheduler.StudyState`, a JSON-able record kept
in the session (``session.state.extra["study"]``), so a restored session continues
exactly.

Vocabulary. ``turn`` counts the study turns already spoken (0 before the first). The
*order* is the priority order of the five roles for the unit in progress: the unit's own
queue (:mod:`rolecall.study.queue`) or the order of the reallocation in effect. The next
speaker is the first role of the order that has not yet spoken in the unit.

Reallocation, when a human message arrives (at turn ``t``):
    1. It is classified (:mod:`rolecall.study.intent`). Below confidence 0.7 nothing
       changes (``low_confidence``).
    2. While an accepted reallocation has not yet taken effect, a new one is refused
       (``too_soon``): at most one is pending at a time.
    3. The new order sorts the roles by ``10 * alignment(role, intent) + 0.1 * weight -
       0.2 * times_spoken`` (weight: the role's queue score for the unit in progress;
       times spoken: its study turns so far in the session), descending, ties by role id,
       with every locked role after every unlocked one.
    4. It is accepted only if it differs from the current order by an edit distance of 2
       or more (``too_little_change`` otherwise). The distance is the optimal string
       alignment distance over role sequences: insertions, deletions, substitutions and
       adjacent transpositions cost 1 each. (Plain Levenshtein would make the gate
       vacuous: two different orders of the same roles are always 2 or more apart.) So a
       single swap of neighbours is too little change.

Bounded delay: an accepted reallocation takes effect D turns later (D = ``delay``, 2-3,
default 3): it is applied once turn ``t + D`` is reached, so the turns ``t .. t+D-1``
(0-based) keep the old order and turn ``t + D`` is the first to follow the new one. It
then orders the rest of the unit in progress and the whole next unit; after that the
units' own queues take over again. The first turn under the new order answers the
learner's message (it is that turn's reply target).

Hysteresis: when a reallocation is applied, every role it pushes back, i.e. moves two or
more positions later than in the order it replaces (a role merely displaced by one place,
because another overtook it, is not pushed back), is locked for H turns (H = ``lock``,
5-10, default 7): until turn ``applied + H`` a locked role is placed after every unlocked
role in any order set in that time (a new reallocation's order and a new unit's queue).

No oscillation: the speakers never contain A, B, A, B (four consecutive turns where the
first equals the third, the second the fourth, and A != B). Before a turn, a candidate
that would complete that pattern is passed over for the next candidate of the order. As
each role speaks once per unit, the pattern can only form across a unit boundary (the last
two speakers of a unit opening the next in the same order), where four candidates remain,
so there is always a valid choice: the run has zero oscillations by construction.

Events are ``(name, data)`` pairs; units appear in them by id (``u1``, ``u2``, ... as in
the step ids), turns as the number of study turns spoken when the event happened.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from rolecall.study.intent import Intent
from rolecall.study.queue import ROLES

__all__ = [
    "ALIGNMENT",
    "DELAY_DEFAULT",
    "LOCK_DEFAULT",
    "MIN_DISTANCE",
    "THRESHOLD",
    "choose_speaker",
    "completes_oscillation",
    "count_oscillations",
    "locks_last",
    "osa_distance",
    "realloc_order",
    "realloc_scores",
]

THRESHOLD: Final = 0.7
MIN_DISTANCE: Final = 2
DELAY_DEFAULT: Final = 3
DELAY_RANGE: Final = (2, 3)
LOCK_DEFAULT: Final = 7
LOCK_RANGE: Final = (5, 10)
W_ALIGNMENT: Final = 10.0
W_WEIGHT: Final = 0.1
W_SPOKEN: Final = 0.2
PUSHED_BACK: Final = 2  # positions a role must lose to count as pushed to the back

ALIGNMENT: Final[dict[Intent, dict[str, float]]] = {
    "clarification": {
        "explainer": 1.0,
        "misconception_spotter": 0.6,
        "summarizer": 0.4,
        "example_generator": 0.3,
        "challenger": 0.0,
    },
    "objection": {
        "challenger": 1.0,
        "misconception_spotter": 0.7,
        "explainer": 0.5,
        "summarizer": 0.2,
        "example_generator": 0.1,
    },
    "depth_request": {
        "explainer": 1.0,
        "challenger": 0.7,
        "example_generator": 0.4,
        "misconception_spotter": 0.3,
        "summarizer": 0.1,
    },
    "example_request": {
        "example_generator": 1.0,
        "explainer": 0.5,
        "misconception_spotter": 0.3,
        "challenger": 0.1,
        "summarizer": 0.1,
    },
    "summary_request": {
        "summarizer": 1.0,
        "explainer": 0.4,
        "example_generator": 0.2,
        "misconception_spotter": 0.2,
        "challenger": 0.1,
    },
    "other": {},
}


# ---------------------------------------------------------------- pure helpers
def osa_distance(a: Sequence[str], b: Sequence[str]) -> int:
    """Optimal string alignment distance (edits and adjacent transpositions cost 1)."""
    rows, cols = len(a) + 1, len(b) + 1
    d = [[0] * cols for _ in range(rows)]
    for i in range(rows):
        d[i][0] = i
    for j in range(cols):
        d[0][j] = j
    for i in range(1, rows):
        for j in range(1, cols):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost)
            if i > 1 and j > 1 and a[i - 1] == b[j - 2] and a[i - 2] == b[j - 1]:
                d[i][j] = min(d[i][j], d[i - 2][j - 2] + 1)
    return d[-1][-1]


def realloc_scores(
    intent: Intent,
    weights: Mapping[str, float],
    times_spoken: Mapping[str, int],
    roles: Sequence[str] = ROLES,
) -> dict[str, float]:
    """``10 * alignment + 0.1 * weight - 0.2 * times spoken`` per role (6 decimals)."""
    table = ALIGNMENT.get(intent, {})
    return {
        role: round(
            W_ALIGNMENT * table.get(role, 0.0)
            + W_WEIGHT * weights.get(role, 0.0)
            - W_SPOKEN * times_spoken.get(role, 0),
            6,
        )
        for role in roles
    }


def realloc_order(
    intent: Intent,
    weights: Mapping[str, float],
    times_spoken: Mapping[str, int],
    locked: Sequence[str] | frozenset[str] | set[str] = (),
    roles: Sequence[str] = ROLES,
) -> list[str]:
    """Roles by descending realloc score, ties by id, every locked role last."""
    scores = realloc_scores(intent, weights, times_spoken, roles)
    locked_set = set(locked)
    return sorted(roles, key=lambda r: (r in locked_set, -scores[r], r))


def locks_last(
    order: Sequence[str], locked: Sequence[str] | set[str] | frozenset[str]
) -> list[str]:
    """``order`` with the locked roles moved after the others, relative order kept."""
    locked_set = set(locked)
    return [r for r in order if r not in locked_set] + [r for r in order if r in locked_set]


def completes_oscillation(history: Sequence[str], candidate: str) -> bool:
    """Whether ``candidate`` speaking next would end an A, B, A, B run of speakers."""
    if len(history) < 3:
        return False
    a, b, c = history[-3], history[-2], history[-1]
    return a == c and b == candidate and a != b


def count_oscillations(speakers: Sequence[str]) -> int:
    """How many windows of four consecutive speakers read A, B, A, B (A != B)."""
    return sum(
        1
        for i in range(len(speakers) - 3)
        if speakers[i] == speakers[i + 2]
        and speakers[i + 1] == speakers[i + 3]
        and speakers[i] != speakers[i + 1]
    )


def choose_speaker(candidates: Sequence[str], history: Sequence[str]) -> tuple[str, list[str]]:
    """The first candidate that does not complete an oscillation, and those passed over."""
    skipped: list[str] = []
    for candidate in candidates:
        if not completes_oscillation(history, candidate):
            return candidate, skipped
        skipped.append(candidate)
    return candidates[0], []  # unreachable with one turn per role per unit; never stuck
