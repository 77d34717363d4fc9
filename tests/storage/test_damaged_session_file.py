"""A session file whose parts disagree is refused (exit 2), naming the part; nothing stored.

Every key rolecall writes must be there (a default standing in for ``messages`` resumed
a session with no history); message ids run m1..mN; the execution log, pending replies
and an undecided step name messages the file has; a finished session has its stop
reason; event numbers are unique and within ``last_seq``. The store's
``import_document`` refuses the same documents.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.errors import UsageError
from rolecall.storage.document import SessionDocument, parse_document
from rolecall.storage.in_memory import InMemoryStore
from rolecall.storage.port import SessionStore
from rolecall.storage.sqlite import SqliteStore
from tests.api.test_api import pair
from tests.cli.test_run_cli import rolecall as run_cli

Damage = Callable[[dict[str, Any]], None]


def _paused_document() -> dict[str, Any]:
    """A session of ``pair`` paused after two of its three steps, as a session file has it."""

    async def main() -> SessionDocument:
        store = InMemoryStore()
        async with rolecall.open_session(pair(), store=store, mode="step") as session:
            await session.step()
            await session.step()
            sid = session.session_id
        return await store.load(sid)

    doc = anyio.run(main)
    data: dict[str, Any] = json.loads(doc.model_dump_json())
    return data


@pytest.fixture(scope="module")
def sound() -> dict[str, Any]:
    data = _paused_document()
    assert [m["id"] for m in data["messages"]] == ["m1", "m2"]
    assert [r["message_id"] for r in data["execution_log"]] == ["m1", "m2"]
    assert data["messages"][1]["reply_to"] == "m1"
    return data


def _set(path: str, value: Any) -> Damage:
    def damage(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for part in parents:
            doc = doc[int(part)] if part.isdigit() else doc[part]  # type: ignore[index]
        doc[last] = json.loads(json.dumps(value))  # a copy: the test may change the document

    return damage


def _delete(path: str) -> Damage:
    def damage(doc: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        for part in parents:
            doc = doc[part]
        del doc[last]

    return damage


def _copy_first_message(doc: dict[str, Any]) -> None:
    doc["messages"].append(dict(doc["messages"][0]))


def _swap_ids(doc: dict[str, Any]) -> None:
    doc["messages"][0]["id"], doc["messages"][1]["id"] = "m2", "m1"


def _first_message_only(doc: dict[str, Any]) -> None:
    doc["messages"] = doc["messages"][:1]


def _finished_without_reason(doc: dict[str, Any]) -> None:
    doc["state"]["state"] = "finished"
    doc["state"]["stop_reason"] = None


def _seq_twice(doc: dict[str, Any]) -> None:
    doc["events"][1]["seq"] = doc["events"][0]["seq"]


T0 = "2026-01-01T00:00:00+00:00"
DAMAGES: dict[str, tuple[Damage, str]] = {
    "no messages": (_delete("messages"), "messages: field required"),
    "no execution log": (_delete("execution_log"), "execution_log: field required"),
    "no events": (_delete("events"), "events: field required"),
    "no pointer": (_delete("state.pointer"), "state.pointer: field required"),
    "no current step": (_delete("state.pointer.current"), "state.pointer.current: field required"),
    "no stop reason key": (_delete("state.stop_reason"), "state.stop_reason: field required"),
    "a message twice": (_copy_first_message, "messages[2].id: 'm1' is also the id of messages[0]"),
    "ids out of order": (_swap_ids, "messages[0].id: 'm2' where 'm1' belongs"),
    "an id skipped": (_set("messages.1.id", "m3"), "messages[1].id: 'm3' where 'm2' belongs"),
    "an id written otherwise": (_set("messages.1.id", "m02"), "messages[1].id: 'm02' where"),
    "a reply to a later message": (
        _set("messages.0.reply_to", "m2"),
        "messages[0].reply_to: 'm2' is no earlier message",
    ),
    "a log without its messages": (
        _first_message_only,
        "execution_log[1].message_id: no message 'm2' (the file has 1 message)",
    ),
    "finished without a reason": (
        _finished_without_reason,
        "state.stop_reason: a finished session has the reason it stopped (got none)",
    ),
    "a pending reply to nothing": (
        _set("state.pending", [{"agent": "bob", "message_id": "m9"}]),
        "state.pending[0].message_id: no message 'm9' (the file has 2 messages)",
    ),
    "an undecided step with a bad iteration": (
        _set("state.extra.undecided", ["answer", "x", T0, "m2"]),
        "state.extra.undecided: the loop iteration 'x' is no whole number",
    ),
    "an undecided step with a bad time": (
        _set("state.extra.undecided", ["answer", 0, "noon", "m2"]),
        "state.extra.undecided: the start time 'noon' is no ISO time",
    ),
    "an undecided step of no message": (
        _set("state.extra.undecided", ["answer", 0, T0, "m7"]),
        "state.extra.undecided: no message 'm7'",
    ),
    "a torn conclusion": (
        _set("state.extra.concluding", ["max_turns"]),
        "state.extra.concluding: expected [reason, detail]",
    ),
    "an event number twice": (_seq_twice, "events[1].seq: 1 is also the number of events[0]"),
    "an event past last_seq": (_set("last_seq", 1), "events[1].seq: 2 is past last_seq (1)"),
}


def damaged(sound: dict[str, Any], how: str) -> dict[str, Any]:
    doc = json.loads(json.dumps(sound))
    DAMAGES[how][0](doc)
    return doc


def test_a_sound_document_reads(sound: dict[str, Any]) -> None:
    doc = parse_document(json.dumps(sound), "s.json")
    assert len(doc.messages) == 2 and doc.state.state == "paused"
    undecided = damaged(sound, "an undecided step of no message")
    undecided["state"]["extra"]["undecided"][3] = "m2"  # as a fork or a crash leaves it
    assert parse_document(json.dumps(undecided), "s.json").state.extra["undecided"][3] == "m2"


@pytest.mark.parametrize("how", list(DAMAGES))
def test_a_damaged_document_is_refused_naming_the_part(sound: dict[str, Any], how: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_document(json.dumps(damaged(sound, how)), "s.json")
    assert str(info.value).startswith("s.json: damaged session file: "), str(info.value)
    assert DAMAGES[how][1] in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["sqlite", "memory"])
async def test_a_store_refuses_to_import_a_document_whose_parts_disagree(
    sound: dict[str, Any], tmp_path: Path, kind: str
) -> None:
    doc = SessionDocument.model_validate(sound)
    sid = doc.session_id
    broken = [
        (doc.model_copy(update={"messages": [*doc.messages, doc.messages[0]]}), "messages[2].id"),
        (doc.model_copy(update={"messages": []}), "execution_log[0].message_id: no message"),
        (
            doc.model_copy(update={"state": doc.state.model_copy(update={"state": "finished"})}),
            "state.stop_reason: a finished session has the reason it stopped",
        ),
    ]

    async def check(store: SessionStore) -> None:
        for bad, says in broken:
            with pytest.raises(UsageError) as info:
                await store.import_document(bad)
            assert str(info.value).startswith(f"session {sid}: damaged session file: {says}")
            assert not await store.has(sid)  # nothing stored
        await store.import_document(doc)
        assert len((await store.load(sid)).messages) == 2

    if kind == "memory":
        await check(InMemoryStore())
    else:
        async with SqliteStore(tmp_path / "rolecall.db") as store:
            await check(store)


SCRIPTED = """\
name: three
topic: damaged files
model: scripted
roles:
  - {id: a, script: ["a says {n}"]}
  - {id: b, script: ["b says {n}"]}
flow:
  steps: [{id: s, speaker: a}, {id: t, speaker: b}, {id: u, speaker: a}, {id: v, speaker: b}]
"""


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("no messages", "messages: field required"),
        ("a message twice", "messages[3].id: 'm1' is also the id of messages[0]"),
        ("finished without a reason", "state.stop_reason: a finished session has the reason"),
        ("no current step", "state.pointer.current: field required"),
    ],
)
def test_resume_of_a_damaged_session_file_exits_2_and_stores_nothing(
    data_dir: Path, tmp_path: Path, how: str, says: str
) -> None:
    world = tmp_path / "three.yaml"
    world.write_text(SCRIPTED)
    saved = tmp_path / "s.json"
    made = run_cli(
        "run", str(world), "--mode", "step", "--session-file", str(saved), stdin="\n\n\n"
    )
    assert made.returncode == 0, made.stderr
    doc = json.loads(saved.read_text())
    assert [m["id"] for m in doc["messages"]] == ["m1", "m2", "m3"]
    DAMAGES[how][0](doc)
    saved.write_text(json.dumps(doc))
    fresh = tmp_path / "fresh"
    result = run_cli("resume", "s.json", "--data-dir", str(fresh), cwd=tmp_path)
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert f"rolecall: s.json: damaged session file: {says}" in result.stderr
    assert "Traceback" not in result.stderr and "already finished" not in result.stderr
    if (fresh / "rolecall.db").exists():
        with sqlite3.connect(fresh / "rolecall.db") as db:
            assert db.execute("SELECT count(*) FROM sessions").fetchone() == (0,)
