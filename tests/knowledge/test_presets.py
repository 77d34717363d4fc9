"""Debate context and the study preset's knowledge reach every role through retrieval."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_run_cli import rolecall

BRIEF = """# Traffic in the centre

Car traffic in the city centre fell by 30 percent after the congestion charge was
introduced in 2019. Nitrogen dioxide readings improved by 18 percent.

# Shops

Retailers in the centre reported a 5 percent drop in footfall in the first year,
recovered by the third year as pedestrian zones were added.
"""

REFS = """# Spacing effect

Spaced practice means reviewing material over several sessions separated by days;
spacing beats cramming for long-term retention.

# Retrieval practice

Testing yourself is retrieval practice: recalling an answer strengthens memory.
"""


def knowledge_events(stdout: str) -> list[dict[str, object]]:
    records = [json.loads(line) for line in stdout.splitlines()]
    return [r for r in records if r["type"] == "knowledge"]


def test_debate_context_reaches_both_debaters_and_the_moderator(
    tmp_path: Path, data_dir: Path
) -> None:
    (tmp_path / "brief.md").write_text(BRIEF)
    args = ["debate", "Cities should ban cars from their centres", "--max-turns", "2"]
    result = rolecall(*args, "--context", "brief.md", cwd=tmp_path, env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    for who in ("#1 PRO", "#2 CON", "#3 MODERATOR"):
        turn = out.split(who)[1].split("\n\n")[0]
        assert "According to [k1]: Car traffic in the city centre fell by 30 percent" in turn
        assert "  [k1] brief.md:1-4" in turn, turn
    as_json = rolecall(*args, "--context", "brief.md", "--json", cwd=tmp_path)
    assert [e["role"] for e in knowledge_events(as_json.stdout)] == ["pro", "con", "moderator"]


def test_debate_context_in_a_world_file(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "brief.md").write_text(BRIEF)
    (tmp_path / "world.yaml").write_text(
        "name: d\ntopic: Cities should ban cars from their centres\nmode: debate\n"
        "debate:\n  max_turns: 2\n  context: [docs/brief.md]\n"
    )
    result = rolecall("run", str(tmp_path), "--json")
    assert result.returncode == 0, result.stderr
    events = knowledge_events(result.stdout)
    assert [e["role"] for e in events] == ["pro", "con", "moderator"]
    assert events[0]["passages"][0]["path"] == "docs/brief.md"  # type: ignore[index]


def test_a_world_collection_named_context_is_a_problem(tmp_path: Path, data_dir: Path) -> None:
    (tmp_path / "brief.md").write_text(BRIEF)
    (tmp_path / "world.yaml").write_text(
        "name: d\ntopic: Ban cars\nmode: debate\nknowledge:\n  context:\n    paths: [brief.md]\n"
        "debate:\n  context: [brief.md]\n"
    )
    result = rolecall("run", str(tmp_path))
    assert result.returncode == 2
    assert "knowledge.context: the collection debate.context makes is named context" in (
        result.stderr
    )


def test_study_knowledge_gives_the_five_roles_reference_material(
    tmp_path: Path, data_dir: Path
) -> None:
    (tmp_path / "refs").mkdir()
    (tmp_path / "refs" / "memory.md").write_text(REFS)
    notes = (Path(__file__).parents[2] / "worlds" / "study" / "notes.md").read_text()
    (tmp_path / "notes.md").write_text(notes)
    (tmp_path / "world.yaml").write_text(
        "name: s\nmode: study\nstudy:\n  document: notes.md\n  knowledge: [refs/]\n"
    )
    result = rolecall("run", str(tmp_path), "--max-turns", "5", "--json")
    assert result.returncode == 0, result.stderr
    events = knowledge_events(result.stdout)
    assert len(events) == 5 and len({e["role"] for e in events}) == 5
    assert all(e["passages"] for e in events)
    cli = rolecall(
        "study",
        "notes.md",
        "--knowledge",
        "refs",
        "--max-turns",
        "1",
        cwd=tmp_path,
        env={"NO_COLOR": "1"},
    )
    assert cli.returncode == 0, cli.stderr
    assert "According to [k1]: " in cli.stdout and "  [k1] refs/memory.md:" in cli.stdout
