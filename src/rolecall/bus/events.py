"""Every event of events.md as a typed model, in one discriminated union.

The payload models carry ``topic`` and ``type``; routing metadata (``seq``,
``session_id``, ``ts``) lives in :class:`Envelope`. ``to_record`` flattens an envelope
into the JSON object of the ``--json`` stream and ``from_record`` reads one back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from json.encoder import encode_basestring
from typing import Annotated, Any, Literal, Self, TypeVar, get_args

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, TypeAdapter

from rolecall.message_fields import MESSAGE_FIELDS, MessageFields

Topic = Literal["messages", "sse", "system", "world"]
TOPICS: tuple[Topic, ...] = ("messages", "sse", "system", "world")
SessionStateName = Literal["created", "running", "paused", "finished"]


class _Event(BaseModel):
    model_config = ConfigDict(defer_build=True, frozen=True, extra="forbid")

    @classmethod
    def trusted(cls, **values: Any) -> Self:
        """The event of ``values`` the runtime computed itself, without validating them.

        For the events published on every turn and chunk (pydantic's validation is most
        of their cost). The values must already have the field types; the names are
        checked (an unknown or missing field raises ``TypeError``), and omitted fields
        take their defaults, as with the validating constructor.
        """
        spec = _SPECS.get(cls) or _spec(cls)
        data = {**spec.template, **values}
        if len(data) != spec.size or _REQUIRED in data.values():
            raise TypeError(f"{cls.__name__}.trusted: {_field_problem(spec, values)}")
        for name, factory in spec.factories:
            if name not in values:
                data[name] = factory()
        return _built(cls, data, set(values))


def _built(cls: type[_E], data: dict[str, Any], fields_set: set[str]) -> _E:
    """An instance of ``cls`` holding ``data`` (every field, in order), unvalidated."""
    event = _new(cls)
    _set(event, "__dict__", data)
    _set_fields_set(event, fields_set)
    _set_extra(event, None)
    _set_private(event, None)
    return event


_E = TypeVar("_E", bound=BaseModel)
_new = object.__new__
_set = object.__setattr__
# BaseModel's own slots, set through their descriptors (as pydantic's model_construct does)
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_REQUIRED: Any = object()  # the template's value of a field without a default


@dataclass(frozen=True, slots=True)
class _Spec:
    """What :meth:`_Event.trusted` needs of an event class: every field in order with its
    default (``_REQUIRED`` for a required one), how many there are, and the fields whose
    default comes from a factory."""

    template: dict[str, Any]
    size: int
    factories: tuple[tuple[str, Callable[[], Any]], ...]


_SPECS: dict[type[BaseModel], _Spec] = {}


def _spec(cls: type[BaseModel]) -> _Spec:
    fields = cls.model_fields
    template = {
        name: _REQUIRED if info.is_required() else info.default for name, info in fields.items()
    }
    factories = tuple(
        (name, info.default_factory)
        for name, info in fields.items()
        if info.default_factory is not None
    )
    spec = _SPECS[cls] = _Spec(template, len(template), factories)  # type: ignore[arg-type]
    return spec


def _field_problem(spec: _Spec, values: dict[str, Any]) -> str:
    unknown = sorted(values.keys() - spec.template.keys())
    if unknown:
        return f"unknown field {unknown[0]!r}"
    missing = [k for k, v in spec.template.items() if v is _REQUIRED and k not in values]
    return f"missing field {missing[0]!r}"


class _MessageHead(_Event):
    """The fields of a ``messages/message`` event before the message's own."""

    topic: Literal["messages"] = "messages"
    type: Literal["message"] = "message"
    message_id: str


class MessageEvent(MessageFields, _MessageHead):
    """A message said: its id, then its fields (:class:`MessageFields`)."""

    @classmethod
    def of(cls, message_id: str, message: MessageFields) -> MessageEvent:
        """The event of ``message`` (a transcript message), published on every turn: its
        fields taken as they are, unvalidated (as :meth:`trusted`)."""
        kept = message.__dict__
        data: dict[str, Any] = {"topic": "messages", "type": "message", "message_id": message_id}
        for name in MESSAGE_FIELDS:
            data[name] = kept[name]
        return _built(cls, data, set(_MESSAGE_SET))


_MESSAGE_SET = frozenset({"message_id", *MESSAGE_FIELDS})


class ToolCallEvent(_Event):
    """A call a role's model asked for (tools.md), stored before it is approved or run."""

    topic: Literal["messages"] = "messages"
    type: Literal["tool_call"] = "tool_call"
    call_id: str
    sender: str
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    message_id: str | None = None  # the turn's message, once said


class ToolResultEvent(_Event):
    topic: Literal["messages"] = "messages"
    type: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    content: str
    is_error: bool = False
    duration_ms: int = 0


class ToolApprovalEvent(_Event):
    """Whether a call runs: ``by`` policy, human, or the flag that decided (--approve)."""

    topic: Literal["system"] = "system"
    type: Literal["tool_approval"] = "tool_approval"
    call_id: str
    decision: Literal["allow", "deny"]
    by: str
    reason: str = ""
    # the arguments a person edited before allowing it (the call runs with these); left
    # out when it runs with the model's own
    arguments: Annotated[dict[str, Any], Field(exclude_if=lambda v: not v)] = Field(
        default_factory=dict
    )


class StreamStart(_Event):
    topic: Literal["sse"] = "sse"
    type: Literal["start"] = "start"
    message_id: str
    sender: str
    target: str | None = None
    step_id: str | None = None
    loop_iteration: int | None = None
    reply_to: str | None = None  # the id of the message it answers
    # audiences.md: the message's audience, as its messages/message will have it
    audience: Annotated[list[str] | None, Field(exclude_if=lambda v: v is None)] = None


class StreamChunk(_Event):
    topic: Literal["sse"] = "sse"
    type: Literal["chunk"] = "chunk"
    message_id: str
    sender: str
    delta: str
    output_tokens: int

    @classmethod
    def of(cls, message_id: str, sender: str, delta: str, output_tokens: int) -> StreamChunk:
        """A chunk the runtime streams (the hottest event: one per word), unvalidated as
        :meth:`trusted`, its fields given in order."""
        data = {
            "topic": "sse",
            "type": "chunk",
            "message_id": message_id,
            "sender": sender,
            "delta": delta,
            "output_tokens": output_tokens,
        }
        return _built(cls, data, {"message_id", "sender", "delta", "output_tokens"})


class StreamEnd(_Event):
    topic: Literal["sse"] = "sse"
    type: Literal["end"] = "end"
    message_id: str
    sender: str
    input_tokens: int
    output_tokens: int
    finish_reason: str | None = None  # the provider's (stop, length, ...) when it said


class StreamError(_Event):
    topic: Literal["sse"] = "sse"
    type: Literal["error"] = "error"
    message_id: str
    sender: str
    error: str
    partial: str = ""
    draft_id: str | None = None  # the draft keeping ``partial`` (message_id goes to the next)


class StepEvent(_Event):
    """One execution-log record (flows.md), emitted when the step's outcome is known."""

    topic: Literal["system"] = "system"
    type: Literal["step"] = "step"
    step_id: str
    speaker: str
    execution_order: int
    loop_iteration: int
    result: str
    message_id: str | None = None
    started_at: datetime | None = None
    ended_at: datetime | None = None
    input_tokens: int = 0
    output_tokens: int = 0


class ConditionEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["condition"] = "condition"
    condition: str
    result: bool
    detail: str
    context: str = ""  # where it was evaluated: stop, until:<step>, when:<step>


class TurnLimitEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["turn_limit"] = "turn_limit"
    agent: str
    count: int
    limit: int


class PassEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["pass"] = "pass"
    agent: str
    message_id: str | None = None
    reason: str = ""  # the rule that decided it (chat.md, Passing)


class RespondEvent(_Event):
    """An agent's decision whether to answer a message nobody was addressed in (chat.md,
    ``respond: {ask_model: true}``): its model's yes or no and the reason it gave."""

    topic: Literal["system"] = "system"
    type: Literal["respond"] = "respond"
    agent: str
    message_id: str
    respond: bool
    reason: str
    model: str | None = None  # None: decided without asking (e.g. its turn limit)
    input_tokens: int = 0
    output_tokens: int = 0


class SelectionEvent(_Event):
    """Who speaks next, and why (selection.md): the candidates, the one chosen (None:
    nobody could be), the rule that chose and the selector's raw answer (None when no
    model was asked). ``answers``: every answer it gave (two when it was asked again);
    the tokens and cost are its calls' (counted in the session's)."""

    topic: Literal["system"] = "system"
    type: Literal["selection"] = "selection"
    candidates: list[str]
    chosen: str | None
    by: Literal["model", "mention", "round_robin", "random", "fallback"]
    answer: str | None = None
    answers: list[str] = Field(default_factory=list)
    message_id: str | None = None  # the message the chosen speaker answers
    step_id: str | None = None  # a flow step's `speaker: select`
    model: str | None = None  # the selector's model, when it was asked
    error: str | None = None  # its last call's failure (a timeout...), when one failed
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None


class TrimEvent(_Event):
    """Text reply hygiene took out of a reply (real-models.md): ``kind`` ``tag``,
    ``other_speaker`` or ``repetition``; ``removed`` in full; ``shown``: how many of its
    first characters had already been streamed (``sse/chunk``), which a live display
    marks as cut. The message never holds the removed text."""

    topic: Literal["system"] = "system"
    type: Literal["trim"] = "trim"
    message_id: str
    kind: Literal["tag", "other_speaker", "repetition"]
    removed: str
    shown: int = 0


class WarningEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["warning"] = "warning"
    message: str


class ErrorEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["error"] = "error"
    error: str
    source: str = ""


class LogEvent(_Event):
    topic: Literal["system"] = "system"
    type: Literal["log"] = "log"
    message: str
    data: dict[str, Any] = Field(default_factory=dict)


class JudgeEvent(_Event):
    """A judge's structured verdict on a message (modes.md, Judge roles)."""

    topic: Literal["system"] = "system"
    type: Literal["judge"] = "judge"
    judge: str
    message_id: str | None = None  # the judge's own message
    about: str | None = None  # the message judged
    scores: dict[str, float] = Field(default_factory=dict)
    verdict: dict[str, Any] = Field(default_factory=dict)
    valid: bool = True


class ModeEvent(_Event):
    """A mode's own decision with its reasons (classification, reallocation, termination)."""

    topic: Literal["system"] = "system"
    type: Literal["mode"] = "mode"
    mode: str
    name: str
    data: dict[str, Any] = Field(default_factory=dict)


class KnowledgeEvent(_Event):
    """The passages retrieved for a role's turn, before its model is asked (knowledge.md):
    each ``{id, path, line_start, line_end, score, collection}``, ``id`` as the prompt
    and a citation name it (``k1``...); ``message_id`` the message being generated."""

    topic: Literal["system"] = "system"
    type: Literal["knowledge"] = "knowledge"
    role: str
    query: str
    passages: list[dict[str, Any]] = Field(default_factory=list)
    message_id: str | None = None


class LoreEvent(_Event):
    """A lore entry put into a role's prompt: a key of it was in the recent messages."""

    topic: Literal["system"] = "system"
    type: Literal["lore"] = "lore"
    role: str
    entry: str  # the entry's name (its first key unless named)
    key: str  # the key found
    message_id: str | None = None  # the message being generated


class SummaryEvent(_Event):
    """Older messages folded into a role's running summary (knowledge.md, Long sessions):
    ``text`` stands for messages ``from_id``..``to_id`` in the role's prompts from now on."""

    topic: Literal["system"] = "system"
    type: Literal["summary"] = "summary"
    role: str
    from_id: str
    to_id: str
    text: str
    model: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0


class SessionEvent(_Event):
    topic: Literal["world"] = "world"
    type: Literal["session"] = "session"
    state: SessionStateName
    reason: str | None = None


class AgentEvent(_Event):
    topic: Literal["world"] = "world"
    type: Literal["agent"] = "agent"
    agent: str
    # no "left": a world's roles take part for the whole session (docs/events.md)
    action: Literal["joined", "edited"]


class StopEvent(_Event):
    topic: Literal["world"] = "world"
    type: Literal["stop"] = "stop"
    reason: str
    detail: str = ""


def _tag(value: Any) -> str | None:
    if isinstance(value, dict):
        return f"{value.get('topic')}/{value.get('type')}"
    topic = getattr(value, "topic", None)
    kind = getattr(value, "type", None)
    return f"{topic}/{kind}" if topic and kind else None


Event = Annotated[
    Annotated[MessageEvent, Tag("messages/message")]
    | Annotated[ToolCallEvent, Tag("messages/tool_call")]
    | Annotated[ToolResultEvent, Tag("messages/tool_result")]
    | Annotated[ToolApprovalEvent, Tag("system/tool_approval")]
    | Annotated[StreamStart, Tag("sse/start")]
    | Annotated[StreamChunk, Tag("sse/chunk")]
    | Annotated[StreamEnd, Tag("sse/end")]
    | Annotated[StreamError, Tag("sse/error")]
    | Annotated[StepEvent, Tag("system/step")]
    | Annotated[ConditionEvent, Tag("system/condition")]
    | Annotated[TurnLimitEvent, Tag("system/turn_limit")]
    | Annotated[PassEvent, Tag("system/pass")]
    | Annotated[RespondEvent, Tag("system/respond")]
    | Annotated[SelectionEvent, Tag("system/selection")]
    | Annotated[TrimEvent, Tag("system/trim")]
    | Annotated[WarningEvent, Tag("system/warning")]
    | Annotated[ErrorEvent, Tag("system/error")]
    | Annotated[LogEvent, Tag("system/log")]
    | Annotated[JudgeEvent, Tag("system/judge")]
    | Annotated[ModeEvent, Tag("system/mode")]
    | Annotated[KnowledgeEvent, Tag("system/knowledge")]
    | Annotated[LoreEvent, Tag("system/lore")]
    | Annotated[SummaryEvent, Tag("system/summary")]
    | Annotated[SessionEvent, Tag("world/session")]
    | Annotated[AgentEvent, Tag("world/agent")]
    | Annotated[StopEvent, Tag("world/stop")],
    Discriminator(
        _tag,
        custom_error_type="unknown_event",
        custom_error_message="not a known topic/type pair",
    ),
]

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event, config=ConfigDict(defer_build=True))

#: Every event class by its ``topic/type`` tag (``"sse/start"``: :class:`StreamStart`).
EVENT_KINDS: dict[str, type[BaseModel]] = {
    get_args(member)[1].tag: get_args(member)[0] for member in get_args(get_args(Event)[0])
}


@dataclass(slots=True)
class Envelope:
    """An event as published: its place in the session's sequence and its time.

    Its JSON line is computed once and shared by every sink that writes it.
    """

    seq: int
    session_id: str
    ts: datetime
    event: Event
    _json: str | None = field(default=None, compare=False, repr=False)

    @property
    def topic(self) -> Topic:
        return self.event.topic

    @property
    def type(self) -> str:
        return self.event.type

    def to_json(self) -> str:
        """The flat JSON object of events.md as one line (common fields first)."""
        if self._json is None:
            event = self.event
            if type(event) is StreamChunk:
                self._json = chunk_line(
                    _json_string(self.session_id),
                    self.seq,
                    iso(self.ts),
                    event.message_id,
                    event.sender,
                    event.delta,
                    event.output_tokens,
                )
                return self._json
            payload = _payload(event)
            if payload is None:
                payload = event.__pydantic_serializer__.to_json(event, exclude=_ROUTING).decode()
            head = (
                f'{{"topic":"{event.topic}","type":"{event.type}","seq":{self.seq},'
                f'"session_id":{_json_string(self.session_id)},"ts":"{iso(self.ts)}"'
            )
            self._json = head + ("}" if payload == "{}" else "," + payload[1:])
        return self._json

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = json.loads(self.to_json())
        return record

    @classmethod
    def from_record(cls, record: dict[str, Any]) -> Envelope:
        data = dict(record)
        seq = data.pop("seq")
        session_id = data.pop("session_id")
        ts = data.pop("ts")
        return cls(
            seq=seq,
            session_id=session_id,
            ts=datetime.fromisoformat(ts) if isinstance(ts, str) else ts,
            event=EVENT_ADAPTER.validate_python(data),
        )


_ROUTING = {"topic", "type"}


def chunk_line(
    session_json: str, seq: int, ts: str, message_id: str, sender: str, delta: str, tokens: int
) -> str:
    """An ``sse/chunk`` event as ``--json`` prints it (``session_json``: the session id
    as a JSON string), as pydantic would write it, byte for byte."""
    return (
        f'{{"topic":"sse","type":"chunk","seq":{seq},"session_id":{session_json},'
        f'"ts":"{ts}","message_id":{encode_basestring(message_id)},'
        f'"sender":{encode_basestring(sender)},"delta":{encode_basestring(delta)},'
        f'"output_tokens":{tokens}}}'
    )


_KEYS: dict[str, str] = {}  # field name -> its JSON key and colon


def _payload(event: BaseModel) -> str | None:
    """The event's fields but topic and type as a JSON object, written here rather than
    by pydantic when every value is a string, integer, boolean, None, UTC datetime, plain
    float or list of strings, exactly as pydantic writes them (byte for byte); None when
    one is not (pydantic writes that event)."""
    parts: list[str] = []
    add = parts.append
    for name, value in event.__dict__.items():
        if name in _ROUTING:
            continue
        kind = type(value)
        if name == "tool_calls" and not value:  # a message's, left out when empty
            continue
        if value is None and name == "audience":  # a public message's, left out
            continue
        if name == "data_error" and value is None:  # left out without a shape
            continue
        if name == "data" and value is None and event.__dict__.get("data_error") is None:
            continue  # null only beside its error
        if value is None and name == "finish_reason" and type(event) is MessageEvent:
            continue  # a message's, left out unless the reply was cut
        if kind is str:
            text = encode_basestring(value)
        elif kind is int:
            text = str(value)
        elif value is None:
            text = "null"
        elif kind is bool:
            text = "true" if value else "false"
        elif kind is float:
            text = repr(value)
            if "e" in text or not math.isfinite(value):
                return None  # pydantic writes exponents and non-finite numbers its way
        elif kind is datetime and value.tzinfo is UTC:
            text = f'"{iso(value)}"'
        elif kind is list and all(type(v) is str for v in value):
            text = "[" + ",".join([encode_basestring(v) for v in value]) + "]"
        else:
            return None
        key = _KEYS.get(name)
        if key is None:
            key = _KEYS[name] = f'"{name}":'
        add(key + text)
    return "{" + ",".join(parts) + "}"


@lru_cache(maxsize=1024)
def _json_string(value: str) -> str:
    return json.dumps(value)


# the last UTC second formatted: (its fields, its text), replaced as one tuple so that a
# reader in another thread never pairs one second's fields with another's text
_second: tuple[tuple[int, ...], str] = ((), "")
# the last UTC time formatted, and its text (one tuple, for the same reason)
_last: tuple[datetime | None, str] = (None, "")


def iso(ts: datetime) -> str:
    """ISO 8601 as pydantic writes datetimes (UTC as ``Z``), so one record has one style.

    Events come many to a second: in UTC, the text up to the second is reused while the
    second lasts, and only the microseconds are formatted.
    """
    global _second, _last
    last = _last
    if last[0] is ts:  # the same time as the last one (a burst of chunks)
        return last[1]
    if ts.tzinfo is not UTC:
        text = ts.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    fields = (ts.second, ts.minute, ts.hour, ts.day, ts.month, ts.year)
    cached = _second
    if cached[0] != fields:
        cached = _second = (fields, ts.replace(microsecond=0, tzinfo=None).isoformat())
    micro = ts.microsecond
    text = f"{cached[1]}.{micro:06d}Z" if micro else f"{cached[1]}Z"
    _last = (ts, text)
    return text
