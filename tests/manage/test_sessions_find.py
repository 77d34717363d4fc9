"""Finding sessions again: previews, filters, full-text search, id prefixes and `last`."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.cli.test_run_cli import rolecall


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    """Three panel chats (distinct first questions) and a finished classroom run."""
    home = tmp_path_factory.mktemp("find") / "home"
    env = {"ROLECALL_HOME": str(home)}
    for question in (
        "How do heat islands form in Lagos?",
        "Which trees shade streets best?",
        "Should Lagos build more canals?",
    ):
        chat = rolecall("chat", "panel", stdin=question + "\n", env=env)
        assert chat.returncode == 0, chat.stderr
    ran = rolecall("run", "classroom", "-q", env=env)
    assert ran.returncode == 0, ran.stderr
    with sqlite3.connect(home / "rolecall.db") as db:
        ids = [sid for (sid,) in db.execute("SELECT id FROM sessions ORDER BY created_at")]
    return home, ids


def listing(home: Path, *args: str) -> list[dict[str, Any]]:
    """``sessions list --json ARGS``: one JSON array (cli.md)."""
    result = rolecall("sessions", "list", "--json", *args, env={"ROLECALL_HOME": str(home)})
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert isinstance(rows, list)
    return rows


def listed_ids(home: Path, *args: str) -> list[str]:
    return [r["session_id"] for r in listing(home, *args)]


def test_the_list_previews_the_first_question_or_the_topic(home: tuple[Path, list[str]]) -> None:
    path, ids = home
    table = rolecall("sessions", "list", env={"ROLECALL_HOME": str(path)}).stdout
    assert table.splitlines()[0].split() == [
        *("ID", "WORLD", "TITLE", "STATUS", "STOP", "MSGS", "TOKENS", "COST", "PREVIEW")
    ]
    assert "Which trees shade streets best?" in table
    assert "How do plants turn light into sugar?" in table  # classroom: its topic
    rows = listing(path)
    assert [r["session_id"] for r in rows] == ids[::-1]  # newest first
    assert rows[-1]["preview"] == "How do heat islands form in Lagos?"
    assert rows[-1]["status"] == "paused" and rows[-1]["stop_reason"] is None
    assert "paused (end_of_input)" in table  # the reason: in the table's STATUS


def test_the_json_is_one_array_of_the_specs_keys_with_the_sessions_totals(
    home: tuple[Path, list[str]],
) -> None:
    path, _ = home
    rows = listing(path)
    for row in rows:
        assert list(row) == [
            *("session_id", "world", "title", "status", "stop_reason", "pause_reason", "messages"),
            *("input_tokens", "output_tokens", "cost_usd", "started", "updated", "preview"),
            "batch",
        ]
        assert row["batch"] is None and row["cost_usd"] == 0  # the offline model is free
        assert row["started"] <= row["updated"]
        # the session's token totals, as `sessions show` sums them
        shown = rolecall("sessions", "show", row["session_id"], env={"ROLECALL_HOME": str(path)})
        total = next(line for line in shown.stdout.splitlines() if line.startswith("tokens: "))
        assert total.startswith(
            f"tokens: ↑{row['input_tokens']:,} ↓{row['output_tokens']:,} in "
            f"{row['messages']} messages"
        )
        assert row["input_tokens"] > 0 and row["output_tokens"] > 0
    classroom = rows[0]
    assert (classroom["world"], classroom["title"]) == ("classroom", "A lesson on photosynthesis")
    assert (classroom["status"], classroom["stop_reason"]) == ("finished", "flow_end")
    updated = [r["updated"] for r in rows]
    assert updated == sorted(updated, reverse=True)


def test_filters_world_status_search_and_limit(home: tuple[Path, list[str]]) -> None:
    path, ids = home
    assert listed_ids(path, "--world", "classroom") == [ids[3]]
    assert listed_ids(path, "--status", "paused") == ids[2::-1]
    assert listed_ids(path, "--search", "lagos") == [ids[2], ids[0]]
    assert listed_ids(path, "--search", "canals LAGOS") == [ids[2]]
    # FTS5 syntax in TEXT is taken as words, never as a query (no error, no operator)
    assert listing(path, "--search", 'trees OR "(* NEAR') == []
    assert listed_ids(path, "--limit", "2") == [ids[3], ids[2]]  # the two newest
    assert listed_ids(path, "--status", "paused", "--limit", "1") == [ids[2]]
    table = rolecall("sessions", "list", "--limit", "1", env={"ROLECALL_HOME": str(path)})
    assert [line.split()[0] for line in table.stdout.splitlines()] == ["ID", ids[3]]
    bad = rolecall("sessions", "list", "--limit", "0", env={"ROLECALL_HOME": str(path)})
    assert bad.returncode == 2 and "--limit: must be a whole number" in bad.stderr


def test_last_and_id_prefixes_wherever_an_id_is_taken(home: tuple[Path, list[str]]) -> None:
    path, ids = home
    env = {"ROLECALL_HOME": str(path)}
    shown = rolecall("sessions", "show", "last", env=env)
    assert shown.returncode == 0 and f"session {ids[3]}" in shown.stdout
    unique = ids[1][
        : next(n for n in range(8, 23) if sum(i.startswith(ids[1][:n]) for i in ids) == 1)
    ]
    trace = rolecall("sessions", "export", unique, "--format", "md", env=env)
    assert trace.returncode == 0 and "Which trees shade streets best?" in trace.stdout
    ambiguous = rolecall("sessions", "show", ids[0][:4], env=env)
    assert ambiguous.returncode == 2
    assert f"is ambiguous: {len(ids)} sessions start with it" in ambiguous.stderr
    resumed = rolecall("resume", "last", env=env)
    assert resumed.returncode == 0 and f"session {ids[3]} already finished" in resumed.stderr


def test_a_store_of_schema_version_3_gets_the_search_table(tmp_path: Path) -> None:
    from rolecall.storage.schema import MIGRATIONS

    home = tmp_path / "home"
    home.mkdir()
    with sqlite3.connect(home / "rolecall.db") as db:
        for number in range(3):
            db.executescript(MIGRATIONS[number])
        db.execute("PRAGMA user_version = 3")
        db.execute(
            "INSERT INTO sessions (id, world_name, world_json, state, state_json, created_at, "
            "updated_at) VALUES ('old-1', 'w', '{}', 'paused', '{}', 'x', 'x')"
        )
        db.execute(
            "INSERT INTO messages VALUES ('old-1', 0, 'm1', 'human', ?)",
            (json.dumps({"content": "an old question about tides"}),),
        )
    assert listed_ids(home, "--search", "tides") == ["old-1"]
