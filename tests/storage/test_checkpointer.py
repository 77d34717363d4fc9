"""Checkpoints run on the store's checkpointer thread, never inside a turn (issue 18):
turns go on while one runs, and the WAL still stops growing."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

import rolecall
from rolecall.storage import sqlite as sqlite_store
from rolecall.storage.checkpointer import Checkpointer
from rolecall.storage.sqlite import SqliteStore
from tests.helpers import world_from

pytestmark = pytest.mark.anyio


FIVE_WORDS = ("alpha", "bravo", "charlie", "delta", "echo")


def world(turns: int) -> dict[str, object]:
    return {
        "name": "cp",
        "topic": "testing",
        "model": "scripted",
        "settings": {"max_turns": turns},
        # five different lines in turn: no reply is nearly identical to one of the four
        # before it (a stall, real-models.md)
        "roles": [
            {
                "id": "a",
                "script": ["checkpoint me, turn {n}, " + f"{w} " * 40 for w in FIVE_WORDS],
            }
        ],
        "flow": {"steps": [{"id": "s", "speaker": "a", "loop": {"to": "s", "max": 10000}}]},
    }


async def test_turns_go_on_while_a_checkpoint_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", 5)
    started, release = threading.Event(), threading.Event()
    original = Checkpointer._checkpoint

    def held(self: Checkpointer) -> None:
        started.set()
        release.wait(30)  # a checkpoint that takes as long as the test wants
        original(self)

    monkeypatch.setattr(Checkpointer, "_checkpoint", held)
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        async with rolecall.open_session(world_from(world(40)), store=store) as session:
            await session.run()
            # every turn was committed while the first checkpoint was still held
            assert started.is_set() and not release.is_set()
            assert session.result.turns == 40
            counts = await store.counts(session.session_id)
            assert counts is not None and counts.messages == 40
        release.set()


def times_started_over(wal: Path) -> int:
    """The WAL header's checkpoint sequence number: one more each time it starts over."""
    with wal.open("rb") as f:
        return int.from_bytes(f.read(16)[12:16], "big")


async def test_the_wal_stops_growing_under_continuous_turns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", 50)
    wal = tmp_path / "rolecall.db-wal"
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        sizes, restarts = [], [times_started_over(wal)]
        for _ in range(4):
            async with rolecall.open_session(world_from(world(300)), store=store) as session:
                await session.run()
            sizes.append(wal.stat().st_size)
            restarts.append(times_started_over(wal))
        checkpointer = store._checkpointer
        assert checkpointer is not None and checkpointer.done >= 4
    # 1,200 commits of about ten 4 KB pages each (about 45 MB) went through the WAL; it
    # was started over from its beginning after the checkpoints (one every 50 commits:
    # 24 of them, 5-6 restarts a session here; 3 in all without the store's tail copy)
    assert restarts[-1] - restarts[0] >= 8, restarts
    # its size is the longest run of commits between two restarts: a few MB, more when
    # a checkpoint's sync stalled (70 ms seen on a busy machine: 1,300 frames, 5 MB)
    assert max(sizes) < 30_000_000, sizes


def test_the_wal_starts_over_with_two_writers_on_one_database(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two stores on one database, each on its own thread and event loop, as two
    processes sharing a data dir are: the copy of the WAL's tail before a commit keeps
    the other writer out, so the WAL still starts over (with a copy that let the other
    writer in, it grew by every commit: the other always committed during its sync)."""
    monkeypatch.setattr(sqlite_store, "CHECKPOINT_EVERY_COMMITS", 50)
    db, wal = tmp_path / "rolecall.db", tmp_path / "rolecall.db-wal"
    sizes: list[int] = []
    restarts: set[int] = set()
    failures: list[BaseException] = []

    async def writer(turns: int) -> None:
        async with (
            SqliteStore(db) as store,
            rolecall.open_session(world_from(world(turns)), store=store) as s,
        ):

            def measure(_: object) -> None:  # each message is published once it is stored
                sizes.append(wal.stat().st_size)
                restarts.add(times_started_over(wal))

            s.bus.subscribe(measure, "messages")
            await s.run()
            counts = await store.counts(s.session_id)
            assert counts is not None and counts.messages == turns

    def thread(turns: int) -> None:
        try:
            anyio.run(writer, turns)
        except BaseException as exc:  # reported by the test's own thread
            failures.append(exc)

    anyio.run(writer, 1)  # the database exists before the two start together
    threads = [threading.Thread(target=thread, args=(1000,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not failures, failures
    assert len(sizes) == 2001
    # 2,000 commits of about ten 4 KB pages went through the WAL (about 80 MB). With a
    # checkpoint every 50 of each store's commits it started over 11-16 times here and
    # held 9-14 MB at most; with a tail copy that let the other writer in, 1-3 times,
    # and it reached 67-91 MB
    assert len(restarts) >= 6, sorted(restarts)
    assert max(sizes) < 40_000_000, max(sizes)
