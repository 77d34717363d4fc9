"""The messages' search index is kept out of the turns (schema 6, storage/fts.py): a
turn's transaction does not index its message; a search, or closing the store, does,
and a store that cannot be written searches the missing messages all the same."""

from __future__ import annotations

from pathlib import Path

import aiosqlite
import pytest

import rolecall
from rolecall.storage import fts
from rolecall.storage.catalog import SessionFilter
from rolecall.storage.sqlite import SqliteStore
from tests.helpers import world_from

pytestmark = pytest.mark.anyio

WORLD = {
    "name": "fts",
    "topic": "testing",
    "model": "scripted",
    "settings": {"max_turns": 3},
    "roles": [{"id": "a", "script": ["zebra crossing number {n}"]}],
    "flow": {"steps": [{"id": "s", "speaker": "a", "loop": {"to": "s", "max": 10}}]},
}


async def indexed(db: aiosqlite.Connection) -> int:
    rows = list(await db.execute_fetchall("SELECT COUNT(*) FROM messages_fts"))
    return int(rows[0][0])


async def test_turns_do_not_index_a_search_or_the_close_does(tmp_path: Path) -> None:
    path = tmp_path / "rolecall.db"
    async with SqliteStore(path) as store:
        async with rolecall.open_session(world_from(WORLD), store=store) as session:
            await session.run()
            await session.flush()
        assert len(session.transcript) == 3
        assert await indexed(store.db) == 0  # the turns stored their messages only
        # a connection that cannot write the index still finds them
        async with aiosqlite.connect(f"{path.as_uri()}?mode=ro", uri=True) as ro:
            await fts.prepare(ro, writable=False)
            found = list(await ro.execute_fetchall(fts.MATCH, ('"zebra"', '"zebra"')))
            assert found == [(session.session_id,)]
            assert await indexed(ro) == 0
        (row,) = await store.list_sessions(SessionFilter(search="zebra crossing"))
        assert row.id == session.session_id
        assert await indexed(store.db) == 3  # the search caught the index up
        assert await store.list_sessions(SessionFilter(search="giraffe")) == []
    async with SqliteStore(path) as again:  # nothing indexed twice
        assert await indexed(again.db) == 3


async def test_closing_the_store_indexes_what_the_turns_stored(tmp_path: Path) -> None:
    path = tmp_path / "rolecall.db"
    async with (
        SqliteStore(path) as store,
        rolecall.open_session(world_from(WORLD), store=store) as session,
    ):
        await session.run()
    async with aiosqlite.connect(path) as db:
        assert await indexed(db) == 3
        marks = list(await db.execute_fetchall("SELECT session_id, indexed FROM fts_progress"))
        assert marks == [(session.session_id, 3)]


async def test_closing_a_store_indexes_the_sessions_it_wrote_only(tmp_path: Path) -> None:
    """Another process sharing the database indexes its own sessions when it closes:
    indexing them here as well held its turns up (they wait for the index's write
    transaction) for twice as long. A search still finds every session."""
    path = tmp_path / "rolecall.db"
    async with (
        SqliteStore(path) as other,
        rolecall.open_session(world_from(WORLD), store=other) as theirs,
    ):
        await theirs.run()
        async with (
            SqliteStore(path) as store,
            rolecall.open_session(world_from(WORLD), store=store) as mine,
        ):
            await mine.run()
        async with aiosqlite.connect(path) as db:
            marks = list(await db.execute_fetchall("SELECT session_id FROM fts_progress"))
            assert marks == [(mine.session_id,)]
            assert await indexed(db) == 3
        found = await other.list_sessions(SessionFilter(search="zebra"))
        assert {r.id for r in found} == {mine.session_id, theirs.session_id}
    async with aiosqlite.connect(path) as db:
        assert await indexed(db) == 6
