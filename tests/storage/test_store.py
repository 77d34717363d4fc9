"""The SQLite store on its own: schema versions, one transaction per turn, reloading."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from rolecall.errors import UsageError
from rolecall.session.state import PendingReply, SessionState
from rolecall.storage.document import StateDoc, restore_state, state_doc, state_json
from rolecall.storage.schema import SCHEMA_VERSION
from rolecall.storage.sqlite import SqliteStore
from tests.helpers import opened, scripted_world

pytestmark = pytest.mark.anyio


async def test_a_database_from_a_newer_rolecall_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rolecall.db"
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    with pytest.raises(UsageError, match=rf"schema version {SCHEMA_VERSION + 5}, newer than"):
        await SqliteStore(path).open()


async def test_a_fresh_database_gets_the_current_schema(tmp_path: Path) -> None:
    async with SqliteStore(tmp_path / "rolecall.db"):
        pass
    with sqlite3.connect(tmp_path / "rolecall.db") as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_a_stored_session_reloads_exactly(tmp_path: Path) -> None:
    world = scripted_world(
        [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 3}}]
    )
    path = tmp_path / "rolecall.db"
    async with SqliteStore(path) as store, opened(world, store=store) as (session, rec):
        await session.run()
        await session.flush()
        doc = await store.load(session.session_id)
        last_seq = rec.events[-1].seq
    assert [m.content for m in doc.messages] == [m.content for m in session.transcript]
    published = [e.model_dump(exclude={"topic", "type"}) for e in rec.of("system", "step")]
    assert [r.model_dump() for r in doc.execution_log] == published
    assert doc.state.state == "finished" and doc.state.stop_reason == "flow_end"
    assert doc.last_seq == last_seq
    restored = restore_state(doc)
    assert restored.pointer.exec_counts == session.status.pointer.exec_counts
    assert restored.transcript.agent_turns == 6
    # every event but the streaming ones comes back, in order
    kinds = [(e["topic"], e["type"]) for e in doc.events]
    assert ("sse", "chunk") not in kinds
    assert kinds[-1] == ("world", "stop")
    with sqlite3.connect(tmp_path / "rolecall.db") as db:
        seqs = [s for (s,) in db.execute("SELECT seq FROM events ORDER BY seq")]
    assert seqs == list(range(1, last_seq + 1))  # chunks included, no gaps


async def test_each_turn_is_one_transaction_with_its_message_and_decision(tmp_path: Path) -> None:
    world = scripted_world([{"id": f"s{i}", "speaker": "a"} for i in range(1, 4)])
    statements: list[str] = []
    async with (
        SqliteStore(tmp_path / "rolecall.db") as store,
        opened(world, store=store) as (
            session,
            _,
        ),
    ):
        await session.begin(running=True)  # the opening: stored on its own, before
        store.writer.set_trace_callback(statements.append)
        await session.step()
        store.writer.set_trace_callback(None)
    commits = [s for s in statements if s.strip().upper() == "COMMIT"]
    inserts = {s.split("(")[0].strip() for s in statements if s.startswith("INSERT")}
    assert len(commits) == 1  # one transaction for the whole turn
    assert {
        "INSERT INTO events_packed",
        "INSERT INTO messages",
        "INSERT INTO execution_log VALUES",
    } <= inserts


async def test_the_opening_is_stored_before_a_reader_sees_it(tmp_path: Path) -> None:
    """A crash during the first generation loses none of the events already seen: when
    the first reply starts streaming, created, the agents joining and running are in
    the store."""
    world = scripted_world([{"id": "s1", "speaker": "a"}])
    async with (
        SqliteStore(tmp_path / "rolecall.db") as store,
        opened(world, store=store) as (
            session,
            _,
        ),
    ):
        seen: list[tuple[str, str]] = []
        stored_then: list[list[tuple[str, str]]] = []

        def look(envelope: Any) -> None:
            event = envelope.event
            if event.topic == "sse" and event.type == "start":
                with sqlite3.connect(tmp_path / "rolecall.db") as db:
                    stored_then.append(
                        list(db.execute("SELECT topic, type FROM events ORDER BY seq"))
                    )
            elif event.topic != "sse":
                seen.append((event.topic, event.type))

        session.bus.subscribe(look)
        await session.step()
    assert seen[:3] == [("world", "session"), ("world", "agent"), ("world", "session")]
    assert stored_then == [seen[:3]]


async def test_a_store_with_the_right_version_but_other_tables_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "rolecall.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE sessions (id TEXT)")
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    with pytest.raises(
        UsageError,
        match="lacks batch_runs, batch_runs_session, batches, drafts, events, events_packed",
    ):
        await SqliteStore(path).open()


def test_the_stored_state_text_is_the_state_document_of_every_field() -> None:
    state = SessionState("s1", state="paused", pause_reason="error", stop_detail="d")
    state.pointer.current, state.pointer.exec_counts = "s2", {"s1": 3, "s2": 2}
    state.pointer.execution_order, state.pointer.started = 5, True
    state.flags, state.limit_notified = {"zeta", "alpha"}, {"b", "a"}
    state.turn_counts, state.memory_start = {"a": 2}, {"b": 4}
    state.pending = [PendingReply(agent="a", message_id="m3", kind="interjection")]
    state.extra = {"undecided": ["s1", 2, "2026-11-22T04:00:00+00:00", "m5"], "n": None}
    text = state_json(state)
    assert text == state_doc(state).model_dump_json()
    assert set(json.loads(text)) == set(StateDoc.model_fields)  # no field left out
    assert StateDoc.model_validate_json(text) == state_doc(state)
