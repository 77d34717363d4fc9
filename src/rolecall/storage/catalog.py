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

from rolecall.storage import fts

STATES = ("created", "running", "paused", "finished")


@dataclass(frozen=True)
class SessionRow:
    """One stored session as listed: counts, state and a preview of what it is about.

    ``preview`` is the first human message, else the world's topic; ``pause_reason``
    is set for a paused session.
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


@dataclass(frozen=True)
class SessionFilter:
    """What ``sessions list`` keeps: every field is optional (``None``: no filter).

    ``world`` matches the world's name, ``status`` a state (``STATES``), ``search`` the
    words of any message (all of them, in any order, case-insensitive), ``limit`` keeps
    the most recently updated sessions. Sessions without a message are left out unless
    ``with_empty``.
    """

    world: str | None = None
    status: str | None = None
    search: str | None = None
    limit: int | None = None
    with_empty: bool = False


_COUNT = "(SELECT COUNT(*) FROM messages m WHERE m.session_id = s.id)"
_FIRST_HUMAN = (
    "(SELECT json_extract(m.body, '$.content') FROM messages m "
    "WHERE m.session_id = s.id AND m.sender = 'human' ORDER BY m.idx LIMIT 1)"
)
_TOPIC = (
    "(SELECT json_extract(w.world_json, '$.topic') FROM session_worlds w WHERE w.session_id = s.id)"
)
_COLUMNS = (
    f"s.id, s.world_name, s.title, s.state, s.stop_reason, {_COUNT}, s.created_at, "
    f"s.updated_at, COALESCE({_FIRST_HUMAN}, {_TOPIC}, ''), "
    "json_extract(s.state_json, '$.pause_reason')"
)


def fts_query(text: str) -> str:
    """``text`` as an FTS5 query of quoted words (all must appear): no syntax leaks in."""
    return " ".join('"' + word.replace('"', '""') + '"' for word in text.split())


def list_query(f: SessionFilter) -> tuple[str, list[Any]]:
    """The SQL and parameters of a listing, oldest first (``limit``: the newest ones)."""
    where: list[str] = []
    params: list[Any] = []
    if f.world is not None:
        where.append("s.world_name = ?")
        params.append(f.world)
    if f.status is not None:
        where.append("s.state = ?")
        params.append(f.status)
    if f.search is not None and f.search.split():
        where.append(f"s.id IN ({fts.MATCH})")  # the store prepared it (fts.prepare)
        params += [fts_query(f.search)] * 2
    if not f.with_empty:
        where.append("EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)")
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    query = f"SELECT {_COLUMNS} FROM sessions s{clause} ORDER BY s.updated_at DESC, s.id DESC"
    if f.limit is not None:
        query += " LIMIT ?"
        params.append(f.limit)
    return f"SELECT * FROM ({query}) ORDER BY 7, 1", params


def prefix_query(text: str) -> tuple[str, list[Any]]:
    """The ids starting with ``text`` (``last``: the most recently updated, non-empty)."""
    if text == "last":
        return (
            "SELECT s.id FROM sessions s WHERE EXISTS "
            "(SELECT 1 FROM messages m WHERE m.session_id = s.id) "
            "ORDER BY s.updated_at DESC, s.id DESC LIMIT 1",
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
    query, params = list_query(SessionFilter(limit=limit))
    uri = f"{path.absolute().as_uri()}?mode=ro"
    try:
        with closing(sqlite3.connect(uri, uri=True, timeout=0.2)) as db:
            rows = db.execute(query, params).fetchall()
    except sqlite3.Error:
        return []
    return [(str(r[0]), str(r[8] or r[2])) for r in reversed(rows)]
