"""Reallocation and stability: who speaks next in a study run (pure; no I/O).

:class:`Scheduler` walks the (unit, role) slots and reacts to the learner's
interruptions. Its whole state is a :class:`StudyState`, a JSON-able record kept in the
session (``session.state.extra["study"]``), so a restored session continues exactly.

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
from dataclasses import dataclass, field
from typing import Any, Final

from rolecall.study.intent import Classification, Intent
from rolecall.study.queue import OPENER, ROLES

__all__ = [
    "ALIGNMENT",
    "DELAY_DEFAULT",
    "LOCK_DEFAULT",
    "MIN_DISTANCE",
    "THRESHOLD",
    "Active",
    "NextTurn",
    "Pending",
    "Scheduler",
    "StudyState",
    "choose_speaker",
    "completes_oscillation",
    "count_oscillations",
    "locks_last",
    "osa_distance",
    "realloc_order",
    "realloc_scores",
    "unit_id",
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


# ---------------------------------------------------------------------- state
@dataclass
class Pending:
    """An accepted reallocation waiting for its turn."""

    id: str
    intent: str
    confidence: float
    order: list[str]
    turn: int  # classified when this many turns had been spoken
    due: int  # applied once this many turns have been spoken
    message_id: str | None


@dataclass
class Active:
    """The reallocation in effect: its order rules until the end of unit ``until_unit``."""

    id: str
    order: list[str]
    until_unit: int
    message_id: str | None
    answered: bool = False


@dataclass
class StudyState:
    """Everything a study run must keep across save/restore (JSON-able via to_dict)."""

    units: int
    order: list[str]
    unit: int = 0
    turn: int = 0
    spoken: list[list[str]] = field(default_factory=lambda: [[]])
    history: list[str] = field(default_factory=list)
    pending: Pending | None = None
    active: Active | None = None
    locks: dict[str, int] = field(default_factory=dict)  # role -> turn it is free again
    next_id: int = 1
    counters: dict[str, int] = field(
        default_factory=lambda: {
            "classifications": 0,
            "reallocations": 0,
            "applied": 0,
            "skipped": 0,
            "oscillations_avoided": 0,
        }
    )

    def to_dict(self) -> dict[str, Any]:
        return {
            "units": self.units,
            "order": list(self.order),
            "unit": self.unit,
            "turn": self.turn,
            "spoken": [list(s) for s in self.spoken],
            "history": list(self.history),
            "pending": None if self.pending is None else vars(self.pending).copy(),
            "active": None if self.active is None else vars(self.active).copy(),
            "locks": dict(sorted(self.locks.items())),
            "next_id": self.next_id,
            "counters": dict(self.counters),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StudyState:
        pending = data.get("pending")
        active = data.get("active")
        return cls(
            units=int(data["units"]),
            order=list(data["order"]),
            unit=int(data["unit"]),
            turn=int(data["turn"]),
            spoken=[list(s) for s in data["spoken"]],
            history=list(data["history"]),
            pending=Pending(**pending) if pending else None,
            active=Active(**active) if active else None,
            locks={str(k): int(v) for k, v in data["locks"].items()},
            next_id=int(data["next_id"]),
            counters={str(k): int(v) for k, v in data["counters"].items()},
        )


@dataclass(frozen=True)
class NextTurn:
    unit: int
    speaker: str
    skipped: list[str]  # candidates passed over to avoid an oscillation
    answer: str | None  # the learner's message this turn answers, if any


Event = tuple[str, dict[str, Any]]


def unit_id(index: int) -> str:
    """The id of the 0-based unit ``index`` as events and step ids show it (``u1``...)."""
    return f"u{index + 1}"


class Scheduler:
    """The study run's turn order over a fixed plan (queues and weights per unit)."""

    def __init__(
        self,
        queues: Sequence[Sequence[str]],
        weights: Sequence[Mapping[str, float]],
        *,
        delay: int = DELAY_DEFAULT,
        lock: int = LOCK_DEFAULT,
        roles: Sequence[str] = ROLES,
        state: StudyState | None = None,
    ) -> None:
        if not queues:
            raise ValueError("a study plan needs at least one unit")
        if len(weights) != len(queues):
            raise ValueError("one weight mapping per unit")
        self.queues = [list(q) for q in queues]
        self.weights = [dict(w) for w in weights]
        self.delay = delay
        self.lock = lock
        self.roles = tuple(roles)
        self.state = state or StudyState(units=len(self.queues), order=list(self.queues[0]))

    # ------------------------------------------------------------- queries
    @property
    def complete(self) -> bool:
        st = self.state
        return st.unit >= st.units - 1 and set(self.roles) <= set(st.spoken[st.unit])

    def locked(self) -> list[str]:
        """Roles locked at the current turn, sorted."""
        return sorted(r for r, until in self.state.locks.items() if until > self.state.turn)

    def times_spoken(self) -> dict[str, int]:
        counts = dict.fromkeys(self.roles, 0)
        for speaker in self.state.history:
            counts[speaker] = counts.get(speaker, 0) + 1
        return counts

    def next_turn(self) -> NextTurn | None:
        """Who speaks next (None when every slot has spoken). Changes nothing."""
        if self.complete:
            return None
        st = self.state
        spoken = st.spoken[st.unit]
        candidates = [r for r in st.order if r not in spoken]
        candidates += [r for r in self.roles if r not in spoken and r not in candidates]
        if st.unit == 0 and not spoken and OPENER in candidates:
            candidates.remove(OPENER)
            candidates.insert(0, OPENER)
        speaker, skipped = choose_speaker(candidates, st.history)
        answer = None
        if st.active is not None and not st.active.answered:
            answer = st.active.message_id
        return NextTurn(st.unit, speaker, skipped, answer)

    # ------------------------------------------------------------- updates
    def record(self, speaker: str) -> list[Event]:
        """``speaker`` has spoken the next slot: advance units, apply due reallocations."""
        st = self.state
        events: list[Event] = []
        st.spoken[st.unit].append(speaker)
        st.history.append(speaker)
        st.turn += 1
        if st.active is not None:
            st.active.answered = True
        if set(self.roles) <= set(st.spoken[st.unit]) and st.unit + 1 < st.units:
            st.unit += 1
            st.spoken.append([])
            if st.active is not None and st.active.until_unit < st.unit:
                events.append(
                    (
                        "reallocation_ended",
                        {"id": st.active.id, "turn": st.turn, "unit": unit_id(st.unit)},
                    )
                )
                st.active = None
            base = st.active.order if st.active is not None else self.queues[st.unit]
            st.order = locks_last(base, self.locked())
            events.append(
                (
                    "unit",
                    {
                        "unit": unit_id(st.unit),
                        "turn": st.turn,
                        "order": list(st.order),
                        "queue": list(self.queues[st.unit]),
                        "locked": self.locked(),
                        "reallocation": st.active.id if st.active else None,
                    },
                )
            )
        pending = st.pending
        if pending is not None and st.turn >= pending.due:
            st.pending = None
            if self.complete:
                events.append(
                    (
                        "reallocation_expired",
                        {
                            "id": pending.id,
                            "turn": st.turn,
                            "reasons": "every slot has spoken before it could take effect",
                        },
                    )
                )
            else:
                events.append(self._apply(pending))
        for role in [r for r, until in st.locks.items() if until <= st.turn]:
            del st.locks[role]
        return events

    def _apply(self, pending: Pending) -> Event:
        st = self.state
        old = list(st.order)
        new = list(pending.order)
        pushed = [r for r in new if r in old and new.index(r) - old.index(r) >= PUSHED_BACK]
        until = st.turn + self.lock
        for role in pushed:
            st.locks[role] = max(st.locks.get(role, 0), until)
        st.active = Active(pending.id, new, st.unit + 1, pending.message_id)
        st.order = new
        st.counters["applied"] += 1
        return (
            "reallocation_applied",
            {
                "id": pending.id,
                "turn": st.turn,
                "unit": unit_id(st.unit),
                "classified_at": pending.turn,
                "delay": st.turn - pending.turn,
                "old": old,
                "new": new,
                "pushed_back": pushed,
                "locked_until": until if pushed else None,
                "until_unit": unit_id(st.unit + 1),
                "answers": pending.message_id,
                "reasons": (
                    f"{pending.intent} from turn {pending.turn} takes effect {self.delay} turns "
                    f"later; roles moved back are locked until turn {until}"
                ),
            },
        )

    def interrupt(self, found: Classification, message_id: str | None) -> list[Event]:
        """A learner's message, classified: the classification and the reallocation decision."""
        st = self.state
        st.counters["classifications"] += 1
        where = {"message_id": message_id, "turn": st.turn, "unit": unit_id(st.unit)}
        events: list[Event] = [("classification", {**where, **found.to_dict()})]
        decision = {**where, "intent": found.intent, "confidence": found.confidence}

        def skip(reason: str, detail: str, **more: Any) -> list[Event]:
            st.counters["skipped"] += 1
            events.append(
                ("reallocation_skipped", {**decision, "reason": reason, **more, "reasons": detail})
            )
            return events

        if self.complete:
            return skip("dialogue_complete", "every (unit, role) slot has already spoken")
        if found.confidence < THRESHOLD:
            return skip(
                "low_confidence",
                f"confidence {found.confidence} is below {THRESHOLD}: nothing changes",
            )
        if st.pending is not None:
            return skip(
                "too_soon",
                f"reallocation {st.pending.id} (turn {st.pending.turn}) has not taken effect "
                f"yet (turn {st.pending.due}); one pending reallocation at a time",
                pending=st.pending.id,
            )
        weights = self.weights[st.unit]
        times = self.times_spoken()
        locked = self.locked()
        scores = realloc_scores(found.intent, weights, times, self.roles)
        new = realloc_order(found.intent, weights, times, locked, self.roles)
        old = list(st.order)
        distance = osa_distance(old, new)
        table = ALIGNMENT.get(found.intent, {})
        detail_scores = {
            role: {
                "score": scores[role],
                "alignment": table.get(role, 0.0),
                "weight": weights.get(role, 0.0),
                "times_spoken": times.get(role, 0),
                "locked": role in locked,
            }
            for role in self.roles
        }
        if distance < MIN_DISTANCE:
            return skip(
                "too_little_change",
                f"the new order is {distance} edit(s) from the current one; "
                f"at least {MIN_DISTANCE} needed",
                old=old,
                new=new,
                distance=distance,
                scores=detail_scores,
            )
        pending = Pending(
            id=f"r{st.next_id}",
            intent=found.intent,
            confidence=found.confidence,
            order=new,
            turn=st.turn,
            due=st.turn + self.delay,
            message_id=message_id,
        )
        st.next_id += 1
        st.pending = pending
        st.counters["reallocations"] += 1
        locked_note = f"; locked last: {', '.join(locked)}" if locked else ""
        events.append(
            (
                "reallocation",
                {
                    **decision,
                    "id": pending.id,
                    "old": old,
                    "new": new,
                    "distance": distance,
                    "due_turn": pending.due,
                    "locked": locked,
                    "scores": detail_scores,
                    "reasons": (
                        f"{found.intent} at confidence {found.confidence} >= {THRESHOLD}; "
                        f"edit distance {distance} >= {MIN_DISTANCE}; takes effect at turn "
                        f"{pending.due} (delay {self.delay}){locked_note}"
                    ),
                },
            )
        )
        return events

    def note_avoided(self, turn: NextTurn) -> Event | None:
        """The event for a turn that passed over candidates to avoid an oscillation."""
        if not turn.skipped:
            return None
        self.state.counters["oscillations_avoided"] += 1
        tail = self.state.history[-3:]
        return (
            "oscillation_avoided",
            {
                "turn": self.state.turn,
                "unit": unit_id(turn.unit),
                "passed_over": list(turn.skipped),
                "speaker": turn.speaker,
                "recent": tail,
                "reasons": f"{turn.skipped[0]} after {', '.join(tail)} would read A, B, A, B",
            },
        )
