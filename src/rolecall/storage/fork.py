"""Forking a stored session at one of its messages (sessions.md, Forking). Pure.

The fork's history is m1..mK of the parent (mK's text replaced when an edit is given).
Its state is rebuilt from the parent's execution log and stored turns:

* a fork at a flow step's message leaves that step *undecided*, exactly as the runtime
  stores a step whose message is kept but whose next step is not decided yet: the
  execution log holds the records before mK, the pointer counts mK's execution, and
  ``resume`` runs the step's hooks (a judge) and decides the next step on the fork's own
  history (so an edit that now says ``FINAL ANSWER`` stops the flow, as it would have);
* a fork at any other message (the human's, an interjection, a judge's verdict, the
  final turn) keeps the records up to mK; the pointer is where the parent went next;
* transcript counters and budgets (turns, tokens, cost, seconds) follow from m1..mK;
  chat turn counts are the agents' replies since the last human message; judge scores
  are replayed from the ``system/judge`` events up to mK; the events themselves are cut
  after mK's message.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rolecall.errors import UsageError
from rolecall.llm.types import estimate_tokens
from rolecall.session.state import PendingReply, TranscriptMessage
from rolecall.storage.document import PointerDoc, SessionDocument, StateDoc

MESSAGE_ID = re.compile(r"^m([1-9][0-9]*)$")
FORK_KEY = "fork"  # state.extra[FORK_KEY] = {"parent": ID, "at": "mK"}
# "tool_turn": a turn with tools in progress (tools.md) belongs to the parent's next message
TRANSIENT = ("undecided", "concluding", "final_done", "judge_scores", FORK_KEY, "tool_turn")


@dataclass(frozen=True, slots=True)
class MessageHead:
    """What the fork needs of a kept message other than mK: its id, sender and kind."""

    id: str
    sender: str
    kind: str


@dataclass(frozen=True, slots=True)
class RecordHead:
    """What the fork needs of an execution record (``started_at`` as stored, ISO 8601)."""

    execution_order: int
    step_id: str
    message_id: str | None
    loop_iteration: int
    started_at: str


@dataclass(frozen=True)
class ForkSource:
    """What a fork of ``header`` at mK is computed from (a store reads only this).

    ``header`` is the parent without its messages and events; ``heads`` are m1..mK;
    ``message_event`` is mK's ``messages/message`` event (None when not stored) and
    ``judge_events`` the ``system/judge`` events before it, in order.
    """

    header: SessionDocument
    heads: Sequence[MessageHead]
    last: TranscriptMessage
    records: list[RecordHead]
    message_event: dict[str, Any] | None
    judge_events: list[dict[str, Any]]


@dataclass(frozen=True)
class ForkPlan:
    """The new session: the first ``k - 1`` messages, events before ``last_seq`` and
    the ``records`` are the parent's, unchanged; ``last`` (mK) and ``message_event``
    are edited when an edit was given."""

    parent: str
    at: str
    k: int
    new_id: str
    now: datetime
    model_override: str | None
    world: dict[str, Any]
    world_source: str | None
    state: StateDoc
    last: TranscriptMessage
    edited: bool
    records: list[RecordHead]  # the parent's records the fork keeps, in order
    message_event: dict[str, Any] | None
    last_seq: int


def message_number(at: str, session_id: str, total: int) -> int:
    """K of ``mK``, checked against the parent's ``total`` messages."""
    found = MESSAGE_ID.match(at)
    if found is None:
        raise UsageError(f"--at {at!r}: a message id like m3 (session has m1..m{total})")
    k = int(found.group(1))
    if k > total:
        raise UsageError(
            f"--at {at}: session {session_id} has "
            + (f"messages m1..m{total}" if total else "no messages")
        )
    return k


def fork_info(doc: SessionDocument) -> tuple[str, str] | None:
    """(parent id, fork point) of a forked session, else None."""
    info = doc.state.extra.get(FORK_KEY)
    if isinstance(info, dict) and isinstance(info.get("parent"), str):
        return info["parent"], str(info.get("at", ""))
    return None


def fork(
    doc: SessionDocument,
    at: str,
    *,
    new_id: str,
    now: datetime,
    edit: str | None = None,
    model: str | None = None,
) -> tuple[ForkPlan, SessionDocument]:
    """A new session forked from ``doc`` right after message ``at``: its plan (what
    a store copies, :func:`plan_fork`) and its whole document."""
    k = message_number(at, doc.session_id, len(doc.messages))
    kept = doc.messages[:k]
    cut = _message_event_index(doc.events, kept[-1].id)
    source = ForkSource(
        header=doc.model_copy(update={"messages": [], "events": []}),
        heads=[MessageHead(m.id, m.sender, m.kind) for m in kept],
        last=kept[-1],
        records=[
            RecordHead(
                r.execution_order,
                r.step_id,
                r.message_id,
                r.loop_iteration,
                r.started_at.isoformat(),
            )
            for r in doc.execution_log
        ],
        message_event=None if cut is None else doc.events[cut],
        judge_events=[] if cut is None else [e for e in doc.events[:cut] if _is_judge(e)],
    )
    plan = plan_fork(source, at, new_id=new_id, now=now, edit=edit, model=model)
    events = [] if cut is None else [dict(e) for e in doc.events[:cut]]
    orders = {r.execution_order for r in plan.records}
    if plan.message_event is not None:
        events.append(plan.message_event)
    return plan, doc.model_copy(
        update={
            "session_id": new_id,
            "created_at": now,
            "updated_at": now,
            "model_override": plan.model_override,
            "state": plan.state,
            "last_seq": plan.last_seq,
            "messages": [*kept[:-1], plan.last],
            "execution_log": [r for r in doc.execution_log if r.execution_order in orders],
            "drafts": [],
            "events": events,
            "memory": {},
        }
    )


def plan_fork(
    source: ForkSource,
    at: str,
    *,
    new_id: str,
    now: datetime,
    edit: str | None = None,
    model: str | None = None,
) -> ForkPlan:
    """The fork of ``source`` right after its last head (mK): state, records, mK."""
    doc = source.header
    k = len(source.heads)
    last = source.last
    if edit is not None:
        if not edit.strip():
            raise UsageError("--edit: the new text is empty")
        update: dict[str, Any] = {"content": edit}
        if last.kind == "agent":
            update["output_tokens"] = estimate_tokens(edit)
        last = last.model_copy(update=update)
    kept_ids = {m.id for m in source.heads}
    records = [r for r in source.records if r.message_id in kept_ids]
    extra = {key: value for key, value in doc.state.extra.items() if key not in TRANSIENT}
    flow_record = next(
        (r for r in reversed(records) if r.message_id == last.id and r.step_id == last.step_id),
        None,
    )
    speakers = {
        s.get("id"): s.get("speaker") for s in (doc.world.get("flow") or {}).get("steps", [])
    }
    world_steps = set(speakers)
    if flow_record is not None and speakers.get(flow_record.step_id) == last.sender:
        records.remove(flow_record)
        counts = Counter(r.step_id for r in records)
        counts[flow_record.step_id] += 1
        pointer = PointerDoc(
            current=flow_record.step_id,
            exec_counts=dict(counts),
            execution_order=len(records) + 1,
            started=True,
        )
        extra["undecided"] = [
            flow_record.step_id,
            flow_record.loop_iteration,
            flow_record.started_at,
            last.id,
        ]
    else:
        pointer = PointerDoc(
            current=_next_step(source.records, records, world_steps, doc.state.pointer.current),
            exec_counts=dict(Counter(r.step_id for r in records)),
            execution_order=len(records),
            started=bool(records),
        )
    event = source.message_event
    if event is not None:
        scores = _judge_scores(source.judge_events)
        if scores:
            extra["judge_scores"] = scores
        event = dict(event)
        if edit is not None:
            event["content"] = edit
    extra[FORK_KEY] = {"parent": doc.session_id, "at": at}
    state = doc.state.model_copy(
        update={
            "state": "paused",
            "stop_reason": None,
            "stop_detail": "",
            "pause_reason": "fork",
            "pointer": pointer,
            "flags": [],
            "turn_counts": _turn_counts(source.heads),
            "limit_notified": [],
            "memory_start": {a: min(i, k) for a, i in doc.state.memory_start.items()},
            "pending": _owed(doc.world, last),
            "extra": extra,
        }
    )
    return ForkPlan(
        parent=doc.session_id,
        at=at,
        k=k,
        new_id=new_id,
        now=now,
        model_override=model if model is not None else doc.model_override,
        world=doc.world,
        world_source=doc.world_source,
        state=state,
        last=last,
        edited=edit is not None,
        records=records,
        message_event=event,
        last_seq=0 if event is None else int(event.get("seq", 0)),
    )


def _owed(world: dict[str, Any], last: TranscriptMessage) -> list[PendingReply]:
    """The replies a chat owes its last message, a human's (edited or not): the fork
    goes on by answering it, as the message got answered when it was sent. Who answers
    is routed as then (addressed, mentioned, or everyone); a flow or a mode decides
    its next turn itself, and an agent's message is an answer already."""
    if last.kind != "human" or world.get("flow") or world.get("mode"):
        return []
    from rolecall.routing.decide import route

    roles = [str(r.get("id")) for r in world.get("roles") or () if r.get("id")]
    try:
        answerers = route(last.sender, last.content, roles).answerers
    except ValueError:
        return []
    return [PendingReply(agent=a, message_id=last.id, kind="chat") for a in answerers]


def _message_event_index(events: list[dict[str, Any]], message_id: str) -> int | None:
    """Where mK's ``messages/message`` event is among ``events``."""
    for i, event in enumerate(events):
        if event.get("type") == "message" and event.get("message_id") == message_id:
            return i
    return None


def _is_judge(event: dict[str, Any]) -> bool:
    return event.get("type") == "judge"


def _next_step(
    everything: list[RecordHead],
    kept: list[RecordHead],
    steps: set[Any],
    current: str | None,
) -> str | None:
    """Where the parent's flow went after the kept records (else its pointer)."""
    for record in everything[len(kept) :]:
        if record.step_id in steps:
            return record.step_id
    return current


def _turn_counts(heads: Sequence[MessageHead]) -> dict[str, int]:
    """Agents' replies since the latest human message (chat's turn limit)."""
    counts: Counter[str] = Counter()
    for message in reversed(heads):
        if message.kind == "human":
            break
        if message.kind == "agent":
            counts[message.sender] += 1
    return dict(counts)


def _judge_scores(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The judge scores as the runtime keeps them, from the kept ``system/judge`` events."""
    table: dict[str, dict[str, float]] = {}
    for event in events:
        if event.get("type") == "judge" and event.get("scores") and event.get("judge"):
            table.setdefault(str(event["judge"]), {}).update(event["scores"])
    return table
