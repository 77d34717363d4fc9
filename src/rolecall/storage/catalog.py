"""Finding stored sessions again: filtered listing, full-text search, ids by prefix.

Pure query building plus the reads themselves, on the store's connection (the
:class:`~rolecall.storage.sqlite.SqliteStore` methods ``list_sessions`` and
``resolve_id`` delegate here). Text search uses the ``messages_fts`` FTS5 table
(schema version 3), filled by a trigger as messages are written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from rolecall.storage import fts

STATES = ("created", "running", "paused", "finished")


@dataclass(frozen=True)
class SessionRow:
    """One stored session as listed: counts, state and a preview of what it is about.

    ``preview`` is the first human message, else the world's topic; ``pause_reason``
    is set for a paused session. ``input_tokens`` and ``output_tokens`` are the sums
    over its messages (the figures of ``sessions show``); ``cost_usd`` the summed cost
    of its agent messages, None when it has no message or one of them has no known
    cost; ``batch`` the name of the batch that ran it, if one did.
    """

    id: str
    world_name: str
    title: str
    state: str
    stop_reason: str | None
    messages: int
    created_at: str
    updated_at: str
    preview: str = ""
    pause_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    batch: str | None = None


class SessionSummary(BaseModel):
    """One session in a list, the one JSON shape of every list: ``sessions list
    --json`` prints these, and ``GET /api/sessions`` gives the same objects.

    ``status`` is the state (``created``, ``running``, ``paused``, ``finished``),
    ``pause_reason`` set when paused, ``stop_reason`` when finished; ``started`` and
    ``updated`` are ISO 8601 as stored; ``cost_usd`` is None when unknown.
    """

    model_config = ConfigDict(frozen=True)

    session_id: str
    world: str
    title: str
    status: str
    stop_reason: str | None
    pause_reason: str | None
    messages: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    started: str
    updated: str
    preview: str
    batch: str | None

    @classmethod
    def of(cls, row: SessionRow) -> SessionSummary:
        return cls(
            session_id=row.id,
            world=row.world_name,
            title=row.title,
            status=row.state,
            stop_reason=row.stop_reason,
            pause_reason=row.pause_reason,
            messages=row.messages,
            input_tokens=row.input_tokens,
            output_tokens=row.output_tokens,
            cost_usd=row.cost_usd,
            started=row.created_at,
            updated=row.updated_at,
            preview=row.preview,
            batch=row.batch,
        )


@dataclass(frozen=True)
class SessionFilter:
    """What ``sessions list`` keeps: every field is optional (``None``: no filter).

    ``world`` matches the world's name, ``status`` a state (``STATES``), ``search`` the
    words of any message (all of them, in any order, case-insensitive), ``batch`` the
    name of the batch that ran the session, ``limit`` keeps the most recently updated
    sessions. Sessions without a message are left out unless ``with_empty``.
    """

    world: str | None = None
    status: str | None = None
    search: str | None = None
    batch: str | None = None
    limit: int | None = None
    with_empty: bool = False


# newest first: by last update, then by start, then by id (ids never tie)
_NEWEST = "ORDER BY s.updated_at DESC, s.created_at DESC, s.id DESC"
_FIRST_HUMAN = (
    "(SELECT json_extract(h.body, '$.content') FROM messages h "
    "WHERE h.session_id = s.id AND h.sender = 'human' ORDER BY h.idx LIMIT 1)"
)
_TOPIC = (
    "(SELECT json_extract(w.world_json, '$.topic') FROM session_worlds w WHERE w.session_id = s.id)"
)
_PREVIEW = f"COALESCE({_FIRST_HUMAN}, {_TOPIC}, '')"
_AGENT = "json_extract(body, '$.kind') = 'agent'"
_COST = "json_extract(body, '$.cost_usd')"
# each listed session's figures, summed in one pass over its messages (clustered by
# session, so no sort): count, tokens, and the cost of its agent messages (NULL when one
# of them has no known cost)
_FIGURES = (
    "SELECT session_id, COUNT(*) AS n, SUM(json_extract(body, '$.input_tokens')) AS tin, "
    "SUM(json_extract(body, '$.output_tokens')) AS tout, "
    f"CASE WHEN SUM({_AGENT} AND {_COST} IS NULL) THEN NULL "
    f"ELSE TOTAL(CASE WHEN {_AGENT} THEN {_COST} END) END AS cost "
    "FROM messages WHERE session_id IN (SELECT id FROM page) GROUP BY session_id"
)
# the columns of a SessionRow, in its order, over the listed sessions ``s`` and ``f``
_COLUMNS = (
    "s.id, s.world_name, s.title, s.state, s.stop_reason, COALESCE(f.n, 0), s.created_at, "
    f"s.updated_at, {_PREVIEW}, s.pause_reason, COALESCE(f.tin, 0), COALESCE(f.tout, 0), "
    "f.cost, (SELECT b.batch FROM batch_runs b WHERE b.session_id = s.id LIMIT 1)"
)


def fts_query(text: str) -> str:
    """``text`` as an FTS5 query of quoted words (all must appear): no syntax leaks in."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in text.split())


def _page(f: SessionFilter, columns: str) -> tuple[str, list[Any]]:
    """The sessions ``f`` keeps, newest first (``limit``: the newest ones), as ``columns``
    of the table ``sessions s``."""
    where: list[str] = []
    params: list[Any] = []
    if f.world is not None:
        where.append("s.world_name = ?")
        params.append(f.world)
    if f.status is not None:
        where.append("s.state = ?")
        params.append(f.status)
    if f.batch is not None:
        where.append("s.id IN (SELECT session_id FROM batch_runs WHERE batch = ?)")
        params.append(f.batch)
    if f.search is not None and f.search.split():
        where.append(f"s.id IN ({fts.MATCH})")  # the store prepared it (fts.prepare)
        params += [fts_query(f.search)] * 2
    if not f.with_empty:
        where.append("EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    query = f"SELECT {columns} FROM sessions s{clause} {_NEWEST}"
    if f.limit is not None:
        query += " LIMIT ?"
        params.append(f.limit)
    return query, params


def list_query(f: SessionFilter) -> tuple[str, list[Any]]:
    """The SQL and parameters of a listing: one :class:`SessionRow` a row, newest first.

    One query: the sessions kept (and limited) first, then the figures of those only
    (their messages' count, tokens and cost), each one's preview and batch.
    """
    page, params = _page(
        f,
        "s.id, s.world_name, s.title, s.state, s.stop_reason, s.created_at, s.updated_at, "
        "json_extract(s.state_json, '$.pause_reason') AS pause_reason",
    )
    query = (
        f"WITH page AS ({page}) SELECT {_COLUMNS} FROM page s "
        f"LEFT JOIN ({_FIGURES}) f ON f.session_id = s.id {_NEWEST}"
    )
    return query, params


def rows_query(ids: list[str]) -> tuple[str, list[Any]]:
    """The :class:`SessionRow` of each of ``ids`` (in no particular order): the rows of a
    page another query picked (the web view's list), as ``sessions list`` gives them."""
    marks = ", ".join("?" * len(ids))
    page = (
        "SELECT s.id, s.world_name, s.title, s.state, s.stop_reason, s.created_at, "
        "s.updated_at, json_extract(s.state_json, '$.pause_reason') AS pause_reason "
        f"FROM sessions s WHERE s.id IN ({marks})"
    )
    query = (
        f"WITH page AS ({page}) SELECT {_COLUMNS} FROM page s "
        f"LEFT JOIN ({_FIGURES}) f ON f.session_id = s.id"
    )
    return query, list(ids)


def prefix_query(text: str) -> tuple[str, list[Any]]:
    """The ids starting with ``text`` (``last``: the most recently updated session with a
    message, the first one ``sessions list`` shows)."""
    if text == "last":
        return (
            "SELECT s.id FROM sessions s WHERE EXISTS "
            f"(SELECT 1 FROM messages m WHERE m.session_id = s.id) {_NEWEST} LIMIT 1",
            [],
        )
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return (
        "SELECT id FROM sessions WHERE id LIKE ? ESCAPE '\\' ORDER BY created_at, id LIMIT 11",
        [escaped + "%"],
    )


def recent_ids(path: Path, limit: int = 50) -> list[tuple[str, str]]:
    """``(id, preview)`` of the ``limit`` most recently updated non-empty sessions in the
    database at ``path``, newest first; ``[]`` when there is none or it cannot be read.

    A short synchronous read-only query (the REPL's completion menu calls it).
    """
    import sqlite3
    from contextlib import closing

    if not path.is_file():
        return []
    query, params = _page(SessionFilter(limit=limit), f"s.id, {_PREVIEW}, s.title")
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=0.2)) as db:
            rows = db.execute(query, params).fetchall()
    except sqlite3.Error:
        return []
    return [(str(r[0]), str(r[1] or r[2])) for r in rows]
