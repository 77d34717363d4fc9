"""How the store commits turns: inline on the event loop, on a thread when it must wait,
nothing more after a failed write, checkpoints it runs itself, sessions taking turns at
once committing together, and the schema's migrations.

Every session here is opened as a user opens one, :func:`rolecall.open_session` with
``store=`` an open :class:`SqliteStore`: the opener stores each turn before it is
published."""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.bus.events import StreamChunk
from rolecall.errors import StorageError
from rolecall.session.state import TranscriptMessage
from rolecall.storage import sqlite as sqlite_store
from rolecall.storage import writer as store_writer
from rolecall.storage.browse import events_after
from rolecall.storage.schema import MIGRATIONS, SCHEMA_VERSION
from rolecall.storage.sqlite import SqliteStore
from tests.helpers import Recorder, opened, scripted_world, world_from

pytestmark = pytest.mark.anyio

THREE_STEPS = [{"id": f"s{i}", "speaker": "a" if i % 2 else "b"} for i in range(1, 4)]


@asynccontextmanager
async def attached(path: Path) -> AsyncIterator[tuple[SqliteStore, rolecall.Session, Recorder]]:
    """A store at ``path``, a three-step scripted session opened on it, and a recorder of
    every event it publishes (streamed chunks too)."""
    async with (
        SqliteStore(path) as store,
        opened(scripted_world(THREE_STEPS), store=store) as (session, rec),
    ):
        yield store, session, rec


def rows(path: Path, query: str, *params: Any) -> list[Any]:
    with sqlite3.connect(path) as db:
        return list(db.execute(query, params))


async def test_a_turn_waits_for_another_process_lock_without_freezing_the_loop(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rolecall.db"
    async with attached(path) as (_store, session, _rec):
        other = sqlite3.connect(path, check_same_thread=False)
        other.execute("BEGIN IMMEDIATE")  # another writer holds the lock
        released = threading.Event()

        def release_later() -> None:
            time.sleep(0.4)
            other.rollback()
            released.set()

        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while not released.is_set():
                ticks += 1
                await anyio.sleep(0.01)

        releaser = threading.Thread(target=release_later)
        releaser.start()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(tick)
                assert await session.step()
        finally:
            releaser.join()
            other.close()
        # the loop went on while the turn waited for the lock (inline, it would not tick)
        assert ticks >= 10
    assert [m for (m,) in rows(path, "SELECT id FROM messages ORDER BY idx")] == ["m1"]


async def test_a_lock_held_past_the_timeout_fails_the_turn_clearly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(store_writer, "BUSY_TIMEOUT_S", 0.2)
    path = tmp_path / "rolecall.db"

    async def locked_out() -> None:
        async with attached(path) as (_store, session, _rec):
            other = sqlite3.connect(path)
            other.execute("BEGIN IMMEDIATE")
            try:
                with pytest.raises(
                    StorageError, match=r"cannot write to the session store .*locked"
                ):
                    await session.step()
            finally:
                other.rollback()
                other.close()

    with pytest.raises(StorageError, match="no longer written"):  # leaving says so again
        await locked_out()
    assert rows(path, "SELECT id FROM messages") == []


def test_the_waiting_thread_tries_again_until_the_lock_is_free() -> None:
    """The worker thread polls (every ``POLL_S``) rather than sleeping SQLite's busy
    ladder (1, 2, 5, 10 ms...): each try is one run of the transaction, and anything
    but a held lock fails at once."""
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
    tries: list[int] = []

    def free_at_the_fourth(_conn: sqlite3.Connection, batch: int) -> None:
        tries.append(batch)
        if len(tries) < 4:
            raise busy

    conn = sqlite3.connect(":memory:")
    store_writer.run_waiting(free_at_the_fourth, conn, 7)
    assert tries == [7, 7, 7, 7]

    def full(_conn: sqlite3.Connection, _batch: int) -> None:
        tries.append(0)
        raise sqlite3.OperationalError("database or disk is full")

    tries.clear()
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        store_writer.run_waiting(full, conn, 0)
    assert tries == [0]
    conn.close()


async def test_closing_the_store_does_not_wait_for_a_reader_of_an_older_snapshot(
    tmp_path: Path,
) -> None:
    """The last checkpoint copies what it can without the write lock and leaves the WAL
    to a connection still reading from it, instead of waiting for it (up to 5 s)."""
    path = tmp_path / "rolecall.db"
    reader = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
    released = threading.Event()
    async with attached(path) as (_store, session, _rec):
        assert await session.step()
        reader.execute("BEGIN")
        assert reader.execute("SELECT COUNT(*) FROM messages").fetchone() == (1,)
        assert await session.step()  # the reader's snapshot is now an older one

        def release() -> None:
            if not released.is_set():
                released.set()
                reader.rollback()

        # the reader gives up after 3 s, so that a close that waits for it cannot hang
        timer = threading.Timer(3, release)
        timer.start()
    try:
        assert not released.is_set()  # the store closed while the reader still read
        assert (tmp_path / "rolecall.db-wal").stat().st_size > 0
    finally:
        timer.cancel()
        timer.join()
        release()
        reader.close()
    assert [m for (m,) in rows(path, "SELECT id FROM messages ORDER BY idx")] == ["m1", "m2"]


async def test_after_a_failed_write_nothing_more_of_the_session_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "rolecall.db"
    write_batch = store_writer.write_batch
    calls = 0

    def second_write_fails(conn: sqlite3.Connection, batch: Any) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:  # the opening, m1's turn, then m2's
            raise sqlite3.OperationalError("database or disk is full")
        write_batch(conn, batch)

    monkeypatch.setattr(store_writer, "write_batch", second_write_fails)

    async def disk_full() -> None:
        async with attached(path) as (_store, session, _rec):
            assert await session.step()
            with pytest.raises(StorageError, match="disk is full"):
                await session.step()
            # the session in memory holds m2, whose events were never published: storing it
            # now would leave a message without its event
            assert [m.id for m in session.transcript] == ["m1", "m2"]
            with pytest.raises(StorageError, match=r"no longer written .* since a write failed"):
                await session.flush()
            with pytest.raises(StorageError, match="no longer written"):
                await session.step()

    with pytest.raises(StorageError, match="no longer written"):  # leaving says so again
        await disk_full()
    assert [m for (m,) in rows(path, "SELECT id FROM messages ORDER BY idx")] == ["m1"]
    stored = [
        json.loads(r)["message_id"]
        for (r,) in rows(path, "SELECT record FROM events WHERE type = 'message' ORDER BY seq")
    ]
    assert stored == ["m1"]


async def test_the_store_checkpoints_so_the_wal_stays_small(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        {"id": "s1", "speaker": "a"},
        {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 1000}},
    ]

    async def wal_after(every: int, home: Path) -> int:
        monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", every)
        world = scripted_world(steps, settings={"max_turns": 600})
        async with SqliteStore(home / "rolecall.db") as store:
            await rolecall.run(world, store=store)
            return (home / "rolecall.db-wal").stat().st_size

    checkpointed = await wal_after(10, tmp_path / "often")
    never = await wal_after(10**9, tmp_path / "never")
    # the WAL is reused from its start after each checkpoint (the checkpointer's thread
    # copies it back while turns go on, so it holds a few intervals' frames at most, more
    # on a busy machine), while without checkpoints it holds all 600 turns
    assert checkpointed * 5 < never
    assert len(rows(tmp_path / "often" / "rolecall.db", "SELECT id FROM messages")) == 600


async def test_a_turns_chunks_are_one_compact_row_and_every_event_reads_back(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rolecall.db"
    async with attached(path) as (store, session, rec):
        await session.step()
        await session.step()
        await session.flush()
        doc = await store.load(session.session_id)
        stored = await events_after(store, session.session_id)
        last_seq = rec.events[-1].seq
        packed = rows(
            path, "SELECT topic, type, count FROM events_packed WHERE seq > 2 ORDER BY seq"
        )
        listed = rows(path, "SELECT seq, topic, type, record FROM events ORDER BY seq")
    # per turn: sse/start, one row of all the chunks, sse/end; then the message and its step
    turn = [("sse", "start"), ("sse", "chunks"), ("sse", "end"), ("*", "*")]
    assert [(topic, kind) for topic, kind, _ in packed] == turn * 2
    chunks = [e for e in rec.events if e.event.type == "chunk"]
    assert sum(count for _, kind, count in packed if kind == "chunks") == len(chunks) > 2
    # read back from the store, every event is the line `--json` printed, byte for byte
    assert stored == [(e.seq, e.to_json()) for e in rec.events if e.seq <= last_seq]
    assert [seq for seq, *_ in listed] == list(range(1, last_seq + 1))
    for seq, topic, kind, record in listed:
        event = json.loads(record)
        assert (event["seq"], event["topic"], event["type"]) == (seq, topic, kind)
    # a session document keeps every event but the streamed ones
    assert [(e["topic"], e["type"]) for e in doc.events] == [
        (t, k) for _, t, k, _ in listed if t != "sse"
    ]


async def test_a_chunks_row_holds_any_text_exactly_as_json_writes_it(tmp_path: Path) -> None:
    text = 'say "hi" back\\slash tab\there ünï 🙂 \x7f end \\"'
    path = tmp_path / "rolecall.db"
    world = world_from(
        {
            "name": "t",
            "topic": "testing",
            "model": "scripted",
            "roles": [{"id": "a", "script": [text]}],
            "flow": {"steps": [{"id": "s", "speaker": "a"}]},
        }
    )
    async with SqliteStore(path) as store, opened(world, store=store) as (session, rec):
        await session.step()
        await session.flush()
        stored = await events_after(store, session.session_id)
        published = list(rec.events)
    [(record,)] = rows(path, "SELECT record FROM events_packed WHERE type = 'chunks'")
    chunk_envelopes = [e for e in published if isinstance(e.event, StreamChunk)]
    assert "".join(e.event.delta for e in chunk_envelopes) == text
    assert len(chunk_envelopes) > 2
    assert json.loads(record)["chunks"] == [
        [json.loads(e.to_json())["ts"], e.event.delta, e.event.output_tokens]
        for e in chunk_envelopes
    ]
    assert record == json.dumps(json.loads(record), ensure_ascii=False, separators=(",", ":"))
    # read back (the web view's event API), every event is the line `--json` printed
    assert stored == [(e.seq, e.to_json()) for e in published]


async def test_a_version_1_store_is_migrated_and_keeps_its_events(tmp_path: Path) -> None:
    path = tmp_path / "rolecall.db"
    chunks = [
        {"topic": "sse", "type": "chunk", "seq": 2 + i, "session_id": "old", "ts": "t"}
        for i in range(3)
    ]
    with sqlite3.connect(path) as db:
        db.executescript(f"BEGIN; {MIGRATIONS[0]} PRAGMA user_version = 1; COMMIT;")
        db.execute(
            "INSERT INTO sessions (id, world_name, world_json, state, state_json, created_at, "
            "updated_at) VALUES ('old', 'w', '{}', 'paused', '{}', 'x', 'x')"
        )
        start = {"topic": "sse", "type": "start", "seq": 1, "session_id": "old", "ts": "t"}
        db.executemany(
            "INSERT INTO events_packed VALUES ('old', ?, ?, ?, ?, ?)",
            [
                (1, "sse", "start", json.dumps(start), 1),
                (2, "sse", "chunk", json.dumps(chunks), 3),  # version 1 packed chunks alone
            ],
        )
    async with SqliteStore(path):
        pass
    assert rows(path, "PRAGMA user_version") == [(SCHEMA_VERSION,)]
    # 3: batch tables, 4: messages_fts, 5: compact chunk rows, 6: fts_progress,
    # 7: no execution_log_step index, 8: the world documents in a table of their own,
    # 9: the scores given after the fact (rolecall score), empty
    assert SCHEMA_VERSION == 9
    assert rows(path, "SELECT COUNT(*) FROM scores") == [(0,)]
    assert rows(path, "SELECT name FROM sqlite_master WHERE name = 'execution_log_step'") == []
    assert rows(path, "SELECT session_id, world_json FROM session_worlds") == [("old", "{}")]
    assert rows(path, "SELECT world_json FROM sessions") == [("",)]
    listed = rows(path, "SELECT seq, topic, type FROM events WHERE session_id = 'old'")
    assert sorted(listed) == [
        (1, "sse", "start"),
        (2, "sse", "chunk"),
        (3, "sse", "chunk"),
        (4, "sse", "chunk"),
    ]


async def test_checkpoints_keep_the_wal_small_with_many_sessions_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = [
        {"id": "s1", "speaker": "a"},
        {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 1000}},
    ]
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", 20)

    async def wal_after(sessions: int, home: Path) -> int:
        world = scripted_world(steps, settings={"max_turns": 400 // sessions})
        async with SqliteStore(home / "rolecall.db") as store:
            async with anyio.create_task_group() as tg:
                for _ in range(sessions):
                    tg.start_soon(partial(rolecall.run, world, store=store))
            return (home / "rolecall.db-wal").stat().st_size

    alone = await wal_after(1, tmp_path / "alone")
    together = await wal_after(10, tmp_path / "together")
    # the same 400 turns: ten sessions committing between each other's checkpoints must
    # not keep the WAL from starting over
    assert together < alone * 3


async def test_a_turn_writes_as_many_pages_with_a_large_world_as_with_a_small_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each turn updates the session's row; a world document of a few KB in that row
    made it overflow its page, and every turn rewrote the overflow pages (schema 8 keeps
    the world in a table of its own)."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", 10**9)  # the WAL holds all
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_BYTES", 10**12)
    steps = [
        {"id": "s1", "speaker": "a"},
        {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 1000}},
    ]

    async def wal_pages(description: str, home: Path) -> tuple[int, str]:
        world = world_from(
            {"name": "t", "topic": "testing", "model": "scripted",
             "settings": {"max_turns": 400}, "flow": {"steps": steps},
             "roles": [{"id": r, "description": description, "script": [f"{r} says {{n}}"]}
                       for r in ("a", "b")]}
        )  # fmt: skip
        async with SqliteStore(home / "rolecall.db") as store:
            start = (home / "rolecall.db-wal").stat().st_size
            result = await rolecall.run(world, store=store)
            end = (home / "rolecall.db-wal").stat().st_size
            doc = await store.load(result.session_id)
        return (end - start) // (4096 + 24), doc.world["roles"][0]["description"]

    small, kept_small = await wal_pages("a tutor", tmp_path / "small")
    large, kept_large = await wal_pages(
        "a patient tutor who explains slowly. " * 160, tmp_path / "large"
    )
    assert (kept_small, len(kept_large)) == ("a tutor", 37 * 160)  # stored and loaded whole
    # 400 turns: the same pages but the world's own, written once (schema 7 wrote about
    # 0.4 more a turn here, rewriting the overflow pages of the session's row)
    assert large - small < 25, (small, large)


LOOPING = [
    {"id": "s1", "speaker": "a"},
    {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 1000}},
]


def before_each_write(monkeypatch: pytest.MonkeyPatch, look: Callable[[list[Any]], None]) -> None:
    """Call ``look`` with the batches of each group transaction before it is written (it
    may raise instead, as a failing disk would)."""
    write_group = store_writer.write_group

    def looked_at(conn: sqlite3.Connection, batches: list[Any]) -> None:
        look(batches)
        write_group(conn, batches)

    monkeypatch.setattr(store_writer, "write_group", looked_at)


async def run_together(
    store: SqliteStore, ids: list[str], turns: int
) -> tuple[dict[str, str], dict[str, list[TranscriptMessage]]]:
    """Sessions of the looping scripted world (ids ``ids``, ``turns`` turns each) opened
    and run at once on ``store``: what each ended with (its stop reason, or the error
    that stopped it), and each one's transcript as it was when it ended."""
    world = scripted_world(LOOPING, settings={"max_turns": turns})
    ended: dict[str, str] = {}
    live: dict[str, list[TranscriptMessage]] = {}

    opening = len(ids)
    all_open = anyio.Event()

    async def run(session_id: str) -> None:
        nonlocal opening
        try:
            async with rolecall.open_session(world, store=store, session_id=session_id) as s:
                opening -= 1
                if not opening:
                    all_open.set()
                await all_open.wait()  # they start together, taking turns from the first
                try:
                    await s.run()
                    ended[session_id] = str(s.status.stop_reason)
                except (StorageError, RuntimeError) as exc:
                    ended[session_id] = f"error: {exc}"
                finally:
                    live[session_id] = s.transcript
        except StorageError as exc:  # leaving a session no longer stored says so again
            closing[session_id] = str(exc)

    closing: dict[str, str] = {}
    async with anyio.create_task_group() as tg:
        for session_id in ids:
            tg.start_soon(run, session_id)
    assert all("no longer written" in error for error in closing.values()), closing
    assert all(ended[sid].startswith("error") for sid in closing), (closing, ended)
    return ended, live


async def test_sessions_taking_turns_commit_together_and_each_is_stored_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    groups: list[int] = []
    before_each_write(monkeypatch, lambda batches: groups.append(len(batches)))
    ids = [f"s{i}" for i in range(10)]
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        ended, live = await run_together(store, ids, 20)
        for sid in ids:
            doc = await store.load(sid)
            said = [(m.id, m.sender, m.content) for m in live[sid]]
            assert [(m.id, m.sender, m.content) for m in doc.messages] == said
    assert ended == {f"s{i}": "max_turns" for i in range(10)}
    # the sessions' turns shared transactions: far fewer than the 200 turns' commits
    assert max(groups) == 10 and len(groups) < 60, groups


async def test_a_turn_that_cannot_be_written_stops_its_own_session_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A group's transaction that fails is run again one session at a time: the turn that
    cannot be written stops its session, and the others' turns are stored."""

    def refusing(batches: list[Any]) -> None:
        if any(b.session[-1] == "bad" and b.messages and b.messages[0][1] == 4 for b in batches):
            raise sqlite3.OperationalError("disk I/O error")

    before_each_write(monkeypatch, refusing)
    ids = ["good-1", "bad", "good-2"]
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        ended, _ = await run_together(store, ids, 8)
        counts = {sid: await store.counts(sid) for sid in ids}
    assert ended["good-1"] == ended["good-2"] == "max_turns"
    assert ended["bad"].startswith("error: cannot write to the session store"), ended
    assert "disk I/O error" in ended["bad"]
    messages = {sid: c.messages for sid, c in counts.items() if c is not None}
    assert messages == {"good-1": 8, "bad": 4, "good-2": 8}


async def test_a_group_that_cannot_be_written_again_leaves_no_session_going_on_without_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The group's transaction fails, and so does the first turn written again alone (not
    with a storage error): the turns after it were not written either, and their
    sessions must not go on as if they were."""
    broke: list[str] = []

    def failing(batches: list[Any]) -> None:
        if any(b.messages and b.messages[0][1] == 3 for b in batches):
            if len(batches) > 1:
                raise sqlite3.OperationalError("disk I/O error")
            if not broke:
                broke.append(batches[0].session[-1])
                raise RuntimeError("the writer broke")

    before_each_write(monkeypatch, failing)
    ids = [f"s{i}" for i in range(3)]
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        ended, live = await run_together(store, ids, 6)
        for sid in ids:
            doc = await store.load(sid)
            stored = [m.id for m in doc.messages]
            if not ended[sid].startswith("error"):
                assert stored == [m.id for m in live[sid]], (sid, ended)
    assert broke and ended[broke[0]] == "error: the writer broke", ended
    # the group's turns after the broken one were never written: their sessions stopped
    assert sum(e == "error: the writer broke" for e in ended.values()) == 3, ended
