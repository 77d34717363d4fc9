"""The full-text index of the messages (``messages_fts``), kept out of the turns.

Indexing a message costs more than storing it (FTS5 updates several B-trees), so a
turn's transaction does not do it (schema 6 dropped the insert trigger). The index is
brought up to date in batches instead: :func:`catch_up` indexes every message past each
session's ``fts_progress.indexed`` mark, in one transaction, before a search (every
session's) and when a writable store is closed (the sessions it wrote: another
process sharing the database indexes its own when it closes, and waits meanwhile for
the transaction's lock, so indexing its messages too made it wait twice as long). A
store opened read-only cannot write the index: it indexes the missing messages into a
temporary FTS5 table of its own connection (``temp.pending_fts``), so a search still
sees every message. :data:`MATCH` is the sub-query a search uses; it reads both tables.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

import aiosqlite

__all__ = ["MATCH", "catch_up", "prepare"]

# the session ids whose messages match an FTS5 query (given twice, one per table)
MATCH: Final = (
    "SELECT session_id FROM messages_fts WHERE messages_fts MATCH ? "
    "UNION SELECT session_id FROM temp.pending_fts WHERE pending_fts MATCH ?"
)
_LISTED: Final = 500  # at most this many session ids in a catch-up's query
_PENDING: Final = (
    "SELECT json_extract(m.body, '$.content'), m.sender, m.session_id "
    "FROM sessions s JOIN messages m ON m.session_id = s.id "
    "WHERE m.idx >= COALESCE((SELECT indexed FROM fts_progress p WHERE p.session_id = s.id), 0)"
)
_PROGRESS: Final = (
    "INSERT INTO fts_progress (session_id, indexed) "
    "SELECT s.id, (SELECT MAX(idx) + 1 FROM messages m WHERE m.session_id = s.id) AS top "
    "FROM sessions s "
    "WHERE top > COALESCE((SELECT indexed FROM fts_progress p WHERE p.session_id = s.id), 0)"
)
_PROGRESS_UPSERT: Final = " ON CONFLICT (session_id) DO UPDATE SET indexed = excluded.indexed"


async def catch_up(
    db: aiosqlite.Connection,
    *,
    clear_pending: bool = False,
    sessions: Collection[str] | None = None,
) -> None:
    """Index every message not yet indexed, and move the marks (one write transaction):
    of every session, or of ``sessions`` only (every session's when they are more than
    :data:`_LISTED`, the query's parameters)."""
    only, params = "", tuple[str, ...]()
    if sessions is not None and len(sessions) <= _LISTED:
        params = tuple(sessions)
        only = f" AND s.id IN ({', '.join('?' * len(params))})"
    await db.execute("BEGIN IMMEDIATE")
    try:
        if clear_pending:
            await db.execute("DELETE FROM temp.pending_fts")
        await db.execute(
            f"INSERT INTO messages_fts (content, sender, session_id) {_PENDING}{only}", params
        )
        await db.execute(_PROGRESS + only + _PROGRESS_UPSERT, params)
        await db.execute("COMMIT")
    except BaseException:
        await db.execute("ROLLBACK")
        raise


async def prepare(db: aiosqlite.Connection, *, writable: bool) -> None:
    """Make :data:`MATCH` see every message: catch up (writable) or index the missing
    messages into this connection's temporary table (read-only)."""
    await db.execute(
        "CREATE VIRTUAL TABLE IF NOT EXISTS temp.pending_fts USING fts5("
        "content, sender UNINDEXED, session_id UNINDEXED, tokenize = 'unicode61')"
    )
    if writable:
        await catch_up(db, clear_pending=True)
        return
    await db.execute("DELETE FROM temp.pending_fts")
    await db.execute(f"INSERT INTO temp.pending_fts (content, sender, session_id) {_PENDING}")
    await db.commit()
