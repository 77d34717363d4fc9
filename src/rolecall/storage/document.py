"""The session document: one versioned JSON snapshot of a session (sessions.md, Session files).

The same content as the store: the world as it was run (roles snapshot included),
the execution pointer, counters, flags, messages, execution log, drafts, events
(streaming chunks left out: the messages hold their text) and memory files. A session
file is this document written atomically; ``resume`` restores it without
regenerating anything.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, Final, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import to_json

from rolecall.bus.protocol import Bus
from rolecall.errors import NotTextError, StorageError, UsageError
from rolecall.flows.model import ID_PATTERN
from rolecall.paths import read_text, write_atomically
from rolecall.session.state import (
    Concluding,
    Draft,
    ExecutionRecord,
    FlowPointer,
    PendingReply,
    SessionState,
    State,
    Transcript,
    TranscriptMessage,
    Undecided,
    draft_id,
)
from rolecall.version import __version__
from rolecall.world.models import World

ID_PATTERN_RE = re.compile(ID_PATTERN)
MAX_SQLITE_INT: Final = 2**63 - 1  # the largest number the store can hold
FORMAT: Final = "rolecall-session"
VERSION: Final = 1


class PointerDoc(BaseModel):
    model_config = ConfigDict(defer_build=True)

    current: str | None = None
    exec_counts: dict[str, int] = Field(default_factory=dict)
    execution_order: int = 0
    started: bool = False


class StateDoc(BaseModel):
    model_config = ConfigDict(defer_build=True)

    state: State
    stop_reason: str | None = None
    stop_detail: str = ""
    pause_reason: str | None = None
    pointer: PointerDoc = Field(default_factory=PointerDoc)
    flags: list[str] = Field(default_factory=list)
    turn_counts: dict[str, int] = Field(default_factory=dict)
    limit_notified: list[str] = Field(default_factory=list)
    memory_start: dict[str, int] = Field(default_factory=dict)
    pending: list[PendingReply] = Field(default_factory=list)
    extra: dict[str, Any] = Field(default_factory=dict)


class SessionDocument(BaseModel):
    model_config = ConfigDict(defer_build=True)

    format: Literal["rolecall-session"] = "rolecall-session"
    version: int = VERSION
    rolecall_version: str = __version__
    session_id: str
    created_at: datetime
    updated_at: datetime
    world: dict[str, Any]
    world_source: str | None = None
    model_override: str | None = None
    state: StateDoc
    last_seq: Annotated[int, Field(ge=0, le=MAX_SQLITE_INT)] = 0
    messages: list[TranscriptMessage] = Field(default_factory=list)
    execution_log: list[ExecutionRecord] = Field(default_factory=list)
    drafts: list[Draft] = Field(default_factory=list)
    events: list[dict[str, Any]] = Field(default_factory=list)
    memory: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)

    @field_validator("events")
    @classmethod
    def _event_keys(cls, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        for i, event in enumerate(events):
            for key in ("topic", "type"):
                if not isinstance(event.get(key), str):
                    raise ValueError(f"events[{i}] has no {key!r} (a text)")
            seq = event.get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool) or not 0 < seq <= MAX_SQLITE_INT:
                raise ValueError(f"events[{i}]: seq must be a whole number from 1 to 2**63-1")
        return events

    @field_validator("drafts")
    @classmethod
    def _draft_ids(cls, drafts: list[Draft]) -> list[Draft]:
        """Drafts stored before they had ids get theirs: d1, d2, ... in order."""
        for i, draft in enumerate(drafts):
            if not draft.id:
                draft.id = draft_id(i)
        return drafts

    @field_validator("memory")
    @classmethod
    def _agent_ids(cls, memory: dict[str, list[dict[str, Any]]]) -> dict[str, list[dict[str, Any]]]:
        for agent in memory:
            if not ID_PATTERN_RE.fullmatch(agent):
                raise ValueError(f"memory: {agent!r} is not an agent id")
        return memory

    def world_model(self) -> World:
        """The world as it was run; UsageError when the document's world is damaged."""
        try:
            return World.model_validate(self.world)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"]) or "world"
            raise UsageError(
                f"session {self.session_id!r}: its world is damaged: world.{where}: "
                f"{first['msg']} ({exc.error_count()} problems)"
            ) from None


def state_doc(state: SessionState) -> StateDoc:
    """The session document's ``state`` object."""
    return StateDoc.model_validate(_state_fields(state))


def extra_doc(state: SessionState) -> dict[str, Any]:
    """The document's ``extra`` object: the typed control state in its stored layout.

    The layout is the one every stored session has (``undecided`` as ``[step,
    iteration, started, message]``, ``concluding`` as ``[reason, detail]``,
    ``final_done``, ``judge_scores``, each mode's own object), so older and newer
    documents read the same.
    """
    out: dict[str, Any] = {"judge_scores": state.judge_scores}
    for key, value in state.extra.items():  # a mode's typed state is stored as its JSON
        out[key] = value.model_dump(mode="json") if isinstance(value, BaseModel) else value
    if state.undecided is not None:
        u = state.undecided
        out["undecided"] = [u.step_id, u.iteration, u.started.isoformat(), u.message_id]
    if state.concluding is not None:
        out["concluding"] = [state.concluding.reason, state.concluding.detail]
    if state.final_done:
        out["final_done"] = True
    return out


def _control(state: SessionState, extra: dict[str, Any]) -> None:
    """Move the stored control state out of ``extra`` into its typed fields."""
    scores = extra.pop("judge_scores", None)
    if isinstance(scores, dict):
        state.judge_scores = {str(k): dict(v) for k, v in scores.items() if isinstance(v, dict)}
    undecided = extra.pop("undecided", None)
    if isinstance(undecided, list) and len(undecided) == 4:
        step_id, iteration, started, message_id = undecided
        state.undecided = Undecided(
            str(step_id), int(iteration), datetime.fromisoformat(str(started)), str(message_id)
        )
    concluding = extra.pop("concluding", None)
    if isinstance(concluding, list) and len(concluding) == 2:
        state.concluding = Concluding(str(concluding[0]), str(concluding[1]))
    state.final_done = bool(extra.pop("final_done", False))
    state.extra = extra


def state_json(state: SessionState) -> str:
    """``state_doc(state).model_dump_json()``, the same text, without building the model.

    The store writes it at every turn; pydantic's serializer takes the plain values (and
    the pending replies, models themselves) directly.
    """
    return to_json(_state_fields(state)).decode()


def _state_fields(state: SessionState) -> dict[str, Any]:
    """The fields of the document's ``state`` object, as plain values (one definition
    for :func:`state_doc` and :func:`state_json`)."""
    p = state.pointer
    return {
        "state": state.state,
        "stop_reason": state.stop_reason,
        "stop_detail": state.stop_detail,
        "pause_reason": state.pause_reason,
        "pointer": {
            "current": p.current,
            "exec_counts": p.exec_counts,
            "execution_order": p.execution_order,
            "started": p.started,
        },
        "flags": sorted(state.flags),
        "turn_counts": state.turn_counts,
        "limit_notified": sorted(state.limit_notified),
        "memory_start": state.memory_start,
        "pending": state.pending,
        "extra": extra_doc(state),
    }


def world_dict(world: World) -> dict[str, Any]:
    return world.model_dump(mode="json", by_alias=True, exclude_none=True)


class SnapshotSite(Protocol):
    """What a snapshot reads of a live session (``rolecall.runtime.Dialogue`` has it; named
    here so that the document stays below the runtime)."""

    @property
    def state(self) -> SessionState: ...
    @property
    def world(self) -> World: ...
    @property
    def model_override(self) -> str | None: ...
    @property
    def bus(self) -> Bus: ...

    def clock(self) -> datetime: ...


def snapshot(
    session: SnapshotSite,
    *,
    created_at: datetime,
    world_source: str | None = None,
    events: list[dict[str, Any]] | None = None,
    memory: dict[str, list[dict[str, Any]]] | None = None,
) -> SessionDocument:
    state = session.state
    return SessionDocument(
        session_id=state.session_id,
        created_at=created_at,
        updated_at=session.clock(),
        world=world_dict(session.world),
        world_source=world_source,
        model_override=session.model_override,
        state=state_doc(state),
        last_seq=session.bus.last_seq,
        messages=list(state.transcript.messages),
        execution_log=list(state.execution_log),
        drafts=list(state.drafts),
        events=events if events is not None else [],
        memory=memory or {},
    )


def restore_state(doc: SessionDocument) -> SessionState:
    """The live state of a stored session: indexes rebuilt, nothing regenerated."""
    s = doc.state
    transcript = Transcript()
    for message in doc.messages:
        transcript.add(message)
    state = SessionState(
        session_id=doc.session_id,
        state=s.state,
        transcript=transcript,
        pointer=FlowPointer(
            current=s.pointer.current,
            exec_counts=dict(s.pointer.exec_counts),
            execution_order=s.pointer.execution_order,
            started=s.pointer.started,
        ),
        flags=set(s.flags),
        turn_counts=dict(s.turn_counts),
        limit_notified=set(s.limit_notified),
        memory_start=dict(s.memory_start),
        pending=list(s.pending),
        execution_log=list(doc.execution_log),
        drafts=list(doc.drafts),
        pause_reason=s.pause_reason,
        stop_reason=s.stop_reason,
        stop_detail=s.stop_detail,
    )
    _control(state, dict(s.extra))
    return state


# ------------------------------------------------------------------ files
def write_session_file(path: Path, doc: SessionDocument) -> None:
    """Write atomically: a temporary file beside ``path``, fsync, then rename over it."""
    try:
        write_atomically(Path(path), doc.model_dump_json())
    except OSError as exc:
        raise StorageError(f"cannot write session file {path}: {exc.strerror or exc}") from exc


def _migrate(data: dict[str, Any], source: str) -> dict[str, Any]:
    """Bring an older document to the current version, or refuse with what to do."""
    version = data.get("version")
    if not isinstance(version, int):
        raise UsageError(f"{source}: not a rolecall session file (no format version)")
    if version > VERSION:
        raise UsageError(
            f"{source}: session file format version {version} is newer than this rolecall "
            f"supports ({VERSION}); upgrade rolecall to open it"
        )
    if version < 1:
        raise UsageError(
            f"{source}: session file format version {version} predates the first released "
            f"format ({VERSION}) and cannot be migrated; re-run the world to create a new session"
        )
    return data


def _missing_key(data: dict[str, Any]) -> str | None:
    """The first key a session file lacks, as ``where: field required``. Every key here
    has been written into every session file since the first format version, so a
    missing one means the file was damaged (a default would silently stand in for it:
    no ``messages`` resumed a session with no history)."""
    for key in SessionDocument.model_fields:
        if key not in data:
            return f"{key}: field required"
    state = data["state"]
    if isinstance(state, dict):
        for key in StateDoc.model_fields:
            if key not in state:
                return f"state.{key}: field required"
        pointer = state["pointer"]
        if isinstance(pointer, dict):
            for key in PointerDoc.model_fields:
                if key not in pointer:
                    return f"state.pointer.{key}: field required"
    return None


def inconsistency(doc: SessionDocument) -> str | None:
    """What makes ``doc`` not a session rolecall could have written, naming the part
    (``where: what``); None when its parts agree. One pass over each list, no model
    built: a 10,000-message document is checked in a few milliseconds.

    Message ids run m1, m2, ... in order (so each is unique); a message answers an
    earlier one; the execution log, the pending replies and an undecided step name
    messages the document has; a finished session has its stop reason; event numbers
    (``seq``) are unique and none is past ``last_seq``.
    """
    messages = doc.messages
    count = len(messages)
    ids = [m.id for m in messages]
    if ids != [f"m{k}" for k in range(1, count + 1)]:
        return _bad_id(ids)
    index = dict(zip(ids, range(count), strict=True))  # id -> position
    for i, message in enumerate(messages):
        reply_to = message.reply_to
        if reply_to is not None and index.get(reply_to, count) >= i:
            return f"messages[{i}].reply_to: {reply_to!r} is no earlier message"
    has = f"the file has {count} message" + ("" if count == 1 else "s")
    for i, record in enumerate(doc.execution_log):
        mid = record.message_id
        if mid is not None and mid not in index:
            return f"execution_log[{i}].message_id: no message {mid!r} ({has})"
    state = doc.state
    for i, reply in enumerate(state.pending):
        if reply.message_id not in index:
            return f"state.pending[{i}].message_id: no message {reply.message_id!r} ({has})"
    if state.state == "finished" and not state.stop_reason:
        return "state.stop_reason: a finished session has the reason it stopped (got none)"
    problem = _control_problem(state.extra, index, has)
    if problem is not None:
        return problem
    seqs = [event["seq"] for event in doc.events]
    if seqs and max(seqs) > doc.last_seq:
        i = next(i for i, seq in enumerate(seqs) if seq > doc.last_seq)
        return f"events[{i}].seq: {seqs[i]} is past last_seq ({doc.last_seq})"
    if len(set(seqs)) != len(seqs):
        first: dict[int, int] = {}
        for i, seq in enumerate(seqs):
            if first.setdefault(seq, i) != i:
                return f"events[{i}].seq: {seq} is also the number of events[{first[seq]}]"
    return None


def _bad_id(ids: list[str]) -> str:
    """The first message id out of place (ids run m1, m2, ... in order)."""
    first: dict[str, int] = {}
    for i, mid in enumerate(ids):
        if mid in first:
            return f"messages[{i}].id: {mid!r} is also the id of messages[{first[mid]}]"
        if mid != f"m{i + 1}":
            return (
                f"messages[{i}].id: {mid!r} where 'm{i + 1}' belongs "
                "(message ids run m1, m2, ... in order)"
            )
        first[mid] = i
    raise AssertionError("the ids are in order")


def _control_problem(extra: dict[str, Any], index: dict[str, int], has: str) -> str | None:
    """What is wrong with the stored control state (``undecided``, ``concluding``)."""
    undecided = extra.get("undecided")
    if undecided is not None:
        shape = "[step id, loop iteration, start time, message id]"
        if not isinstance(undecided, list) or len(undecided) != 4:
            return f"state.extra.undecided: expected {shape}"
        step, iteration, started, message_id = undecided
        if not isinstance(step, str) or not isinstance(message_id, str):
            return f"state.extra.undecided: expected {shape}"
        if not isinstance(iteration, int) or isinstance(iteration, bool) or iteration < 0:
            return f"state.extra.undecided: the loop iteration {iteration!r} is no whole number"
        try:
            datetime.fromisoformat(str(started))
        except ValueError:
            return f"state.extra.undecided: the start time {started!r} is no ISO time"
        if message_id not in index:
            return f"state.extra.undecided: no message {message_id!r} ({has})"
    concluding = extra.get("concluding")
    if concluding is not None and not (
        isinstance(concluding, list)
        and len(concluding) == 2
        and all(isinstance(part, str) for part in concluding)
    ):
        return "state.extra.concluding: expected [reason, detail]"
    return None


def check_document(
    doc: SessionDocument, source: str, *, damaged: str = "damaged session file"
) -> SessionDocument:
    """``doc``, or UsageError ``<source>: <damaged>: <what, naming the part>`` when its
    parts do not agree (:func:`inconsistency`)."""
    problem = inconsistency(doc)
    if problem is not None:
        raise UsageError(f"{source}: {damaged}: {problem}")
    return doc


def parse_document(text: str, source: str) -> SessionDocument:
    try:
        data = json.loads(text)
    except RecursionError:
        raise UsageError(f"{source}: not a session file (nested too deeply)") from None
    except json.JSONDecodeError as exc:
        raise UsageError(
            f"{source}: not a session file (invalid JSON at line {exc.lineno}, "
            f"column {exc.colno}: {exc.msg})"
        ) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{source}: not a rolecall session file (format is not {FORMAT!r})")
    data = _migrate(data, source)
    missing = _missing_key(data)
    if missing is not None:
        raise UsageError(f"{source}: damaged session file: {missing}")
    try:
        doc = SessionDocument.model_validate(data)
    except RecursionError:
        raise UsageError(f"{source}: damaged session file (nested too deeply)") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise UsageError(
            f"{source}: damaged session file: {where}: {first['msg']} "
            f"({exc.error_count()} problems)"
        ) from None
    return check_document(doc, source)


def read_session_file(path: Path) -> SessionDocument:
    try:
        text = read_text(Path(path))
    except OSError as exc:
        raise UsageError(f"cannot read session file {path}: {exc.strerror or exc}") from exc
    except NotTextError as exc:
        raise UsageError(f"{path}: not a session file ({exc.problem})") from None
    return parse_document(text, str(path))
