"""The study engine's per-turn history (issue 15): one `study/turn` record per turn, the
learner's too (intent, confidence, whether a reallocation came of it, the unit's role
scores, its queue before and after), and `sessions trace` shows them as a table."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

from tests.cli.test_run_cli import rolecall

WORLD = Path(__file__).resolve().parents[2] / "worlds" / "study"


def records(stdout: str) -> list[dict[str, object]]:
    events = [json.loads(line) for line in stdout.splitlines()]
    return [e for e in events if e["type"] == "mode" and e["name"] == "turn"]


def test_every_turn_has_its_record_and_the_trace_shows_them(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    said = "Can you give me an example? An example with numbers, for example?\n/next\n/next\n"
    done = rolecall("chat", str(WORLD), "--mode", "step", "--json", "--data-dir", data, stdin=said)
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    messages = [e for e in events if e["type"] == "message"]
    found = [e["data"] for e in records(done.stdout)]
    assert [r["message_id"] for r in found] == [m["message_id"] for m in messages]
    learner = found[0]
    assert learner["speaker"] == "human" and learner["intent"] == "example_request"
    assert learner["confidence"] == 1.0
    decided = [e for e in events if e.get("name") == "reallocation"]
    assert learner["reallocation"] is bool(decided)
    assert set(learner["scores"]) == {  # type: ignore[arg-type]
        "explainer", "challenger", "summarizer", "example_generator", "misconception_spotter"
    }  # fmt: skip
    for before, after in itertools.pairwise(found[1:]):
        assert before["queue_after"] == after["queue_before"] or after["unit"] != before["unit"]
    first = found[1]
    assert first["intent"] is None and first["queue_before"][0] == first["speaker"]  # type: ignore[index]
    trace = rolecall("sessions", "trace", "last", "--data-dir", data)
    assert trace.returncode == 0, trace.stderr
    assert "study turns (intent, reallocation, the unit's queue):" in trace.stdout
    assert "m1       human" in trace.stdout and "example_request 1.00" in trace.stdout


def test_the_plan_event_reports_each_units_cohesion(tmp_path: Path) -> None:
    doc = tmp_path / "earth.md"
    doc.write_text(
        "# Earth\n\n"
        "Glaciers carve valleys as the glacier ice grinds bedrock; glacier valleys are wide.\n\n"
        "A glacier moving downhill plucks bedrock, and glacier ice leaves valleys shaped like U.\n\n"
        "Moraines mark where glacier ice stopped, piling bedrock debris along valleys.\n\n"
        "Volcanoes erupt when magma pressure rises; volcanic magma carries dissolved gases.\n\n"
        "Magma chambers feed volcanoes, and gases escaping the magma drive explosive eruptions.\n\n"
        "Lava from volcanoes cools into basalt when magma reaches the surface during eruptions.\n\n"
        "Volcanoes erupt when magma pressure rises, and the magma gases expand violently.\n",
        encoding="utf-8",
    )
    done = rolecall("study", str(doc), "--json", "--max-turns", "1", "--data-dir", str(tmp_path))
    assert done.returncode == 0, done.stderr
    events = [json.loads(line) for line in done.stdout.splitlines()]
    (plan,) = [e["data"] for e in events if e["type"] == "mode" and e["name"] == "plan"]
    # 7 paragraphs: cut where the topic changes (3 + 4), not balanced (4 + 3)
    assert [(u["id"], u["paragraphs"]) for u in plan["units"]] == [("u1", 3), ("u2", 4)]
    assert all(0.3 < u["cohesion"] <= 1.0 for u in plan["units"])
