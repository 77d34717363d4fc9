"""``rolecall compare``: real processes on a real data directory (docs/compare.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_run_cli import rolecall

SCRIPTED_TEACHER = """\
name: lesson
title: A short lesson
topic: Why is the sky blue?
model: offline
roles:
  - template: teacher
    script:
      - "Sunlight scatters off air molecules, and blue light scatters most."
      - "So the sky looks blue from every direction."
  - template: student
flow:
  steps:
    - id: explain
      speaker: teacher
      reply_to: none
    - id: ask
      speaker: student
      reply_to: {role: teacher}
    - id: answer
      speaker: teacher
      reply_to: {role: student}
"""


def session_of(*args: str) -> str:
    out = rolecall(*args, "--json")
    assert out.returncode == 0, out.stderr
    return str(json.loads(out.stdout.splitlines()[0])["session_id"])


def compared(*args: str) -> dict[str, Any]:
    out = rolecall("compare", *args, "--json")
    assert out.returncode == 0, out.stderr
    data: dict[str, Any] = json.loads(out.stdout)
    return data


def test_a_fork_and_its_parent_first_differ_at_the_fork_point(data_dir: Path) -> None:
    parent = session_of("run", "worlds/tutoring")
    fork = rolecall(
        "sessions", "fork", parent, "--at", "m4", "--edit", "UNDERSTOOD, thank you", "-q"
    ).stdout.strip()
    assert rolecall("resume", fork, "-q").returncode == 0
    data = compared(parent, fork[:17])  # a prefix names the fork
    diff = data["first_difference"]
    assert diff["position"] == 4 and diff["what"] == "content"
    assert diff["a"]["message_id"] == diff["b"]["message_id"] == "m4"
    assert diff["a"]["sender"] == diff["b"]["sender"] == "learner"
    assert diff["b"]["content"] == "UNDERSTOOD, thank you"
    added = [d["text"] for d in diff["word_diff"] if d["op"] == "added"]
    assert "UNDERSTOOD, thank you" in " ".join(added)
    # the same messages before the fork point, word for word
    shown = {r["session_id"]: r for r in data["runs"]}
    assert set(shown) == {parent, fork}
    assert shown[parent]["turns"] > shown[fork]["turns"]  # the edit ended the loop early
    assert shown[fork]["stop_reason"] == "flow_end"
    text = rolecall("compare", parent, fork)
    assert text.returncode == 0, text.stderr
    assert f"first difference of {parent} and {fork}: message 4 (content)" in text.stdout
    assert "{+UNDERSTOOD," in text.stdout


def test_two_runs_of_a_batch_with_different_models(data_dir: Path, tmp_path: Path) -> None:
    world = tmp_path / "lesson.yaml"
    world.write_text(SCRIPTED_TEACHER)
    out = rolecall(
        "batch",
        str(world),
        "--vary",
        "role.teacher.model=scripted,offline",
        "--name",
        "models",
        "-q",
    )
    assert out.returncode == 0, out.stderr
    data = compared("--batch", "models")
    assert data["batch"] == "models"
    assert [g["values"] for g in data["groups"]] == [
        {"role.teacher.model": "scripted"},
        {"role.teacher.model": "offline"},
    ]
    runs = data["runs"]
    assert [r["values"]["role.teacher.model"] for r in runs] == ["scripted", "offline"]
    assert runs[0]["models"] == ["scripted", "offline"] and runs[1]["models"] == ["offline"]
    diff = data["first_difference"]
    assert data["compared"] == [runs[0]["session_id"], runs[1]["session_id"]]
    assert diff["position"] == 1 and diff["a"]["sender"] == "teacher"
    assert diff["a"]["content"].startswith("Sunlight scatters")
    assert not diff["b"]["content"].startswith("Sunlight scatters")
    text = rolecall("compare", "--batch", "models").stdout
    assert "role.teacher.model" in text.splitlines()[0]
    assert "[-Sunlight scatters" in text


def test_identical_runs_and_the_figures(data_dir: Path) -> None:
    a = session_of("run", "classroom", "--max-turns", "3")
    b = session_of("run", "classroom", "--max-turns", "5")
    data = compared(a, b)
    one, two = data["runs"]
    assert (one["turns"], two["turns"]) == (3, 5)
    assert one["stop_reason"] == "max_turns" and one["cost_usd"] == 0.0
    assert 0 < one["input_tokens"] < two["input_tokens"]
    # the offline model is deterministic: the first three messages are the same
    diff = data["first_difference"]
    assert diff["position"] == 4 and diff["what"] == "length"
    assert diff["a"]["message_id"] is None and diff["b"]["message_id"] == "m4"
    same = session_of("run", "classroom", "--max-turns", "3")
    assert compared(a, same)["first_difference"] is None
    assert "the same messages" in rolecall("compare", a, same).stdout


def test_a_missing_session_is_named(data_dir: Path) -> None:
    a = session_of("run", "classroom", "--max-turns", "1")
    out = rolecall("compare", a, "20990101-000000-abcdef")
    assert out.returncode == 2
    assert "no session '20990101-000000-abcdef'" in out.stderr
    assert "Traceback" not in out.stderr
    one = rolecall("compare", a)
    assert one.returncode == 2 and "two or more sessions" in one.stderr
    batch = rolecall("compare", "--batch", "nope")
    assert batch.returncode == 2 and "no batch 'nope'" in batch.stderr
