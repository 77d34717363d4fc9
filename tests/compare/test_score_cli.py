"""``rolecall score``: scores stored beside sessions, never in them (docs/compare.md)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from tests.cli.test_run_cli import rolecall
from tests.compare.test_compare_cli import SCRIPTED_TEACHER, session_of


def scored(*args: str) -> list[dict[str, Any]]:
    out = rolecall("score", *args, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_offline_scores_twice_the_same_and_both_are_kept(data_dir: Path) -> None:
    sid = session_of("run", "classroom")
    before = rolecall("sessions", "export", sid, "--format", "json").stdout
    first = scored(sid, "--judge", "offline")
    second = scored(sid, "--judge", "offline")
    assert [r["number"] for r in first + second] == [1, 2]
    strip = ("number", "scored_at")
    a = json.dumps({k: v for k, v in first[0].items() if k not in strip})
    b = json.dumps({k: v for k, v in second[0].items() if k not in strip})
    assert a == b  # byte-identical scores, judge, model and comment
    assert first[0]["judge"] == "offline" and first[0]["model"] == "offline"
    assert 0 <= first[0]["scores"]["score"] <= 10
    # the session itself is unchanged: its document (transcript, log, state) is the same
    assert rolecall("sessions", "export", sid, "--format", "json").stdout == before
    db = sqlite3.connect(data_dir / "rolecall.db")
    rows = db.execute("SELECT session_id, number, judge FROM scores").fetchall()
    db.close()
    assert rows == [(sid, 1, "offline"), (sid, 2, "offline")]
    shown = rolecall("sessions", "show", sid).stdout
    assert shown.count("score #") == 2 and "score #2 offline: score=" in shown
    compared = json.loads(rolecall("compare", sid, sid, "--json").stdout)
    assert [s["number"] for s in compared["runs"][0]["scores"]] == [1, 2]


def test_a_world_judge_scores_on_its_criteria(data_dir: Path) -> None:
    sid = session_of("run", "classroom", "--max-turns", "2")
    # the courtroom's judge: its block's criteria; its scripted model's first line
    (item,) = scored(sid, "--judge", "courtroom")
    assert item["judge"] == "courtroom" and item["model"] == "scripted"
    assert item["scores"] == {"plaintiff_case": 4.0}
    assert item["comment"].startswith("A duty of care")
    library = scored(sid, "--judge", "judge")[0]  # the library's judge role, offline
    assert library["judge"] == "judge" and set(library["scores"]) == {"score"}


def test_bad_judges_and_sessions_say_what_is_wrong(data_dir: Path) -> None:
    sid = session_of("run", "classroom", "--max-turns", "1")
    out = rolecall("score", sid, "--judge", "nosuch")
    assert out.returncode == 2 and "no judge 'nosuch'" in out.stderr
    out = rolecall("score", sid, "--judge", "classroom")
    assert out.returncode == 2 and "world 'classroom' (classroom) has no judge role" in out.stderr
    out = rolecall("score", sid, "20990101-000000-abcdef", "--judge", "offline")
    assert out.returncode == 2 and "no session '20990101-000000-abcdef'" in out.stderr
    # nothing stored for the session that was found either: all are read first
    assert "score #" not in rolecall("sessions", "show", sid).stdout


def test_a_judge_that_never_answers_in_json_stores_nothing(data_dir: Path, tmp_path: Path) -> None:
    sid = session_of("run", "classroom", "--max-turns", "1")
    world = tmp_path / "prose.yaml"
    world.write_text(
        "name: prose\nmodel: offline\nroles:\n  - template: judge\n    model: scripted\n"
        "    script: ['I would rather not say.', 'Still no.']\n"
    )
    out = rolecall("score", sid, "--judge", str(world))
    assert out.returncode == 1
    assert "gave no valid verdict on session" in out.stderr and "nothing was stored" in out.stderr
    assert "Traceback" not in out.stderr


def test_scoring_is_recorded_and_replayed(data_dir: Path) -> None:
    sid = session_of("run", "classroom", "--max-turns", "2")
    recorded = scored(sid, "--judge", "offline", "--record")
    lines = (data_dir / "replay.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["request"]["model"] == "offline"
    replayed = scored(sid, "--judge", "offline", "--replay")
    assert replayed[0]["scores"] == recorded[0]["scores"]
    # a judge whose call was never recorded: the replay refuses, and names the miss
    other = session_of("run", "classroom", "--max-turns", "3")
    out = rolecall("score", other, "--judge", "offline", "--replay")
    assert out.returncode != 0 and "Traceback" not in out.stderr


def test_batch_reports_show_the_scores(data_dir: Path, tmp_path: Path) -> None:
    world = tmp_path / "lesson.yaml"
    world.write_text(SCRIPTED_TEACHER)
    out = rolecall("batch", str(world), "--vary", "topic=Sky,Sea", "--name", "two", "-q")
    assert out.returncode == 0, out.stderr
    listed = rolecall("sessions", "list", "--batch", "two", "--json").stdout
    ids = [r["session_id"] for r in json.loads(listed)]
    values = [r["scores"]["score"] for r in scored(*ids, "--judge", "offline")]
    report = rolecall("batch", "--resume", "two")
    assert report.returncode == 0, report.stderr
    mean = round(sum(values) / 2, 3)
    assert f"scores by offline (mean of 2 runs): score={mean:g}" in report.stdout
    summary = json.loads(rolecall("batch", "--resume", "two", "--json").stdout.splitlines()[-1])
    assert summary["scores"] == {"offline": {"runs": 2, "mean": {"score": mean}}}
