"""--record/--replay on every command that runs a world: chat, batch, consensus, study.

Each records on the offline model into the data dir's default store, then the store is
doctored (the last recorded answer's chunks replaced: an earlier one would change the
requests after it) and replayed: the replayed transcript is the recorded one with that
answer changed, which only the store can have said.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.faults import Cli
from tests.replay.test_replay_cli import cli, transcript

__all__ = ["cli"]  # the fixture: the net guard, a data dir of its own

DOCTORED = "Doctored in the replay store."


def doctor(store: Path) -> dict[str, Any]:
    """Replace the last recorded call's chunks; that record."""
    lines = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert lines, f"nothing recorded in {store}"
    lines[-1]["chunks"] = ["Doctored ", "in the replay ", "store."]
    store.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    return dict(lines[-1])


def expect_replayed(recorded: str, replayed: str, role: str) -> None:
    before, after = transcript(recorded), transcript(replayed)
    assert len(after) == len(before) > 1
    changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
    assert changed, "the replay did not serve the store's answer"
    first = changed[0]
    assert after[first][1] == role and after[first][2] == DOCTORED
    assert after[:first] == before[:first]


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        (
            ("chat", str(ROOT / "worlds/panel")),
            "@historian what happened in 1995?\n@planner and now?\n",
        ),
        (("consensus", "Should we plant trees?", "--max-rounds", "2"), None),
        (("study", str(ROOT / "worlds/study/notes.md"), "--max-turns", "4"), None),
    ],
    ids=["chat", "consensus", "study"],
)
def test_a_command_records_to_the_data_dir_and_replays_the_store(
    cli: Cli, args: tuple[str, ...], stdin: str | None
) -> None:
    recorded = cli.run(*args, "--json", "--record", stdin=stdin)
    assert recorded.returncode == 0, recorded.stderr
    record = doctor(cli.home / "replay.jsonl")  # the default store: the data dir's
    replayed = cli.run(*args, "--json", "--replay", stdin=stdin)
    assert replayed.returncode == 0, replayed.stderr
    expect_replayed(recorded.stdout, replayed.stdout, record["role"])


def test_batch_records_every_run_and_replays_them(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "batch.jsonl"
    args = ("batch", str(ROOT / "worlds/tutoring"), "--runs", "2", "--replay-file", str(store))
    recorded = cli.run(*args, "--record", "--name", "first")
    assert recorded.returncode == 0, recorded.stderr
    lines = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    assert len(lines) == 16  # both runs' 8 calls: the same 8 requests, asked twice
    assert len({r["key"] for r in lines}) == 8 and sorted({r["n"] for r in lines}) == [0, 1]
    doctor(store)
    replayed = cli.run(*args, "--replay", "--name", "second")
    assert replayed.returncode == 0, replayed.stderr
    with sqlite3.connect(cli.home / "rolecall.db") as db:
        bodies = db.execute(
            "SELECT r.batch, json_extract(m.body, '$.content') FROM batch_runs AS r "
            "JOIN messages AS m ON m.session_id = r.session_id WHERE m.idx = 7"
        ).fetchall()
    lasts: dict[str, set[str]] = {batch: set() for batch, _ in bodies}
    for batch, content in bodies:
        lasts[batch].add(content)
    # the doctored call was one run's (occurrence 1 of its request): that run says it
    assert DOCTORED in lasts["second"] and DOCTORED not in lasts["first"]
    assert lasts["second"] - {DOCTORED} <= lasts["first"]


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("chunks", "Doctored", r"'chunks' must be a list, got a string"),
        (
            "chunks",
            ["ok", 7],
            r"'chunks' must be a list of strings \(or tool calls\), got a number at chunks\[1\]",
        ),
        ("usage", {"input_tokens": 9}, r"'usage' has no 'output_tokens'"),
        ("n", -1, r"'n' must be a whole number of at least 0, got a number"),
    ],
    ids=["chunks-a-string", "chunk-not-text", "usage-short", "n-negative"],
)
def test_a_malformed_recording_is_refused_naming_the_file_and_line(
    cli: Cli, tmp_path: Path, field: str, value: object, says: str
) -> None:
    """A hand-edited ``"chunks": "text"`` was replayed one character per chunk; now any
    recording whose fields have the wrong type stops the command before it runs (exit 2)."""
    store = tmp_path / "calls.jsonl"
    args = ("run", str(ROOT / "worlds/tutoring"), "--replay-file", str(store), "--json")
    recorded = cli.run(*args, "--record")
    assert recorded.returncode == 0, recorded.stderr
    lines = [json.loads(line) for line in store.read_text(encoding="utf-8").splitlines()]
    lines[1][field] = value
    store.write_text("".join(json.dumps(r) + "\n" for r in lines), encoding="utf-8")
    replayed = cli.run(*args, "--replay")
    assert replayed.returncode == 2, replayed.stderr
    assert "Traceback" not in replayed.stderr
    assert re.search(rf"calls\.jsonl, line 2: not a recording: {says}", replayed.stderr), (
        replayed.stderr
    )
    assert '"type": "chunk"' not in replayed.stdout and '"type":"chunk"' not in replayed.stdout
