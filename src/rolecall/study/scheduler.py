"""The study scheduler: the (unit, role) slots, reallocations, locks (pure; no I/O).

The rules it applies are :mod:`rolecall.study.realloc`'s (see its docstring for the
vocabulary, reallocation, bounded delay, hysteresis and the no-oscillation rule).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from rolecall.study.intent import Classification
from rolecall.study.queue import CHALLENGER, OPENER, ROLES, scaffold
from rolecall.study.realloc import (
    ALIGNMENT,
    DELAY_DEFAULT,
    LOCK_DEFAULT,
    MIN_DISTANCE,
    PUSHED_BACK,
    THRESHOLD,
    choose_speaker,
    locks_last,
    osa_distance,
    realloc_order,
    realloc_scores,
)

__all__ = ["Active", "NextTurn", "Pending", "Scheduler", "StudyState", "unit_id"]


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
    # a contradiction found and not yet addressed: {"id", "message_id", "speaker", ...}
    contradiction: dict[str, Any] | None = None
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
            "contradiction": None if self.contradiction is None else dict(self.contradiction),
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
            contradiction=dict(data["contradiction"]) if data.get("contradiction") else None,
            counters={str(k): int(v) for k, v in data["counters"].items()},
        )


@dataclass(frozen=True)
class NextTurn:
    unit: int
    speaker: str
    skipped: list[str]  # candidates passed over to avoid an oscillation
    answer: str | None  # the learner's message this turn answers, if any
    contradiction: dict[str, Any] | None = None  # the contradiction this turn addresses


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
        found = st.contradiction
        if found is not None and CHALLENGER in candidates and found["speaker"] != CHALLENGER:
            candidates.remove(CHALLENGER)  # the challenger addresses a contradiction next
            candidates.insert(0, CHALLENGER)
        candidates = scaffold(candidates)  # a reallocation keeps explainer before challenger
        if st.unit == 0 and not spoken and OPENER in candidates:
            candidates.remove(OPENER)
            candidates.insert(0, OPENER)
        speaker, skipped = choose_speaker(candidates, st.history)
        answer = None
        if st.active is not None and not st.active.answered:
            answer = st.active.message_id
        return NextTurn(st.unit, speaker, skipped, answer, st.contradiction)

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
        st.contradiction = None  # this turn addressed it
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

    def contradicted(self, found: Mapping[str, Any]) -> Event:
        """A role's message contradicts an earlier statement: the next turn addresses it."""
        st = self.state
        cid = f"c{st.counters.get('contradictions', 0) + 1}"
        st.counters["contradictions"] = st.counters.get("contradictions", 0) + 1
        st.contradiction = {"id": cid, **found}
        nxt = self.next_turn()
        by = nxt.speaker if nxt is not None else None
        return (
            "contradiction",
            {"id": cid, "turn": st.turn, "unit": unit_id(st.unit), **found, "addressed_by": by},
        )

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
