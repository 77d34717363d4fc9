"""Forking inside the store (SessionStore.fork_copy): the same session as the pure fork.

The SQLite store copies rows with ``INSERT … SELECT``; the document it then loads must
equal, field for field, the fork computed from the whole parent document
(:func:`rolecall.storage.fork.fork`), at every message of real scripted runs: flow
steps with loops, a debate with its moderator, a judged consensus, edits included.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import rolecall
from rolecall.storage.document import SessionDocument
from rolecall.storage.fork import fork
from rolecall.storage.port import SessionStore
from rolecall.storage.sqlite import SqliteStore
from tests.storage.test_store_port import store

pytestmark = pytest.mark.anyio
__all__ = ["store"]  # the fixture: both stores

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def comparable(doc: SessionDocument) -> dict[str, Any]:
    return doc.model_dump(mode="json", exclude={"memory", "rolecall_version"})


@pytest.mark.parametrize("world", ["tutoring", "debate", "consensus", "courtroom"])
async def test_the_copy_is_the_fork_at_every_message(store: SessionStore, world: str) -> None:
    result = await rolecall.run(ROOT / "worlds" / world, store=store)
    parent = await store.load(result.session_id)
    assert any(e.get("type") == "judge" for e in parent.events) or world != "courtroom"
    for k in range(1, len(parent.messages) + 1):
        for edit in (None, f"edited m{k}"):
            new_id = f"20261123-120000-{k:04x}{0 if edit is None else 1:02x}"
            copied = await store.fork_copy(
                parent.session_id, f"m{k}", new_id=new_id, now=NOW, edit=edit, model="offline"
            )
            _, expected = fork(parent, f"m{k}", new_id=new_id, now=NOW, edit=edit, model="offline")
            stored = await store.load(new_id)
            assert comparable(stored) == comparable(expected), (world, k, edit)
            assert (copied.new_id, copied.k, copied.last) == (new_id, k, expected.messages[-1])
    assert comparable(await store.load(parent.session_id)) == comparable(parent)  # untouched


async def test_a_large_session_forks_in_the_middle(tmp_path: Path) -> None:
    world = {
        "name": "long",
        "model": "scripted",
        "roles": [
            {"id": "ann", "script": ["ann {n}"]},
            {"id": "bob", "script": ["bob {n}"]},
        ],
        "flow": {
            "steps": [
                {"id": "a", "speaker": "ann", "instruction": "Go."},
                {
                    "id": "b",
                    "speaker": "bob",
                    "instruction": "Go.",
                    "loop": {"to": "a", "max": 1000},
                },
            ]
        },
        "settings": {"max_turns": 2000},
    }
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        result = await rolecall.run(world, store=store)
        parent = await store.load(result.session_id)
        assert len(parent.messages) == 2000
        await store.fork_copy(parent.session_id, "m1001", new_id="20261123-120000-f0f0f0", now=NOW)
        stored = await store.load("20261123-120000-f0f0f0")
    _, expected = fork(parent, "m1001", new_id="20261123-120000-f0f0f0", now=NOW)
    assert comparable(stored) == comparable(expected)
    assert len(stored.messages) == 1001 and stored.messages[-1].content.startswith("ann")
    assert stored.state.pointer.current == "a" and stored.state.pointer.exec_counts == {
        "a": 501,
        "b": 500,
    }
    assert stored.state.extra["undecided"][0] == "a"


def memory_of(root: Path, sid: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((root / "memory" / sid).glob("*.jsonl"))}


@pytest.mark.parametrize("damage", [False, True])
async def test_memory_files_are_the_parents_up_to_mk(tmp_path: Path, damage: bool) -> None:
    """Cut from the parent's files (or rebuilt when they do not match): byte for byte the
    files a rebuild from the fork's messages writes."""
    from rolecall.cli.manage.fork_cmd import fork_session
    from rolecall.memory import MemoryFiles
    from rolecall.paths import db_path

    data = tmp_path / "data"
    result = await rolecall.run(ROOT / "worlds" / "tutoring", data_dir=data)
    sid = result.session_id
    if damage:  # a line lost from one file: the cut would be wrong, the fork rebuilds
        learner = data / "memory" / sid / "learner.jsonl"
        lines = learner.read_bytes().splitlines(keepends=True)
        learner.write_bytes(b"".join(lines[:2] + lines[3:]))
    memory = MemoryFiles.in_data_dir(data)
    reference = MemoryFiles.in_data_dir(tmp_path / "reference")
    try:
        async with SqliteStore(db_path(data)) as store:
            parent = await store.load(sid)
            roles = [r["id"] for r in parent.world["roles"]]
            for k in range(1, len(parent.messages) + 1):
                for edit in (None, f"edited m{k}"):
                    plan = await fork_session(store, memory, sid, f"m{k}", edit=edit)
                    _, expected = fork(parent, f"m{k}", new_id=plan.new_id, now=NOW, edit=edit)
                    reference.rebuild(
                        plan.new_id, roles, expected.messages, expected.state.memory_start
                    )
                    forked = memory_of(data, plan.new_id)
                    assert forked == memory_of(tmp_path / "reference", plan.new_id), (k, edit)
                    assert len(forked["learner.jsonl"].splitlines()) == k
    finally:
        memory.close()
        reference.close()
