"""Reading many sessions at once, for a person browsing them (the web view's list).

A page of the session list, newest first, filtered by world, status, batch and a text
searched in the sessions' titles and (every word, through the ``messages_fts`` index of
``sessions list --search``) their messages; the per-session figures (messages,
tokens, cost) are summed for the page's sessions only, so a page costs the same with
10 or 10,000 sessions stored. And the stored events of a session after a ``seq``.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from rolecall.paths import safe_id
from rolecall.session.state import TranscriptMessage
from rolecall.storage import fts
from rolecall.storage.catalog import SessionRow, fts_query, rows_query
from rolecall.storage.rows import CHUNKS, chunk_lines
from rolecall.storage.sqlite import SqliteStore

__all__ = [
    "Hit",
    "SessionSummary",
    "SessionsPage",
    "browse",
    "choices",
    "events_after",
    "events_of_types",
    "fork_links",
    "message_hits",
    "message_of",
    "rows_of",
    "state_of",
    "world_of",
]

STATUSES = ("running", "paused", "finished")


@dataclass(frozen=True)
class SessionSummary:
    id: str
    world_name: str
    title: str
    state: str
    stop_reason: str | None
    created_at: str
    messages: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    pause_reason: str | None = None  # a paused session's


@dataclass(frozen=True)
class SessionsPage:
    rows: list[SessionSummary]
    total: int  # sessions matching the filters, on every page


_CONTENT_LIKE = "json_extract(body, '$.content') LIKE ? ESCAPE '\\'"


def _containing(text: str) -> tuple[str, list[Any]]:
    """The condition on a ``messages`` row that its text contains ``text`` (LIKE: ASCII
    letters in any case), and its parameters. A text that JSON writes as it is (ASCII,
    no quote, backslash or control character) is first looked for in the stored body
    as a whole, which costs a third of reading the message's text out of it."""
    like = _like(text)
    if text.isascii() and not any(c in text for c in '"\\') and text.isprintable():
        return f"(body LIKE ? ESCAPE '\\' AND {_CONTENT_LIKE})", [like, like]
    return _CONTENT_LIKE, [like]


def _like(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


async def browse(
    store: SqliteStore,
    *,
    search: str | None = None,
    world: str | None = None,
    status: str | None = None,
    batch: str | None = None,
    limit: int = 50,
    offset: int = 0,
) -> SessionsPage:
    """One page of stored sessions matching every filter given, newest first."""
    where: list[str] = []
    params: list[Any] = []
    if world:
        where.append("s.world_name = ?")
        params.append(world)
    if status == "running":  # a session not yet started counts as running
        where.append("s.state IN ('running', 'created')")
    elif status:
        where.append("s.state = ?")
        params.append(status)
    if batch:
        where.append("s.id IN (SELECT session_id FROM batch_runs WHERE batch = ?)")
        params.append(batch)
    if search and search.split():
        # the title, every word in the session's messages, or the text inside a message
        await store.prepare_search()
        inside, like = _containing(search.strip())
        where.append(
            f"(s.title LIKE ? ESCAPE '\\' OR s.id IN ({fts.MATCH}) "
            f"OR s.id IN (SELECT session_id FROM messages WHERE {inside}))"
        )
        params += [_like(search), *[fts_query(search)] * 2, *like]
    clause = f"WHERE {' AND '.join(where)}" if where else ""
    columns = (
        "s.id, s.world_name, s.title, s.state, s.stop_reason, s.created_at, "
        "json_extract(s.state_json, '$.pause_reason')"
    )
    order = "ORDER BY s.created_at DESC, s.id DESC"
    if search and search.split():
        # a search reads every message: once, for the ids of every session it finds (the
        # count and the page), not once to count them and again for the page
        found = [
            sid
            for (sid,) in await store.fetch_all(
                f"SELECT s.id FROM sessions s {clause} {order}", *params
            )
        ]
        total, kept = len(found), found[offset : offset + limit]
        marks = ", ".join("?" * len(kept))
        read = await store.fetch_all(
            f"SELECT {columns} FROM sessions s WHERE s.id IN ({marks})", *kept
        )
        by_id = {row[0]: row for row in read}
        rows = [by_id[sid] for sid in kept if sid in by_id]
    else:
        ((total,),) = await store.fetch_all(f"SELECT COUNT(*) FROM sessions s {clause}", *params)
        rows = await store.fetch_all(
            f"SELECT {columns} FROM sessions s {clause} {order} LIMIT ? OFFSET ?",
            *params,
            limit,
            offset,
        )
    figures = await _figures(store, [row[0] for row in rows])
    return SessionsPage(
        rows=[
            SessionSummary(*row[:6], **{**figures.get(row[0], {}), "pause_reason": row[6]})
            for row in rows
        ],
        total=int(total),
    )


async def _figures(store: SqliteStore, ids: list[str]) -> dict[str, dict[str, Any]]:
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    out: dict[str, dict[str, Any]] = {}
    for sid, count, tin, tout, cost, unpriced in await store.fetch_all(
        "SELECT session_id, COUNT(*), "
        "COALESCE(SUM(json_extract(body, '$.input_tokens')), 0), "
        "COALESCE(SUM(json_extract(body, '$.output_tokens')), 0), "
        "SUM(json_extract(body, '$.cost_usd')), "
        "SUM(json_extract(body, '$.kind') = 'agent' AND json_extract(body, '$.cost_usd') IS NULL) "
        f"FROM messages WHERE session_id IN ({marks}) GROUP BY session_id",
        *ids,
    ):
        out[sid] = {
            "messages": int(count),
            "input_tokens": int(tin),
            "output_tokens": int(tout),
            "cost_usd": None if unpriced or cost is None else float(cost),
        }
    return out


async def choices(store: SqliteStore) -> dict[str, list[str]]:
    """The worlds and batches that have stored sessions (the list's filter menus)."""
    worlds = [
        w for (w,) in await store.fetch_all("SELECT DISTINCT world_name FROM sessions ORDER BY 1")
    ]
    try:
        batches = [
            b for (b,) in await store.fetch_all("SELECT name FROM batches ORDER BY created_at")
        ]
    except Exception:  # a store made before batches existed has no such table
        batches = []
    return {"worlds": worlds, "batches": batches}


async def rows_of(store: SqliteStore, ids: list[str]) -> dict[str, SessionRow]:
    """The :class:`~rolecall.storage.catalog.SessionRow` of each of ``ids``, by id: the
    sessions of a page as ``sessions list`` reads them (``GET /api/sessions``)."""
    if not ids:
        return {}
    query, params = rows_query(ids)
    return {str(row[0]): SessionRow(*row) for row in await store.fetch_all(query, *params)}


async def fork_links(store: SqliteStore, ids: list[str]) -> dict[str, tuple[str, str]]:
    """Which of ``ids`` are forks: id -> (parent id, the message forked at), read from
    those sessions' states only (``forks()`` reads every session's)."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    rows = await store.fetch_all(
        "SELECT id, json_extract(state_json, '$.extra.fork.parent'), "
        f"json_extract(state_json, '$.extra.fork.at') FROM sessions WHERE id IN ({marks}) "
        "AND json_extract(state_json, '$.extra.fork.parent') IS NOT NULL",
        *ids,
    )
    return {str(sid): (str(parent), str(at or "")) for sid, parent, at in rows}


async def state_of(store: SqliteStore, session_id: str) -> str | None:
    """The stored state of a session (``created``, ``running``, ``paused``, ``finished``)."""
    found = await store.fetch_all(
        "SELECT state FROM sessions WHERE id = ?", safe_id(session_id, "session id")
    )
    return str(found[0][0]) if found else None


async def world_of(store: SqliteStore, session_id: str) -> dict[str, Any] | None:
    """The world document a session runs (None when there is no such session)."""
    found = await store.fetch_all(
        "SELECT world_json FROM session_worlds WHERE session_id = ?",
        safe_id(session_id, "session id"),
    )
    return dict(json.loads(found[0][0])) if found else None


async def message_of(
    store: SqliteStore, session_id: str, message_id: str
) -> TranscriptMessage | None:
    """One stored message of a session, by its id (``m7``), without loading the others."""
    found = await store.fetch_all(
        "SELECT body FROM messages WHERE session_id = ? AND id = ?",
        safe_id(session_id, "session id"),
        message_id,
    )
    return TranscriptMessage.model_validate_json(found[0][0]) if found else None


async def events_after(
    store: SqliteStore, session_id: str, after: int = 0, *, streamed: bool = True
) -> list[tuple[int, str]]:
    """The stored events of a session with ``seq > after``: (seq, JSON line), in order.

    ``streamed=False`` leaves the ``sse`` events out (following a session through the
    store shows it message by message).
    """
    sid = safe_id(session_id, "session id")
    topic = "" if streamed else "AND topic != 'sse' "
    out: list[tuple[int, str]] = []
    for seq, kind, record, count in await store.fetch_all(
        "SELECT seq, type, record, count FROM events_packed WHERE session_id = ? "
        f"AND seq + count - 1 > ? {topic}ORDER BY seq",
        sid,
        after,
    ):
        if count == 1:
            if seq > after:
                out.append((int(seq), record))
            continue
        if kind == CHUNKS:
            out.extend(line for line in chunk_lines(sid, int(seq), record) if line[0] > after)
            continue
        for i, item in enumerate(json.loads(record)):
            if seq + i > after:
                # as `--json` and a live session's events print it: non-ASCII as is
                line = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
                out.append((int(seq) + i, line))
    return out


async def events_of_types(
    store: SqliteStore, session_id: str, types: Collection[str]
) -> list[dict[str, Any]]:
    """A session's stored events (not ``sse``) of the given types, in order: only the
    rows that may hold them are read (a single event of one of the types, or a packed
    run of events whose text names one)."""
    sid = safe_id(session_id, "session id")
    kinds = sorted(types)
    marks = ", ".join("?" * len(kinds))
    names = " OR ".join("instr(record, ?) > 0" for _ in kinds)
    rows = await store.fetch_all(
        "SELECT record, count FROM events_packed WHERE session_id = ? AND topic != 'sse' "
        f"AND (type IN ({marks}) OR (count > 1 AND ({names}))) ORDER BY seq",
        sid,
        *kinds,
        *(f'"{kind}"' for kind in kinds),
    )
    out: list[dict[str, Any]] = []
    for record, count in rows:
        if count == 1:
            out.append(json.loads(record))
        else:
            out += [r for r in json.loads(record) if r.get("type") in types]
    return out


@dataclass(frozen=True)
class Hit:
    """A stored message containing a searched text (the sessions list's search)."""

    session_id: str
    title: str
    message_id: str
    sender: str
    index: int  # its place in the session (0 for m1's): which page of the thread shows it
    content: str


async def message_hits(store: SqliteStore, text: str, *, limit: int = 20) -> list[Hit]:
    """The messages containing ``text`` (a substring, ASCII letters in any case), newest
    sessions first and in order within each, at most ``limit`` of them."""
    if not text.strip():
        return []
    inside, like = _containing(text.strip())
    rows = await store.fetch_all(
        "SELECT m.session_id, s.title, m.id, m.sender, m.idx, json_extract(m.body, '$.content') "
        f"FROM messages m JOIN sessions s ON s.id = m.session_id WHERE {inside} "
        "ORDER BY s.created_at DESC, s.id DESC, m.idx LIMIT ?",
        *like,
        limit,
    )
    return [Hit(str(a), str(b), str(c), str(d), int(e), str(f or "")) for a, b, c, d, e, f in rows]


@dataclass(frozen=True)
class Preview:
    """What a session is about, for the list: its topic and its latest message."""

    topic: str
    sender: str  # of the latest message ('' when there is none)
    latest: str


async def previews(store: SqliteStore, ids: list[str]) -> dict[str, Preview]:
    """The topic and latest message of each of ``ids`` (one query each, any page size)."""
    if not ids:
        return {}
    marks = ", ".join("?" * len(ids))
    topics = {
        sid: str(topic or "")
        for sid, topic in await store.fetch_all(
            "SELECT session_id, json_extract(world_json, '$.topic') FROM session_worlds "
            f"WHERE session_id IN ({marks})",
            *ids,
        )
    }
    latest = {
        sid: (str(sender), str(content or ""))
        for sid, sender, content in await store.fetch_all(
            "SELECT m.session_id, m.sender, json_extract(m.body, '$.content') FROM messages m "
            f"WHERE m.session_id IN ({marks}) AND m.idx = "
            "(SELECT MAX(idx) FROM messages WHERE session_id = m.session_id)",
            *ids,
        )
    }
    return {sid: Preview(topics.get(sid, ""), *latest.get(sid, ("", ""))) for sid in ids}
