"""Study mode (modes.md, Study): a document-driven dialogue of five fixed roles.

``mode: study`` in a world file (or ``rolecall study DOC``) expands into the five study
roles and settings; :func:`install` gives the session a :class:`StudyDirector`, which
replaces the flow as the source of turns. Every turn is an ordinary generation through
the session (one at a time, stored, published), with ``step_id`` ``u<k>:<role>`` and the
unit's text in the turn's instruction. The run ends with one ``world/stop`` whose reason
is ``study_complete`` once every (unit, role) slot has spoken (or a hard limit's reason;
``study_document_changed`` if a restored session's document is not the one it started
with). Human messages are consumed by the director: classified, never routed.

Reading the document: when the loader passes the world folder (a :class:`~pathlib.Path`
under :data:`FOLDER_KEY` in the raw mapping) :func:`expand` reads it into ``study.text``;
otherwise :func:`load_study` does it for a loaded world. Either way the session's world
carries the text, so a saved session resumes without the file.

The ``study:`` block (:class:`StudyOptions`)::

    study:
      document: notes.md   # TXT, Markdown or PDF, relative to the world folder
      text: "..."          # or the document inline (the loader stores what it read here)
      delay: 3             # D: turns before a reallocation takes effect (2-3)
      lock: 7              # H: turns a role pushed back stays locked (5-10)
      contradictions: true # find contradictions between the roles (module 7)

The director's state lives in ``session.state.extra["study"]`` (JSON): a restored
session continues exactly where it stopped. Its decisions are ``system/mode`` events
(``mode: study``): ``plan``, ``unit``, ``classification``, ``reallocation``,
``reallocation_skipped``, ``reallocation_applied``, ``reallocation_ended``,
``reallocation_expired``, ``oscillation_avoided`` and ``contradiction`` (a role's message
says the opposite of an earlier statement: the challenger, when it still has its slot in
the unit, speaks next and addresses it; otherwise the next speaker does), each with its
reasons.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Final

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationError,
    field_validator,
)

from rolecall.bus import Event, ModeEvent
from rolecall.errors import UsageError, WorldError
from rolecall.mode_registry import ModeSpec, Roles
from rolecall.modes.common import with_knowledge
from rolecall.modes.install import register_mode
from rolecall.plans import Host, Stop, TurnPlan
from rolecall.session.state import TranscriptMessage
from rolecall.study.contradiction import Contradiction, Statement, find_contradiction
from rolecall.study.document import DocumentError, check_relative, read_document
from rolecall.study.document import resolve_in_folder as _resolve
from rolecall.study.intent import Classification, classify
from rolecall.study.queue import ROLES, StudyPlan, build_plan
from rolecall.study.realloc import DELAY_DEFAULT, LOCK_DEFAULT
from rolecall.study.scheduler import Scheduler, StudyState, unit_id
from rolecall.study.segment import Unit, segment, title
from rolecall.world.library import suggest
from rolecall.world.models import World

__all__ = [
    "FOLDER_KEY",
    "STOP_REASON",
    "StudyDirector",
    "StudyOptions",
    "default_topic",
    "expand",
    "install",
    "load_study",
]

FOLDER_KEY: Final = "__world_folder__"  # the loader's Path of the world folder (never YAML)
STOP_REASON: Final = "study_complete"
CHANGED_REASON: Final = "study_document_changed"
MAX_TURNS: Final = 1000  # the hard cap when the world sets none (a study run is bounded)
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


def study_progress(session: Host) -> StudyProgress | None:
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


class StudyOptions(BaseModel):
    """The ``study:`` block of a world file."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)

    document: str | None = None
    text: str | None = None
    delay: Annotated[StrictInt, Field(ge=2, le=3)] = DELAY_DEFAULT
    lock: Annotated[StrictInt, Field(ge=5, le=10)] = LOCK_DEFAULT
    contradictions: StrictBool = True  # module 7: find them and have them addressed
    # reference material the five roles retrieve from beside the document (knowledge.md):
    # files or folders relative to the world's folder
    knowledge: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)

    @field_validator("document")
    @classmethod
    def _safe(cls, value: str | None) -> str | None:
        if value is not None:
            problem = check_relative(value)
            if problem is not None:
                raise ValueError(problem)
        return value


_OPTION_FIELDS: Final = tuple(StudyOptions.model_fields)


def _option_problems(exc: ValidationError) -> list[str]:
    out: list[str] = []
    for err in exc.errors():
        loc = [str(p) for p in err["loc"]]
        where = ".".join(["study", *loc])
        if err["type"] == "extra_forbidden":
            hint = suggest(loc[-1], list(_OPTION_FIELDS), listing=False)
            out.append(
                f"{where}: unknown field{hint or ' (fields: ' + ', '.join(_OPTION_FIELDS) + ')'}"
            )
            continue
        msg = str(err["msg"]).removeprefix("Value error, ")
        value = err.get("input")
        short = isinstance(value, int | float | bool) or (
            isinstance(value, str) and len(value) < 60
        )
        shown = f" (got {value!r})" if short and err["type"] != "value_error" else ""
        out.append(f"{where}: {msg[0].lower() + msg[1:]}{shown}")
    return out


def parse_options(block: Any, problems: list[str]) -> StudyOptions | None:
    """The validated ``study:`` block, or None with its problems appended."""
    found: list[str] = []
    options = _read_options(block, found)
    problems.extend(found)
    return None if found else options


def _read_options(block: Any, problems: list[str]) -> StudyOptions | None:
    """The ``study:`` block's options, every problem with it appended: a field in error is
    left at its default, so the others (the document above all) can still be checked.
    None when there is no block, it is not a mapping, or it gives no document."""
    if block is None:
        problems.append("study: required for mode: study (give study.document: <file>)")
        return None
    if not isinstance(block, dict):
        problems.append(f"study: expected a mapping of study options, got {type(block).__name__}")
        return None
    bad: set[str] = set()
    try:
        options = StudyOptions.model_validate(block)
    except ValidationError as exc:
        problems.extend(_option_problems(exc))
        bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        valid = {k: v for k, v in block.items() if k in _OPTION_FIELDS and k not in bad}
        try:
            options = StudyOptions.model_validate(valid)
        except ValidationError:  # the fields do not depend on each other: not expected
            return None
    if options.document is None and options.text is None:
        if not bad & {"document", "text"}:  # a document given but invalid is named already
            problems.append(
                "study.document: required (a TXT, Markdown or PDF file in the world folder)"
            )
        return None
    return options


def default_topic(document: str | None, text: str) -> str:
    """The document's title (its first ``#`` or ``===`` heading), else its file name."""
    found = title(text)
    if found:
        return f"Studying {found}"
    if document:
        return f"Studying {Path(document).name}"
    return "Studying a document"


def _merge_roles(raw_roles: Any, problems: list[str]) -> list[dict[str, Any]]:
    """The five study roles; entries under ``roles:`` override them by id, in their order."""
    overrides: dict[str, dict[str, Any]] = {}
    if raw_roles is not None and not isinstance(raw_roles, list):
        problems.append("roles: expected a list of role overrides by id (study mode)")
        raw_roles = []
    for i, entry in enumerate(raw_roles or []):
        if not isinstance(entry, dict):
            problems.append(f"roles[{i}]: expected a mapping with an id")
            continue
        rid = entry.get("id", entry.get("template"))
        if rid not in ROLES:
            close = suggest(str(rid), list(ROLES), listing=False)
            problems.append(
                f"roles[{i}].id: study mode has no role {rid!r}"
                f"{close[:-1] + '; ' if close else ' ('}roles: {', '.join(ROLES)})"
            )
            continue
        if rid in overrides:
            problems.append(f"roles[{i}].id: duplicate id '{rid}'")
            continue
        overrides[rid] = entry
    out: list[dict[str, Any]] = []
    for rid in [*overrides, *(r for r in ROLES if r not in overrides)]:
        entry = {"template": rid, "id": rid, **overrides.get(rid, {})}
        entry.setdefault("temperature", 0.0)  # deterministic on real models too
        out.append(entry)
    return out


def expand(raw: dict[str, Any], library: Roles, problems: list[str]) -> dict[str, Any]:
    """``mode: study``: the five roles, settings and the validated ``study:`` block.

    When the loader passes the world folder (``FOLDER_KEY``), the document is read here
    and its text stored in ``study.text``, so document problems are load problems.
    """
    del library  # the roles come from the library through their `template:` entries
    data = dict(raw)
    folder = data.pop(FOLDER_KEY, None)
    if folder is not None and not isinstance(folder, Path):
        # only the loader may say where the world lives (a Path; YAML cannot make one)
        problems.append(f"{FOLDER_KEY}: unknown field")
        folder = None
    if data.get("flow") is not None:
        problems.append(
            "flow: study mode has no flow: the document's units and role queues decide who "
            "speaks (remove flow)"
        )
    data["roles"] = _merge_roles(data.get("roles"), problems)
    settings = data.get("settings")
    if settings is None:
        data["settings"] = {"max_turns": MAX_TURNS}
    elif isinstance(settings, dict) and "max_turns" not in settings:
        data["settings"] = {**settings, "max_turns": MAX_TURNS}
    found: list[str] = []
    options = _read_options(data.get("study"), found)
    problems.extend(found)
    if options is None:
        return data
    study = options.model_dump(exclude_none=True)
    if options.text is None and options.document is not None and folder is not None:
        try:
            path = _resolve(folder, options.document)
            study["text"] = read_document(path, name=options.document).text
        except DocumentError as exc:
            problems.append(f"study.document: {exc}")
            return data
    text = study.get("text")
    if isinstance(text, str):
        if not _has_units(text):
            problems.append(
                "study.document: nothing to study: no paragraph of 20 characters or more"
            )
        if not data.get("topic"):
            data["topic"] = default_topic(options.document, text)
    if not found:  # the block as validated (with the text read); else as written
        data["study"] = study
    with_knowledge(data, "reference", options.knowledge, list(ROLES), "study.knowledge", problems)
    return data


def _has_units(text: str) -> bool:
    return bool(segment(text))


def load_study(world_folder: Path, world: World) -> World:
    """The world with its study document read (``study.text``) and topic filled in.

    For a world loaded without its folder reaching :func:`expand`; a no-op when the text
    is already there or the world is not a study world. Raises :class:`WorldError`.
    """
    if world.mode != "study":
        return world
    source = str(world_folder / "world.yaml")
    problems: list[str] = []
    options = _read_options(world.block("study"), problems)
    if options is None:
        raise WorldError(source, problems)
    study = dict(world.block("study") or {})
    if options.text is None:
        assert options.document is not None
        try:
            path = _resolve(world_folder, options.document)
            study["text"] = read_document(path, name=options.document).text
        except DocumentError as exc:
            problems.append(f"study.document: {exc}")
    text = study.get("text")
    if isinstance(text, str) and not _has_units(text):
        problems.append("study.document: nothing to study: no paragraph of 20 characters or more")
    if problems:
        raise WorldError(source, problems)
    assert isinstance(text, str)
    world = world.with_block("study", study)
    if not world.topic:
        world = world.model_copy(update={"topic": default_topic(options.document, text)})
    return world


# ------------------------------------------------------------------ director
def _options(world: World) -> StudyOptions:
    problems: list[str] = []
    options = parse_options(world.block("study"), problems)
    if options is None:
        raise UsageError(f"world '{world.name}': " + "; ".join(problems))
    return options


class StudyDirector:
    """Plans study turns from the document's units; reacts to the learner's messages."""

    def __init__(self, world: World) -> None:
        options = _options(world)
        if options.text is None:
            raise UsageError(
                f"world '{world.name}': the study document {options.document!r} was not read; "
                "load the world from its folder (or call rolecall.modes.study.load_study)"
            )
        profiles = {r.id: f"{r.description}\n{r.system_prompt}" for r in world.roles}
        self.study: StudyPlan = build_plan(options.text, profiles)
        if not self.study.units:
            raise UsageError(
                f"world '{world.name}': nothing to study: no paragraph of 20 characters or more"
            )
        self.delay = options.delay
        self.lock = options.lock
        self.contradictions = options.contradictions
        self.names = [
            "human",
            "learner",
            *(r.id for r in world.roles),
            *(r.name for r in world.roles),
        ]
        # roles with an `output:` schema: the check reads their messages' data
        self.shaped = frozenset(r.id for r in world.roles if r.output is not None)

    # ------------------------------------------------------------ state
    def _scheduler(self, session: Host) -> Scheduler:
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

    def _save(self, session: Host, sched: Scheduler) -> None:
        session.state.extra["study"] = StudyProgress(
            fingerprint=self.study.fingerprint,
            units=len(self.study.units),
            delay=self.delay,
            lock=self.lock,
            state=sched.state.to_dict(),
        )

    def _changed(self, session: Host) -> bool:
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
    def _publish(session: Host, name: str, data: dict[str, Any]) -> None:
        session.bus.publish(ModeEvent(mode="study", name=name, data=data))

    # --------------------------------------------------------- protocol
    def plan(self, session: Host) -> TurnPlan | Stop:
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

    def completed(self, session: Host, turn: TurnPlan, message: TranscriptMessage) -> list[Event]:
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

    def _contradiction(self, session: Host, message: TranscriptMessage) -> Contradiction | None:
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

    def human(self, session: Host, message: TranscriptMessage) -> bool:
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


def install(session: Host) -> None:
    """Give the session its study director (fresh or restored)."""
    director = StudyDirector(session.world)
    session.director = director


register_mode(
    ModeSpec(
        "study",
        expand,
        options=StudyOptions,
    ),
    install,
)
