"""The connection that commits turns, and the functions that run a turn's transaction.

A turn's transaction appends a few pages to the WAL with no fsync (``synchronous=NORMAL``),
so it runs inline on the event loop (:func:`try_inline`); the connection never waits
for a lock (``busy_timeout`` 0) and never checkpoints, so nothing on the loop can block.
When another process holds the write lock, the store runs the same transaction again on
a worker thread with :func:`run_waiting`.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from rolecall.storage.rows import Batch

T = TypeVar("T")

BUSY_TIMEOUT_S = 5.0  # how long a turn waits for another process's write lock
# how long the store first tries again inline, between the event loop's other work,
# before a worker thread waits for the lock (another process commits in about 0.1 ms)
SPIN_S = 0.002
# between two of those tries the event loop's thread sleeps this long (blocking it: the
# loop's own sleeps last a millisecond at least), so that with more processes than CPUs
# the one holding the lock gets a CPU to finish on
SPIN_PAUSE_S = 0.00005
# between two tries of the worker thread that waits for the lock after that
POLL_S = 0.0005


def open_writer(path: Path) -> sqlite3.Connection:
    """The connection that commits turns: never waits for a lock, never checkpoints.

    ``check_same_thread=False``: it runs on the event loop and, when a lock is held
    elsewhere, on one worker thread at a time (under the store's lock, never both).
    """
    conn = sqlite3.connect(path, timeout=0, check_same_thread=False)
    try:
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")
        conn.execute("PRAGMA foreign_keys=ON")
    except BaseException:
        conn.close()
        raise
    return conn


def is_busy(exc: sqlite3.Error) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    return code is not None and code & 0xFF == sqlite3.SQLITE_BUSY


def try_inline(
    fn: Callable[[sqlite3.Connection, T], None], conn: sqlite3.Connection, batch: T
) -> bool:
    """``fn(conn, batch)`` now; False (rolled back) if another connection holds the lock."""
    try:
        fn(conn, batch)
    except sqlite3.OperationalError as exc:
        if is_busy(exc):
            return False
        raise
    return True


def run_waiting(
    fn: Callable[[sqlite3.Connection, T], None], conn: sqlite3.Connection, batch: T
) -> None:
    """``fn(conn, batch)`` on a worker thread, tried again every ``POLL_S`` while another
    connection holds the write lock, for up to ``BUSY_TIMEOUT_S``.

    Not SQLite's busy handler, which sleeps 1, 2, 5, 10, 15, 20 ms... between its tries:
    a turn that found the lock held for 3 ms (another process copying the WAL's tail)
    waited 8; two processes of 3,000 turns on one database each lost 40-130 ms so.
    """
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            fn(conn, batch)
        except sqlite3.OperationalError as exc:
            if not is_busy(exc) or time.monotonic() >= deadline:
                raise
        else:
            return
        time.sleep(POLL_S)


def write_batch(conn: sqlite3.Connection, batch: Batch) -> None:
    """One transaction on the writer connection (inline, or on a worker thread that waits
    for another process's lock)."""
    write_group(conn, [batch])


def write_group(conn: sqlite3.Connection, batches: list[Batch]) -> None:
    """The turns of several sessions in one transaction (``write_batch`` for one)."""
    try:
        events = [row for b in batches for row in b.events]
        if events:
            conn.executemany(
                "INSERT INTO events_packed (session_id, seq, topic, type, record, count) "
                "VALUES (?, ?, ?, ?, ?, ?)",
                events,
            )
        messages = [row for b in batches for row in b.messages]
        if messages:
            conn.executemany(
                "INSERT INTO messages (session_id, idx, id, sender, body) VALUES (?, ?, ?, ?, ?)",
                messages,
            )
        records = [row for b in batches for row in b.records]
        if records:
            conn.executemany(
                "INSERT INTO execution_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", records
            )
        drafts = [row for b in batches for row in b.drafts]
        if drafts:
            conn.executemany("INSERT INTO drafts (session_id, idx, body) VALUES (?, ?, ?)", drafts)
        conn.executemany(
            "UPDATE sessions SET state = ?, stop_reason = ?, state_json = ?, last_seq = ?, "
            "updated_at = ? WHERE id = ?",
            [b.session for b in batches],
        )
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
