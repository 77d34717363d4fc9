"""The session as plain data: transcript, flow pointer, counters, flags, budgets.

Everything here is pure and O(1) per message: indexes of the latest message by
sender and by step are kept as messages are added, so deciding what happens next
never scans the history.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rolecall.message_fields import MessageFields

SenderKind = Literal["human", "agent", "system"]
State = Literal["created", "running", "paused", "finished"]


class _MessageKey(BaseModel):
    """The fields of a transcript message before what it says (:class:`MessageFields`)."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    id: str
    kind: SenderKind


class TranscriptMessage(MessageFields, _MessageKey):
    """One message of a session, as stored: its id and kind, what it says and cost
    (:class:`~rolecall.message_fields.MessageFields`, which its ``messages/message`` event
    publishes), when it was said and how long its generation took."""

    ts: datetime
    seconds: float = 0.0  # generation time


class PendingReply(BaseModel):
    """A reply that is due: ``agent`` answers message ``message_id``."""

    model_config = ConfigDict(defer_build=True)

    agent: str
    message_id: str
    # select: a selection chat's turn (selection.md); agent "" until it is chosen
    kind: Literal["chat", "interjection", "select"] = "chat"
    round: int = Field(default=0, exclude_if=lambda v: not v)  # select: the selected turn, 1..


class Draft(BaseModel):
    """A generation that did not complete (cancelled or failed): outside the history.

    ``id`` (``d1``, ``d2``, ... in session order) names the draft; ``message_id`` is the
    id its message would have had, which the next message of the session takes, so
    ``mN`` always names one message (events.md, ``sse``)."""

    model_config = ConfigDict(defer_build=True)

    id: str = ""  # "" only in documents written before drafts had ids (filled on load)
    message_id: str
    sender: str
    content: str
    reason: str
    step_id: str | None = None
    ts: datetime


def draft_id(index: int) -> str:
    """The id of the draft at ``index`` (0-based) of a session's drafts."""
    return f"d{index + 1}"


class ExecutionRecord(BaseModel):
    """One executed step (flows.md, Execution log)."""

    model_config = ConfigDict(defer_build=True)

    execution_order: int
    step_id: str
    speaker: str
    message_id: str | None
    loop_iteration: int
    result: str
    started_at: datetime
    ended_at: datetime
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Transcript:
    """The ordered messages with constant-time lookups."""

    messages: list[TranscriptMessage] = field(default_factory=list)
    by_id: dict[str, TranscriptMessage] = field(default_factory=dict)
    latest_by_sender: dict[str, TranscriptMessage] = field(default_factory=dict)
    latest_by_step: dict[str, TranscriptMessage] = field(default_factory=dict)
    agent_turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    seconds: float = 0.0
    turns_by_role: dict[str, int] = field(default_factory=dict)
    known_cost: float = 0.0  # the summed cost of the agent messages whose cost is known
    unpriced: int = 0  # agent messages whose cost is unknown
    # the latest message whose sender differs from the latest message's sender
    before_run: TranscriptMessage | None = None

    def __len__(self) -> int:
        return len(self.messages)

    def next_id(self) -> str:
        return f"m{len(self.messages) + 1}"

    def add(self, message: TranscriptMessage) -> None:
        if self.messages and self.messages[-1].sender != message.sender:
            self.before_run = self.messages[-1]
        self.messages.append(message)
        self.by_id[message.id] = message
        self.latest_by_sender[message.sender] = message
        if message.step_id is not None:
            self.latest_by_step[message.step_id] = message
        if message.kind == "agent":
            self.agent_turns += 1
            self.turns_by_role[message.sender] = self.turns_by_role.get(message.sender, 0) + 1
        self.input_tokens += message.input_tokens
        self.output_tokens += message.output_tokens
        self.seconds += message.seconds
        if message.kind == "agent":
            if message.cost_usd is None:
                self.unpriced += 1
            else:
                self.known_cost += message.cost_usd

    def charge(self, input_tokens: int, output_tokens: int, cost_usd: float | None) -> None:
        """Count a model call that made no message (the speaker selector, selection.md)
        in the session's tokens and cost, so the budgets see it."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if cost_usd is None:
            self.unpriced += 1
        else:
            self.known_cost += cost_usd

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_usd(self) -> float | None:
        """What the session's generations cost; None when any of them has no known cost."""
        return None if self.unpriced else self.known_cost

    def latest_not_by(self, sender: str) -> TranscriptMessage | None:
        """The latest message by anyone but ``sender``, in constant time."""
        if not self.messages:
            return None
        last = self.messages[-1]
        return last if last.sender != sender else self.before_run

    def latest(self, sender: str | None = None) -> TranscriptMessage | None:
        if sender is None:
            return self.messages[-1] if self.messages else None
        return self.latest_by_sender.get(sender)


@dataclass
class FlowPointer:
    """Where a flow stands: the next step, per-step execution counts, execution order."""

    current: str | None = None
    exec_counts: dict[str, int] = field(default_factory=dict)
    execution_order: int = 0
    started: bool = False

    def begin(self, step_id: str) -> int:
        """Count one more execution of ``step_id``; returns its loop_iteration (0-based)."""
        iteration = self.exec_counts.get(step_id, 0)
        self.exec_counts[step_id] = iteration + 1
        self.execution_order += 1
        self.started = True
        return iteration


@dataclass
class Undecided:
    """A flow step whose message is stored but whose decision is not (hooks still due)."""

    step_id: str
    iteration: int
    started: datetime
    message_id: str


@dataclass
class Concluding:
    """The flow has stopped; its final step is still due."""

    reason: str
    detail: str


@dataclass
class SessionState:
    """All mutable state of one session (what a session file holds besides definitions)."""

    session_id: str
    state: State = "created"
    transcript: Transcript = field(default_factory=Transcript)
    pointer: FlowPointer = field(default_factory=FlowPointer)
    flags: set[str] = field(default_factory=set)
    turn_counts: dict[str, int] = field(default_factory=dict)  # chat: LLM calls since human input
    limit_notified: set[str] = field(default_factory=set)  # chat: agents already told this episode
    memory_start: dict[str, int] = field(default_factory=dict)  # cleared memory: first index kept
    pending: list[PendingReply] = field(default_factory=list)  # replies due, in order
    execution_log: list[ExecutionRecord] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)
    undecided: Undecided | None = None
    concluding: Concluding | None = None
    final_done: bool = False  # the flow's final step has run
    judge_scores: dict[str, dict[str, float]] = field(
        default_factory=dict
    )  # judge -> name -> score
    extra: dict[str, Any] = field(default_factory=dict)  # modes' own state (JSON-able)
    pause_reason: str | None = None
    stop_reason: str | None = None
    stop_detail: str = ""

    def next_draft_id(self) -> str:
        """The id the next draft gets: ``d1``, ``d2``, ... in session order."""
        return draft_id(len(self.drafts))
