"""Forking inside the SQLite store (sessions.md, Forking): rows copied, not reloaded.

The fork is computed by :func:`rolecall.storage.fork.plan_fork` from the little it needs
(the parent's state, m1..mK's ids, senders and kinds, mK itself, the execution log's
step ids, mK's message event and the judge events before it); the new session's rows
are then copied from the parent's in one transaction, one ``INSERT … SELECT`` per
table: messages before mK, the kept execution records, every event row before the one
holding mK's message event (the streamed ``sse`` rows left out, as a session document
leaves them). Only mK (edited or not), that one event row (cut right after mK's event)
and the session row are written from Python.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import aiosqlite

from rolecall.errors import UsageError
from rolecall.paths import safe_id
from rolecall.session.state import TranscriptMessage
from rolecall.storage.document import SessionDocument
from rolecall.storage.fork import (
    ForkPlan,
    ForkSource,
    MessageHead,
    RecordHead,
    message_number,
    plan_fork,
)

# mK's message event: a row of its own, or an element of a packed row of other events
_MESSAGE_EVENT = (
    "SELECT seq, topic, type, record, count FROM events_packed "
    "WHERE session_id = ? AND topic != 'sse' AND ("
    "(count = 1 AND type = 'message' AND json_extract(record, '$.message_id') = ?) OR "
    "(count > 1 AND EXISTS (SELECT 1 FROM json_each(record) AS j WHERE "
    "json_extract(j.value, '$.type') = 'message' AND "
    "json_extract(j.value, '$.message_id') = ?))) ORDER BY seq LIMIT 1"
)
# the judge events before seq ?, in order
_JUDGE_EVENTS = (
    "SELECT seq, record FROM events_packed WHERE session_id = ? AND count = 1 "
    "AND type = 'judge' AND seq < ? "
    "UNION ALL SELECT p.seq + j.key, j.value FROM events_packed AS p, json_each(p.record) AS j "
    "WHERE p.session_id = ? AND p.count > 1 AND p.topic != 'sse' AND p.seq < ? "
    "AND json_extract(j.value, '$.type') = 'judge' ORDER BY 1"
)


async def read_source(
    db: aiosqlite.Connection, sid: str, at: str
) -> tuple[ForkSource, tuple[Any, ...] | None]:
    """What the fork of ``sid`` at ``at`` is computed from, and the event row holding
    mK's message event (seq, topic, type, record, count), None when there is none."""
    found = list(
        await db.execute_fetchall(
            "SELECT w.world_json, s.world_source, s.model_override, s.state_json, "
            "s.created_at, s.updated_at, "
            "(SELECT COUNT(*) FROM messages AS m WHERE m.session_id = s.id) "
            "FROM sessions AS s JOIN session_worlds AS w ON w.session_id = s.id WHERE s.id = ?",
            (sid,),
        )
    )
    if not found:
        raise UsageError(f"no session '{sid}' in the store")
    world_json, source, override, state_text, created, updated, total = found[0]
    k = message_number(at, sid, int(total))
    heads = [
        MessageHead(str(i), str(s), str(kind))
        for i, s, kind in await db.execute_fetchall(
            "SELECT id, sender, json_extract(body, '$.kind') FROM messages "
            "WHERE session_id = ? AND idx < ? ORDER BY idx",
            (sid, k),
        )
    ]
    ((body,),) = await db.execute_fetchall(
        "SELECT body FROM messages WHERE session_id = ? AND idx = ?", (sid, k - 1)
    )
    last = TranscriptMessage.model_validate_json(body)
    records = [
        RecordHead(*row)
        for row in await db.execute_fetchall(
            "SELECT execution_order, step_id, message_id, loop_iteration, started_at "
            "FROM execution_log WHERE session_id = ? ORDER BY execution_order",
            (sid,),
        )
    ]
    rows = list(await db.execute_fetchall(_MESSAGE_EVENT, (sid, last.id, last.id)))
    row = tuple(rows[0]) if rows else None
    event: dict[str, Any] | None = None
    judges: list[dict[str, Any]] = []
    if row is not None:
        event = _event_in(row, last.id)
        cut = int(event.get("seq", 0))
        judges = [
            json.loads(r) for _, r in await db.execute_fetchall(_JUDGE_EVENTS, (sid, cut, sid, cut))
        ]
    header = SessionDocument.model_validate(
        {
            "session_id": sid,
            "created_at": created,
            "updated_at": updated,
            "world": json.loads(world_json),
            "world_source": source,
            "model_override": override,
            "state": json.loads(state_text),
        }
    )
    return ForkSource(header, heads, last, records, event, judges), row


def _event_in(row: tuple[Any, ...], message_id: str) -> dict[str, Any]:
    """mK's message event out of its row."""
    record, count = row[3], row[4]
    if count == 1:
        return dict(json.loads(record))
    return next(
        e
        for e in json.loads(record)
        if e.get("type") == "message" and e.get("message_id") == message_id
    )


async def plan(
    db: aiosqlite.Connection,
    sid: str,
    at: str,
    *,
    new_id: str,
    now: datetime,
    edit: str | None,
    model: str | None,
) -> tuple[ForkPlan, tuple[Any, ...] | None]:
    source, row = await read_source(db, sid, at)
    return plan_fork(source, at, new_id=new_id, now=now, edit=edit, model=model), row


async def copy_rows(
    db: aiosqlite.Connection, sid: str, fork: ForkPlan, row: tuple[Any, ...] | None
) -> None:
    """Write the fork's rows (inside the caller's transaction)."""
    nid = safe_id(fork.new_id, "session id")
    state = fork.state
    now = fork.now.isoformat()
    await db.execute(
        "INSERT INTO sessions (id, world_name, title, world_json, world_source, model_override, "
        "state, stop_reason, state_json, last_seq, created_at, updated_at) "
        "SELECT ?, world_name, title, '', world_source, ?, ?, ?, ?, ?, ?, ? "
        "FROM sessions WHERE id = ?",
        (nid, fork.model_override, state.state, state.stop_reason, state.model_dump_json(),
         fork.last_seq, now, now, sid),
    )  # fmt: skip
    await db.execute(
        "INSERT INTO session_worlds (session_id, world_json) "
        "SELECT ?, world_json FROM session_worlds WHERE session_id = ?",
        (nid, sid),
    )
    copied = fork.k if not fork.edited else fork.k - 1
    await db.execute(
        "INSERT INTO messages (session_id, idx, id, sender, body) "
        "SELECT ?, idx, id, sender, body FROM messages WHERE session_id = ? AND idx < ?",
        (nid, sid, copied),
    )
    if fork.edited:
        last = fork.last
        await db.execute(
            "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
            (nid, fork.k - 1, last.id, last.sender, last.model_dump_json()),
        )
    await db.execute(
        "INSERT INTO execution_log SELECT ?, execution_order, step_id, speaker, message_id, "
        "loop_iteration, result, started_at, ended_at, input_tokens, output_tokens "
        "FROM execution_log WHERE session_id = ? AND execution_order IN "
        "(SELECT value FROM json_each(?))",
        (nid, sid, json.dumps([r.execution_order for r in fork.records])),
    )
    if row is None or fork.message_event is None:
        return  # no event of mK stored: the fork starts without events, as a file would
    await db.execute(
        "INSERT INTO events_packed (session_id, seq, topic, type, record, count) "
        "SELECT ?, seq, topic, type, record, count FROM events_packed "
        "WHERE session_id = ? AND seq < ? AND topic != 'sse' ORDER BY seq",
        (nid, sid, row[0]),
    )
    await db.execute(
        "INSERT INTO events_packed VALUES (?, ?, ?, ?, ?, ?)", _cut_row(nid, fork, row)
    )


def _cut_row(nid: str, fork: ForkPlan, row: tuple[Any, ...]) -> tuple[Any, ...]:
    """The row holding mK's message event, cut right after it (and edited along)."""
    seq, topic, kind, record, count = row
    event = fork.message_event or {}
    text = json.dumps(event, ensure_ascii=False)
    if count == 1:
        return (nid, seq, topic, kind, text if fork.edited else record, 1)
    kept = json.loads(record)[: fork.last_seq - seq + 1]
    kept[-1] = event
    if len(kept) == 1:
        return (nid, seq, str(event.get("topic")), str(event.get("type")), text, 1)
    return (nid, seq, "*", "*", json.dumps(kept, ensure_ascii=False), len(kept))
