"""`rolecall sessions list` as cli.md words it: newest first, its columns, one JSON array.

The store is written by hand here, so every figure (dates that tie, tokens, costs known
and unknown, a batch, a session without messages) is known exactly.
"""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from rolecall.session.state import TranscriptMessage
from rolecall.storage.schema import MIGRATIONS, SCHEMA_VERSION
from tests.manage import call

KEYS = [
    *("session_id", "world", "title", "status", "stop_reason", "pause_reason", "messages"),
    *("input_tokens", "output_tokens", "cost_usd", "started", "updated", "preview", "batch"),
]
HUMAN = {"sender": "human", "kind": "human"}
AGENT = {"sender": "ann", "kind": "agent"}

# (id, state, created, updated, messages as (who, content, input, output, cost))
SESSIONS: list[tuple[str, str, str, str, list[tuple[dict[str, str], str, int, int, Any]]]] = [
    (
        "s-batch",
        "finished",
        "2026-01-01T10:00:00+00:00",
        "2026-01-01T12:00:00+00:00",
        [
            (HUMAN, "what about   tides?", 0, 0, None),
            (AGENT, "the moon", 100, 20, 0.001),
            (AGENT, "and the sun", 1204, 87, 0.002),
        ],
    ),
    # same last update: the one started later first
    ("s-tie-a", "running", "2026-01-02T08:00:00+00:00", "2026-01-02T09:00:00+00:00", []),
    ("s-tie-b", "running", "2026-01-02T07:00:00+00:00", "2026-01-02T09:00:00+00:00", []),
    # same update and start: by id, the greater first
    ("s-same-1", "paused", "2026-01-03T07:00:00+00:00", "2026-01-03T09:00:00+00:00", []),
    ("s-same-2", "paused", "2026-01-03T07:00:00+00:00", "2026-01-03T09:00:00+00:00", []),
    ("s-human", "paused", "2026-01-04T07:00:00+00:00", "2026-01-04T09:00:00+00:00", []),
    (
        "s-unpriced",
        "finished",
        "2026-01-05T07:00:00+00:00",
        "2026-01-05T09:00:00+00:00",
        [(AGENT, "a model without prices", 10, 5, None)],
    ),
    ("s-empty", "created", "2026-01-06T07:00:00+00:00", "2026-01-06T07:00:00+00:00", []),
]
NEWEST_FIRST = [
    "s-unpriced",
    "s-human",
    "s-same-2",
    "s-same-1",
    "s-tie-a",
    "s-tie-b",
    "s-batch",
]  # s-empty has no message: listed with --all only


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = tmp_path_factory.mktemp("list") / "home"
    data.mkdir()
    with sqlite3.connect(data / "rolecall.db") as db:
        for script in MIGRATIONS:
            db.executescript(script)
        db.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
        for sid, state, created, updated, messages in SESSIONS:
            if sid in ("s-tie-a", "s-tie-b", "s-same-1", "s-same-2", "s-human"):
                messages = [(HUMAN, f"hello from {sid}", 0, 0, None)]
            pause = {"pause_reason": "end_of_input"} if state == "paused" else {}
            db.execute(
                "INSERT INTO sessions (id, world_name, title, world_json, state, stop_reason, "
                "state_json, created_at, updated_at) VALUES (?, 'pair', 'A pair', '', ?, ?, ?, "
                "?, ?)",
                (
                    sid,
                    state,
                    "flow_end" if state == "finished" else None,
                    json.dumps(pause),
                    created,
                    updated,
                ),
            )
            db.execute(
                "INSERT INTO session_worlds VALUES (?, ?)", (sid, json.dumps({"topic": "pairs"}))
            )
            for idx, (who, content, tin, tout, cost) in enumerate(messages):
                message = TranscriptMessage.model_validate(
                    {
                        **who,
                        "id": f"m{idx + 1}",
                        "content": content,
                        "input_tokens": tin,
                        "output_tokens": tout,
                        "cost_usd": cost,
                        "ts": datetime(2026, 1, 1, tzinfo=UTC),
                    }
                )
                db.execute(
                    "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                    (sid, idx, message.id, message.sender, message.model_dump_json()),
                )
        db.execute("INSERT INTO batches VALUES ('sweep', '{}', '2026-01-01T10:00:00+00:00')")
        db.execute("INSERT INTO batch_runs VALUES ('sweep', 1, 's-batch', NULL)")
    return data


def listing(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> list[dict[str, Any]]:
    code, out, err = call(capsys, "sessions", "list", "--json", "--data-dir", str(data), *args)
    assert code == 0, err
    rows = json.loads(out)  # one JSON document: an array
    assert isinstance(rows, list)
    return rows


def table(capsys: pytest.CaptureFixture[str], data: Path, *args: str) -> list[list[str]]:
    """The table's lines cut into cells (cells never hold two spaces in a row)."""
    code, out, err = call(capsys, "sessions", "list", "--data-dir", str(data), *args)
    assert code == 0, err
    return [re.split(r" {2,}", line.strip()) for line in out.splitlines()]


def test_newest_first_by_update_then_start_then_id(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert [r["session_id"] for r in listing(capsys, data)] == NEWEST_FIRST
    assert [r["session_id"] for r in listing(capsys, data, "--all")] == ["s-empty", *NEWEST_FIRST]
    assert [row[0] for row in table(capsys, data)[1:]] == NEWEST_FIRST


def test_limit_keeps_the_newest(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert [r["session_id"] for r in listing(capsys, data, "--limit", "3")] == NEWEST_FIRST[:3]
    assert [
        r["session_id"] for r in listing(capsys, data, "--status", "running", "--limit", "1")
    ] == ["s-tie-a"]


def test_the_json_objects_hold_the_specs_keys_and_the_sessions_totals(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = {r["session_id"]: r for r in listing(capsys, data, "--all")}
    assert all(list(r) == KEYS for r in rows.values())
    assert rows["s-batch"] == {
        "session_id": "s-batch",
        "world": "pair",
        "title": "A pair",
        "status": "finished",
        "stop_reason": "flow_end",
        "pause_reason": None,
        "messages": 3,
        "input_tokens": 1304,
        "output_tokens": 107,
        "cost_usd": pytest.approx(0.003),
        "started": "2026-01-01T10:00:00+00:00",
        "updated": "2026-01-01T12:00:00+00:00",
        "preview": "what about   tides?",
        "batch": "sweep",
    }
    assert rows["s-human"]["status"] == "paused" and rows["s-human"]["cost_usd"] == 0
    assert rows["s-human"]["pause_reason"] == "end_of_input"  # why, as the table shows it
    assert rows["s-human"]["preview"] == "hello from s-human"
    assert rows["s-unpriced"]["cost_usd"] is None  # an agent message of unknown cost
    assert rows["s-unpriced"]["preview"] == "pairs"  # no human message: the topic
    empty = rows["s-empty"]
    assert (empty["messages"], empty["input_tokens"], empty["output_tokens"]) == (0, 0, 0)
    assert empty["cost_usd"] is None and empty["batch"] is None


def test_the_table(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    header, *rows = table(capsys, data, "--all")
    assert header == [
        *("ID", "WORLD", "TITLE", "STATUS", "STOP", "MSGS", "TOKENS", "COST", "PREVIEW")
    ]
    cells = {row[0]: row for row in rows}
    assert cells["s-batch"] == [
        *("s-batch", "pair", "A pair", "finished", "flow_end", "3", "↑1,304 ↓107", "$0.003000"),
        "what about tides?",
    ]
    assert cells["s-human"][3:8] == ["paused (end_of_input)", "-", "1", "↑0 ↓0", "$0"]
    assert cells["s-unpriced"][7] == "unknown"
    assert cells["s-empty"][3:9] == ["created", "-", "0", "-", "-", "pairs"]


def test_batch_filters_before_the_limit(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (row,) = listing(capsys, data, "--batch", "sweep", "--limit", "1")
    assert row["session_id"] == "s-batch" and row["batch"] == "sweep"
    code, _, err = call(capsys, "sessions", "list", "--batch", "nope", "--data-dir", str(data))
    assert code == 2 and "no batch named 'nope' (batches: sweep)" in err


def test_nothing_to_list_is_an_empty_array(
    data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert listing(capsys, data, "--world", "nobody") == []
    assert listing(capsys, tmp_path / "nothing-here") == []
    assert not (tmp_path / "nothing-here").exists()
    code, out, _ = call(capsys, "sessions", "list", "--world", "nobody", "--data-dir", str(data))
    assert code == 0 and out.startswith("no sessions match in ")


def test_the_repl_completes_the_newest_first(data: Path) -> None:
    from rolecall.storage.catalog import recent_ids

    assert recent_ids(data / "rolecall.db", limit=2) == [
        ("s-unpriced", "pairs"),
        ("s-human", "hello from s-human"),
    ]


def test_the_json_objects_are_the_shared_session_summary(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One shape for every session list: the CLI's objects validate as SessionSummary,
    the model the web view's GET /api/sessions is to give too."""
    from rolecall.storage.catalog import SessionSummary

    for row in listing(capsys, data, "--all"):
        assert SessionSummary.model_validate(row).model_dump() == row
