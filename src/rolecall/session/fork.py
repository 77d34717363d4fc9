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
from datetime import datetime
from typing import Any

from rolecall.errors import UsageError
from rolecall.llm.types import estimate_tokens
from rolecall.session.document import PointerDoc, SessionDocument
from rolecall.session.state import ExecutionRecord, Message

MESSAGE_ID = re.compile(r"^m([1-9][0-9]*)$")
FORK_KEY = "fork"  # state.extra[FORK_KEY] = {"parent": ID, "at": "mK"}
TRANSIENT = ("undecided", "concluding", "final_done", "judge_scores", FORK_KEY)


def message_number(at: str, doc: SessionDocument) -> int:
    """K of ``mK``, checked against the parent's history."""
    found = MESSAGE_ID.match(at)
    total = len(doc.messages)
    if found is None:
        raise UsageError(f"--at {at!r}: a message id like m3 (session has m1..m{total})")
    k = int(found.group(1))
    if k > total:
        raise UsageError(
            f"--at {at}: session {doc.session_id} has "
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
) -> SessionDocument:
    """The document of a new session forked from ``doc`` right after message ``at``."""
    k = message_number(at, doc)
    messages = list(doc.messages[:k])
    last = messages[-1]
    if edit is not None:
        if not edit.strip():
            raise UsageError("--edit: the new text is empty")
        update: dict[str, Any] = {"content": edit}
        if last.kind == "agent":
            update["output_tokens"] = estimate_tokens(edit)
        last = messages[-1] = last.model_copy(update=update)
    kept_ids = {m.id for m in messages}
    records = [r for r in doc.execution_log if r.message_id in kept_ids]
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
            flow_record.started_at.isoformat(),
            last.id,
        ]
    else:
        pointer = PointerDoc(
            current=_next_step(doc, records, world_steps),
            exec_counts=dict(Counter(r.step_id for r in records)),
            execution_order=len(records),
            started=bool(records),
        )
    events, last_seq = _events_until(doc.events, last, edit)
    scores = _judge_scores(events)
    if scores:
        extra["judge_scores"] = scores
    extra[FORK_KEY] = {"parent": doc.session_id, "at": at}
    state = doc.state.model_copy(
        update={
            "state": "paused",
            "stop_reason": None,
            "stop_detail": "",
            "pause_reason": "fork",
            "pointer": pointer,
            "flags": [],
            "turn_counts": _turn_counts(messages),
            "limit_notified": [],
            "memory_start": {a: min(i, k) for a, i in doc.state.memory_start.items()},
            "pending": [],
            "extra": extra,
        }
    )
    return doc.model_copy(
        update={
            "session_id": new_id,
            "created_at": now,
            "updated_at": now,
            "model_override": model if model is not None else doc.model_override,
            "state": state,
            "last_seq": last_seq,
            "messages": messages,
            "execution_log": records,
            "drafts": [],
            "events": events,
            "memory": {},
        }
    )


def _next_step(doc: SessionDocument, kept: list[ExecutionRecord], steps: set[Any]) -> str | None:
    """Where the parent's flow went after the kept records."""
    later = doc.execution_log[len(kept) :]
    for record in later:
        if record.step_id in steps:
            return record.step_id
    return doc.state.pointer.current


def _turn_counts(messages: list[Message]) -> dict[str, int]:
    """Agents' replies since the latest human message (chat's turn limit)."""
    counts: Counter[str] = Counter()
    for message in reversed(messages):
        if message.kind == "human":
            break
        if message.kind == "agent":
            counts[message.sender] += 1
    return dict(counts)


def _events_until(
    events: list[dict[str, Any]], last: Message, edit: str | None
) -> tuple[list[dict[str, Any]], int]:
    """The parent's events up to mK's ``messages/message`` (edited along), and its seq."""
    for i, event in enumerate(events):
        if event.get("type") == "message" and event.get("message_id") == last.id:
            cut = [dict(e) for e in events[: i + 1]]
            if edit is not None:
                cut[-1]["content"] = edit
            return cut, int(event.get("seq", 0))
    return [], 0


def _judge_scores(events: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """The judge scores as the runtime keeps them, from the kept ``system/judge`` events."""
    table: dict[str, dict[str, float]] = {}
    for event in events:
        if event.get("type") == "judge" and event.get("scores") and event.get("judge"):
            table.setdefault(str(event["judge"]), {}).update(event["scores"])
    return table
