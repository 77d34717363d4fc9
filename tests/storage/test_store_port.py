"""The store port: SQLite and in-memory stores behave alike behind SessionStore."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import rolecall
from rolecall.storage.in_memory import InMemoryStore
from rolecall.storage.port import SessionStore
from rolecall.storage.sqlite import SqliteStore
from tests.api.test_api import pair

pytestmark = pytest.mark.anyio

WORLD = pair(title="A pair")


@pytest.fixture(params=["sqlite", "memory"])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[SessionStore]:
    if request.param == "memory":
        yield InMemoryStore()
        return
    async with SqliteStore(tmp_path / "rolecall.db") as opened:
        yield opened


async def test_a_stored_session_resumes_from_either_store(store: SessionStore) -> None:
    async with rolecall.open_session(WORLD, store=store, mode="step") as session:
        await session.step()
        await session.step()
        sid = session.session_id
    (row,) = await store.list_sessions()
    assert (row.id, row.world_name, row.title, row.messages) == (sid, "pair", "A pair", 2)
    assert row.state == "paused" and (await store.costs())[sid] == 0.0  # the block was left
    doc = await store.load(sid)
    # the session's totals, summed over its messages as its exports sum them
    assert (row.input_tokens, row.output_tokens) == (
        sum(m.input_tokens for m in doc.messages),
        sum(m.output_tokens for m in doc.messages),
    )
    assert row.input_tokens > 0 and row.cost_usd == 0.0 and row.batch is None
    assert [m.sender for m in doc.messages] == ["ann", "bob"]
    assert doc.events[0]["type"] == "session" and all(e["topic"] != "sse" for e in doc.events)
    assert [e["seq"] for e in doc.events] == sorted(e["seq"] for e in doc.events)
    async with rolecall.resume(sid, store=store) as session:
        result = await session.run()
    assert result.stop_reason == "flow_end" and result.messages == 3
    again = await store.load(sid)
    assert [m.id for m in again.messages] == ["m1", "m2", "m3"]  # none written twice
    assert again.state.state == "finished"
    assert (await store.counts(sid)) is not None


async def test_forget_delete_and_unknown_ids(store: SessionStore) -> None:
    result = await rolecall.run(WORLD, store=store)
    sid = result.session_id
    assert await store.forget(sid, "bob") == 3
    state = (await store.load(sid)).state
    assert state.memory_start["bob"] == 3 and state.turn_counts["bob"] == 0
    assert await store.delete(sid) == 3
    assert await store.delete(sid) is None
    assert not await store.has(sid) and await store.counts(sid) is None
    with pytest.raises(rolecall.UsageError, match="no session 'nope'"):
        await store.load("nope")
    with pytest.raises(rolecall.UsageError, match="no session 'nope'"):
        await store.forget("nope", "ann")


async def test_a_document_imported_into_another_store_is_the_same(
    store: SessionStore, tmp_path: Path
) -> None:
    first = InMemoryStore()
    result = await rolecall.run(WORLD, store=first)
    doc = await first.load(result.session_id)
    await store.import_document(doc)
    await store.import_document(doc)  # already there: kept as is
    copy = await store.load(result.session_id)
    assert copy.messages == doc.messages and copy.events == doc.events
    assert copy.last_seq == doc.last_seq
