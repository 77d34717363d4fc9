"""Study mode at run time: the director that plans every turn from the document's units.

:class:`StudyDirector` replaces the flow as the source of turns (the load time, the
``study:`` block and the document read, is :mod:`rolecall.modes.study`). Every turn is an
ordinary generation through the session (one at a time, stored, published), with
``step_id`` ``u<k>:<role>`` and the unit's text in the turn's instruction. The run ends
with one ``world/stop`` whose reason is ``study_complete`` once every (unit, role) slot has
spoken (or a hard limit's reason; ``study_document_changed`` if a restored session's
document is not the one it started with). Human messages are consumed by the director:
classified, never routed.

The director's state lives in ``session.state.extra["study"]`` (:class:`StudyProgress`,
stored as JSON): a restored session continues exactly where it stopped. Its decisions are
``system/mode`` events (``mode: study``): ``plan``, ``unit``, ``classification``,
``reallocation``, ``reallocation_skipped``, ``reallocation_applied``,
``reallocation_ended``, ``reallocation_expired``, ``oscillation_avoided`` and
``contradiction`` (a role's message says the opposite of an earlier statement: the
challenger, when it still has its slot in the unit, speaks next and addresses it;
otherwise the next speaker does), each with its reasons.
"""

from __future__ import annotations

from typing import Any, Final

from pydantic import BaseModel, ValidationError

from rolecall.bus import Event, ModeEvent
from rolecall.errors import UsageError
from rolecall.plans import DriverSite, Stop, TurnPlan
from rolecall.session.state import TranscriptMessage
from rolecall.study.contradiction import Contradiction, Statement, find_contradiction
from rolecall.study.intent import Classification, classify
from rolecall.study.queue import ROLES, StudyPlan, build_plan
from rolecall.study.scheduler import Scheduler, StudyState, unit_id
from rolecall.study.segment import Unit
from rolecall.world.models import World

STOP_REASON: Final = "study_complete"
CHANGED_REASON: Final = "study_document_changed"
STATE_VERSION: Final = 1

TASKS: Final[dict[str, str]] = {
    "explainer": (
        "explain this passage: its central idea and the reasoning behind it, defining the "
        "terms it relies on."
    ),
    "challenger": (
        "challenge this passage: question one assumption or claim and say what evidence "
        "would settle it."
    ),
    "summarizer": "sum up this passage and the discussion of it in a few key points.",
    "example_generator": (
        "give one concrete example that shows this passage's main idea at work, and say how "
        "it maps onto the idea."
    ),
    "misconception_spotter": (
        "name a misconception a reader could take from this passage, and correct it from the text."
    ),
}


class StudyProgress(BaseModel):
    """Study's state in the session (``extra["study"]``, stored as this object's JSON):
    the document it started on (its fingerprint and unit count), the pacing, and the
    scheduler's state (:meth:`StudyState.to_dict`)."""

    version: int = STATE_VERSION
    fingerprint: str | None = None
    units: int | None = None
    delay: int | None = None
    lock: int | None = None
    state: dict[str, Any]


def study_progress(session: DriverSite) -> StudyProgress | None:
    """The study state a session holds (a restored one is validated on first use); None
    before the first turn, or when what is stored is not study's state."""
    extra = session.state.extra
    data = extra.get("study")
    if isinstance(data, StudyProgress) or data is None:
        return data
    try:
        progress = StudyProgress.model_validate(data)
    except ValidationError:
        return None
    extra["study"] = progress
    return progress


class StudyDirector:
    """Plans study turns from the document's units; reacts to the learner's messages."""

    def __init__(
        self, world: World, text: str, *, delay: int, lock: int, contradictions: bool
    ) -> None:
        """``text``: the document (``study.text``), the pacing and the contradiction check
        as the world's ``study:`` block gives them (:func:`rolecall.modes.study.director`)."""
        profiles = {r.id: f"{r.description}\n{r.system_prompt}" for r in world.roles}
        self.study: StudyPlan = build_plan(text, profiles)
        if not self.study.units:
            raise UsageError(
                f"world '{world.name}': nothing to study: no paragraph of 20 characters or more"
            )
        self.delay = delay
        self.lock = lock
        self.contradictions = contradictions
        self.names = [
            "human",
            "learner",
            *(r.id for r in world.roles),
            *(r.name for r in world.roles),
        ]
        # roles with an `output:` schema: the check reads their messages' data
        self.shaped = frozenset(r.id for r in world.roles if r.output is not None)

    # ------------------------------------------------------------ state
    def _scheduler(self, session: DriverSite) -> Scheduler:
        progress = study_progress(session)
        state = StudyState.from_dict(progress.state) if progress is not None else None
        sched = Scheduler(
            [list(q) for q in self.study.queues],
            self.study.weights,
            delay=self.delay,
            lock=self.lock,
            state=state,
        )
        if state is None:
            self._save(session, sched)
            self._publish(session, "plan", self._plan_data())
        return sched

    def _save(self, session: DriverSite, sched: Scheduler) -> None:
        session.state.extra["study"] = StudyProgress(
            fingerprint=self.study.fingerprint,
            units=len(self.study.units),
            delay=self.delay,
            lock=self.lock,
            state=sched.state.to_dict(),
        )

    def _changed(self, session: DriverSite) -> bool:
        progress = study_progress(session)
        return progress is not None and progress.fingerprint != self.study.fingerprint

    def _plan_data(self) -> dict[str, Any]:
        return {
            "units": [
                {**unit.to_dict(), "queue": list(queue), "scores": [s.to_dict() for s in scores]}
                for unit, queue, scores in zip(
                    self.study.units, self.study.queues, self.study.scores, strict=True
                )
            ],
            "slots": self.study.slots,
            "delay": self.delay,
            "lock": self.lock,
            "fingerprint": self.study.fingerprint,
        }

    @staticmethod
    def _publish(session: DriverSite, name: str, data: dict[str, Any]) -> None:
        session.bus.publish(ModeEvent(mode="study", name=name, data=data))

    # --------------------------------------------------------- protocol
    def plan(self, session: DriverSite) -> TurnPlan | Stop:
        if self._changed(session):
            return Stop(
                CHANGED_REASON,
                "the study document differs from the one this session started with",
            )
        sched = self._scheduler(session)
        nxt = sched.next_turn()
        if nxt is None:
            units = len(self.study.units)
            return Stop(
                STOP_REASON,
                f"every (unit, role) slot has spoken: {units} units x {len(ROLES)} roles = "
                f"{self.study.slots} turns",
            )
        unit = self.study.units[nxt.unit]
        transcript = session.state.transcript
        request = transcript.by_id.get(nxt.answer) if nxt.answer else None
        found = nxt.contradiction
        contradicting = transcript.by_id.get(found["message_id"]) if found else None
        target = request or contradicting or transcript.latest()
        text = instruction(unit, len(self.study.units), nxt.speaker, request)
        if found is not None:
            text = f"{address_note(found)}\n{text}"
        return TurnPlan(
            nxt.speaker,
            target,
            loop_iteration=0,
            step_id=f"{unit.id}:{nxt.speaker}",
            instruction=text,
        )

    def completed(
        self, session: DriverSite, turn: TurnPlan, message: TranscriptMessage
    ) -> list[Event]:
        """The turn's decisions, stored and published with its message, then its record."""
        sched = self._scheduler(session)
        nxt = sched.next_turn()
        events: list[tuple[str, dict[str, Any]]] = []
        if nxt is not None and nxt.speaker == message.sender:
            avoided = sched.note_avoided(nxt)
            if avoided is not None:
                events.append(avoided)
        before = self._snapshot(sched)
        in_reallocation = sched.state.active is not None
        addressed = sched.state.contradiction
        events.extend(sched.record(message.sender))
        found = self._contradiction(session, message)
        if found is not None:
            events.append(sched.contradicted(found.to_dict()))
        self._save(session, sched)
        record = self._record(sched, message, before, None, in_reallocation)
        record[1]["addresses"] = addressed["id"] if addressed is not None else None
        events.append(record)
        return [ModeEvent(mode="study", name=name, data=data) for name, data in events]

    def _contradiction(
        self, session: DriverSite, message: TranscriptMessage
    ) -> Contradiction | None:
        """Whether ``message`` contradicts an earlier role's statement (module 7)."""
        if not self.contradictions:
            return None
        text = self._checked(message)
        if text is None:
            return None
        said: list[Statement] = []
        for m in session.state.transcript.messages:
            earlier = self._checked(m) if m.kind == "agent" and m.id != message.id else None
            if earlier is not None:
                said.append(Statement(m.id, m.sender, earlier))
        return find_contradiction(Statement(message.id, message.sender, text), said, self.names)

    def _checked(self, message: TranscriptMessage) -> str | None:
        """What the check reads of ``message``: its text, or, when its role has an
        ``output:`` schema (selection.md), the strings of its validated ``data`` (never
        JSON found in its text), each a sentence; None when its data did not validate."""
        if message.sender not in self.shaped:
            return message.content
        if message.data is None:
            return None
        return data_text(message.data)

    def human(self, session: DriverSite, message: TranscriptMessage) -> bool:
        sched = self._scheduler(session)
        before = self._snapshot(sched)
        found = classify(message.content)
        events = sched.interrupt(found, message.id)
        self._save(session, sched)
        reallocated = any(name == "reallocation" for name, _ in events)
        events.append(self._record(sched, message, before, found, reallocated))
        for name, data in events:
            self._publish(session, name, data)
        return True

    def _snapshot(self, sched: Scheduler) -> tuple[int, list[str]]:
        """The unit and the speakers still due in it, in order."""
        st = sched.state
        spoken = st.spoken[st.unit] if st.unit < len(st.spoken) else []
        return st.unit, [r for r in st.order if r not in spoken]

    def _record(
        self,
        sched: Scheduler,
        message: TranscriptMessage,
        before: tuple[int, list[str]],
        found: Classification | None,
        reallocation: bool,
    ) -> tuple[str, dict[str, Any]]:
        """The turn's history record (one per turn, the learner's included): who spoke in
        which unit, the learner's intent and its confidence (on the learner's turns),
        whether a reallocation decided it, the unit's role scores, the queue before and
        after."""
        unit, queue_before = before
        _, queue_after = self._snapshot(sched)
        return (
            "turn",
            {
                "turn": sched.state.turn,
                "message_id": message.id,
                "speaker": message.sender,
                "unit": unit_id(unit),
                "intent": found.intent if found is not None else None,
                "confidence": found.confidence if found is not None else None,
                "reallocation": reallocation,
                "scores": {s.role: s.score for s in self.study.scores[unit]},
                "queue_before": queue_before,
                "queue_after": queue_after,
            },
        )


def instruction(unit: Unit, units: int, role_id: str, request: TranscriptMessage | None) -> str:
    """The turn's instruction: where we are, the role's task, the unit's text."""
    task = TASKS.get(role_id, "discuss this passage from your role's point of view.")
    part = f", part {unit.part} of {unit.parts}" if unit.parts > 1 else ""
    where = unit.heading or "the opening text"
    lines = [
        f"Study unit {unit.index + 1} of {units}: {where} ({unit.kind}{part}).",
        f"Your part: {task}",
    ]
    if request is not None:
        lines.append(f'The learner asked ({request.id}): "{request.content}". Answer that first.')
    lines += ["", "The passage:", unit.text]
    return "\n".join(lines)


def data_text(data: Any) -> str:
    """The strings of a reply's ``data`` in their order (an object's values in key order,
    an array's items), each ended as a sentence; numbers, booleans and keys are left out."""
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            if value.strip():
                found.append(value.strip())
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(data)
    return " ".join(s if s[-1] in ".!?" else f"{s}." for s in found)


def address_note(found: dict[str, Any]) -> str:
    """What the turn after a contradiction is asked to do about it."""
    return (
        f"A contradiction ({found['id']}): {found['message_id']} ({found['speaker']}) says "
        f'"{found["sentence"]}", but {found["earlier_id"]} ({found["earlier_speaker"]}) said '
        f'"{found["earlier_sentence"]}". Point it out and settle which holds before going on.'
    )
