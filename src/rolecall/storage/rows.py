"""Rows of the store's tables, built from a session's events, messages and records (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rolecall.bus import Envelope
from rolecall.session.state import ExecutionRecord


@dataclass(frozen=True)
class Batch:
    """The rows of one turn's transaction, ready for the writer."""

    events: list[tuple[Any, ...]]
    messages: list[tuple[Any, ...]]
    records: list[tuple[Any, ...]]
    drafts: list[tuple[Any, ...]]
    session: tuple[Any, ...]

    @property
    def size(self) -> int:
        """Bytes of the largest column of each row (what makes the WAL grow)."""
        return (
            sum(len(r[4]) for r in self.events)
            + sum(len(r[4]) for r in self.messages)
            + sum(len(r[2]) for r in self.drafts)
            + len(self.session[2])
        )


def event_rows(sid: str, events: list[Envelope]) -> list[tuple[Any, ...]]:
    """Rows of ``events_packed``: each run of consecutive events of one kind (streamed,
    ``sse``, or not) becomes one row. A row of one event keeps its topic and type; a
    packed row (a JSON array) says ``sse`` or ``*`` and ``*``: its elements say."""
    rows: list[tuple[Any, ...]] = []
    end = len(events)
    i = 0
    while i < end:
        first = events[i]
        sse = first.event.topic == "sse"
        j = i + 1
        while (
            j < end
            and events[j].seq == first.seq + j - i
            and (events[j].event.topic == "sse") == sse
        ):
            j += 1
        if j == i + 1:
            rows.append((sid, first.seq, first.event.topic, first.event.type, first.to_json(), 1))
        else:
            record = "[" + ",".join([e.to_json() for e in events[i:j]]) + "]"
            rows.append((sid, first.seq, "sse" if sse else "*", "*", record, j - i))
        i = j
    return rows


def record_row(sid: str, r: ExecutionRecord) -> tuple[Any, ...]:
    return (
        sid,
        r.execution_order,
        r.step_id,
        r.speaker,
        r.message_id,
        r.loop_iteration,
        r.result,
        r.started_at.isoformat(),
        r.ended_at.isoformat(),
        r.input_tokens,
        r.output_tokens,
    )


def record_from_row(row: tuple[Any, ...]) -> ExecutionRecord:
    return ExecutionRecord(
        execution_order=row[1],
        step_id=row[2],
        speaker=row[3],
        message_id=row[4],
        loop_iteration=row[5],
        result=row[6],
        started_at=datetime.fromisoformat(row[7]),
        ended_at=datetime.fromisoformat(row[8]),
        input_tokens=row[9],
        output_tokens=row[10],
    )
