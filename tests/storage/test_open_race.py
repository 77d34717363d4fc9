"""A store opened while another process is creating the same new database waits for it.

Switching a new database to WAL needs a lock that another connection's first write
transaction holds, and SQLite answers "database is locked" at once instead of calling the
busy handler: two `rolecall run` started together on a fresh data dir failed so (about
one open in thirteen with four processes at once, seen in CI's benchmark check).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import anyio
import pytest

from rolecall.storage.sqlite import SqliteStore


@pytest.mark.anyio
async def test_a_store_opened_while_another_writes_the_new_database_waits(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rolecall.db"
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")  # another process in its first transaction
    other.execute("CREATE TABLE elsewhere (a)")
    released = threading.Event()

    def finish_later() -> None:
        time.sleep(0.3)
        other.execute("COMMIT")
        released.set()

    threading.Thread(target=finish_later).start()
    started = anyio.current_time()
    async with SqliteStore(path) as store:
        assert released.is_set()  # it waited for the other one, then opened
        assert await store.counts("nobody") is None
    assert anyio.current_time() - started < 5.0
    other.close()
