"""The shipped garden world: its experts answer from its documents and cite the passage
that answers each question, offline; the labelled questions find their passage."""

from __future__ import annotations

import json
from pathlib import Path

from rolecall.api.compose import world_folder
from rolecall.knowledge.base import KnowledgeBase
from rolecall.world.loader import load_world
from tests.cli.test_run_cli import rolecall
from tests.conftest import ROOT

QUESTIONS = ROOT / "scripts" / "knowledge_questions.jsonl"


def test_the_garden_experts_cite_the_passages_that_answer(data_dir: Path) -> None:
    result = rolecall("run", "garden", env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    botanist = out.split("botanist → gardener [step plants]")[1].split("\n\n")[0]
    assert "According to [k1]: When the oldest, lowest leaves of a plant turn yellow" in botanist
    assert "  [k1] docs/plants.md:1-9" in botanist  # "Yellowing lower leaves"
    soil = out.split("soil_scientist → gardener [step soil]")[1].split("\n\n")[0]
    assert "spread ground limestone or dolomitic lime" in soil
    assert "  [k1] docs/soil.md:10-15" in soil  # "Raising pH with lime"
    pests = out.split("entomologist → gardener [step pests]")[1].split("\n\n")[0]
    # ranked by the question, as `rolecall knowledge search garden "..."` ranks it
    assert "According to [k1]: Aphids are small sap-sucking insects" in pests
    assert "  [k1] docs/pests.md:1-9\n  [k2] docs/pests.md:11-16" in pests  # "Ladybirds"
    lines = (ROOT / "worlds" / "garden" / "docs" / "plants.md").read_text().splitlines()
    assert lines[2] == "## Yellowing lower leaves"  # the cited lines hold the answer


def test_the_labelled_questions_find_their_passage() -> None:
    world = load_world(ROOT / "worlds" / "garden").world
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines()]
    assert len(rows) >= 30
    with KnowledgeBase.open(world, None, world_folder(world)) as kb:
        found = 0
        for row in rows:
            top = kb.search(list(world.knowledge), row["question"], 4)
            found += any(p.path == row["path"] and p.heading == row["heading"] for p in top)
    assert found / len(rows) >= 0.9  # recall@4; scripts/bench.py reports it
