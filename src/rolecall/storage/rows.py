"""Rows of the store's tables, built from a session's events, messages and records (pure)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from json.encoder import encode_basestring
from typing import Any

from rolecall.bus import Envelope
from rolecall.bus.events import chunk_line, iso
from rolecall.session.state import ExecutionRecord
from rolecall.storage.port import ChunkRun, Stamped


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


# the type of a row holding a generation's chunks (two or more: a row of count 1 is read
# as one event), compactly: a 13-word reply's chunks take about 0.5 KB so, against 2.3
# KB as event lines, and with no JSON sink attached no chunk becomes an event line
CHUNKS = "chunks"

# one event ready for a row: (seq, streamed, topic, type, JSON line)
_Unit = tuple[int, bool, str, str, str]


def event_rows(sid: str, events: Sequence[Stamped]) -> list[tuple[Any, ...]]:
    """Rows of ``events_packed``: each run of consecutive events of one kind (streamed,
    ``sse``, or not) becomes one row, so a turn writes a few rows. A row of one
    event keeps its topic and type; a longer one is a JSON array of records saying
    ``sse`` or ``*`` and ``*`` (its elements say). A generation's chunks, when there are
    two or more (a :class:`ChunkRun`), are one ``chunks`` row between its ``sse/start``
    and ``sse/end``: ``{"message_id", "sender", "chunks": [[ts, delta, output_tokens],
    ...]}``, about the size of its text (the ``events`` view still gives one full record
    per chunk)."""
    rows: list[tuple[Any, ...]] = []
    units: list[_Unit] = []
    for item in events:
        if isinstance(item, Envelope):
            event = item.event
            units.append((item.seq, event.topic == "sse", event.topic, event.type, item.to_json()))
        else:
            rows.extend(_packed(sid, units))
            units = []
            rows.append(
                (sid, item.first_seq, "sse", CHUNKS, _chunks_record(item), len(item.deltas))
            )
    rows.extend(_packed(sid, units))
    return rows


def _packed(sid: str, units: list[_Unit]) -> list[tuple[Any, ...]]:
    rows: list[tuple[Any, ...]] = []
    i = 0
    while i < len(units):
        seq, sse, topic, kind, line = units[i]
        j = i + 1
        while j < len(units) and units[j][0] == seq + j - i and units[j][1] == sse:
            j += 1
        if j == i + 1:
            rows.append((sid, seq, topic, kind, line, 1))
        else:
            record = "[" + ",".join([u[4] for u in units[i:j]]) + "]"
            rows.append((sid, seq, "sse" if sse else "*", "*", record, j - i))
        i = j
    return rows


def _chunks_record(run: ChunkRun) -> str:
    """The run as ``json.dumps(..., ensure_ascii=False, separators=(",", ":"))`` writes
    it, byte for byte, written here: 2.5 times faster than the encoder, and the chunks of
    one burst share their time's text."""
    parts: list[str] = []
    last: datetime | None = None
    head = ""
    for ts, delta, tokens in zip(run.stamps, run.deltas, run.tokens, strict=True):
        if ts is not last:
            last, head = ts, f'["{iso(ts)}",'
        parts.append(f"{head}{encode_basestring(delta)},{tokens}]")
    return (
        f'{{"message_id":{encode_basestring(run.message_id)},'
        f'"sender":{encode_basestring(run.sender)},"chunks":[{",".join(parts)}]}}'
    )


def chunk_lines(sid: str, seq: int, record: str) -> list[tuple[int, str]]:
    """The events of a ``chunks`` row as (seq, JSON line), as ``--json`` prints them."""
    body = json.loads(record)
    mid, sender = body["message_id"], body["sender"]
    session_json = encode_basestring(sid)
    return [
        (seq + i, chunk_line(session_json, seq + i, ts, mid, sender, delta, tokens))
        for i, (ts, delta, tokens) in enumerate(body["chunks"])
    ]


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
