"""`rolecall knowledge index|search|list WORLD` run as a user would."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_run_cli import rolecall
from tests.knowledge.test_index import BOTANY
from tests.knowledge.test_retrieval import make_world


def test_index_search_list(tmp_path: Path, data_dir: Path) -> None:
    world = str(make_world(tmp_path, "offline"))
    first = rolecall("knowledge", "index", world)
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines()[0] == "botany: 2 files, 3 passages"
    assert "indexed 2 files (" in first.stdout and "0 unchanged" in first.stdout
    assert str(data_dir / "knowledge.db") in first.stdout
    again = rolecall("knowledge", "index", world)
    assert "indexed 0 files (0 bytes, 0 passages), 2 unchanged" in again.stdout

    found = rolecall("knowledge", "search", world, "how do ferns reproduce?", "--role", "professor")
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    assert lines[0].startswith("[k1] docs/ferns.md:1-3 (Ferns) · score ")
    assert lines[1].strip() == "# Ferns Ferns reproduce with spores."

    as_json = rolecall("knowledge", "search", world, "chlorophyll", "--json")
    out = json.loads(as_json.stdout)
    assert out["collections"] == ["botany"]
    (hit,) = out["passages"]
    assert (hit["id"], hit["path"], hit["line_start"], hit["line_end"]) == (
        "k1",
        "docs/botany.md",
        1,
        5,
    )
    assert hit["text"] == BOTANY.split("\n\n# Roots")[0]

    listed = rolecall("knowledge", "list", world)
    assert listed.stdout.splitlines()[0] == "botany (used by professor)"
    assert "docs/botany.md" in listed.stdout and "2 passages" in listed.stdout


def test_bad_input_exits_2_naming_the_problem(tmp_path: Path, data_dir: Path) -> None:
    world = str(make_world(tmp_path, "offline"))
    role = rolecall("knowledge", "search", world, "green", "--role", "student")
    assert role.returncode == 2
    assert "role 'student' has no knowledge: collections" in role.stderr
    missing = rolecall("knowledge", "search", world, "green", "--role", "nobody")
    assert missing.returncode == 2 and "no role 'nobody'" in missing.stderr
    nothing = rolecall("knowledge", "search", world, "zebra")
    assert nothing.returncode == 1 and "no passage of botany matches 'zebra'" in nothing.stderr
    (tmp_path / "docs" / "scan.pdf").write_bytes(b"\x00\x01 not a pdf")
    bad = rolecall("knowledge", "index", world)
    assert bad.returncode == 2
    assert f"{tmp_path / 'docs' / 'scan.pdf'}: not a readable PDF" in bad.stderr
    assert "Traceback" not in bad.stderr
    run = rolecall("run", world)  # the same at a run's start, before any turn
    assert run.returncode == 2 and "scan.pdf: not a readable PDF" in run.stderr
    assert "m1" not in run.stdout


def test_a_world_without_knowledge(data_dir: Path) -> None:
    result = rolecall("knowledge", "list", "classroom")
    assert result.returncode == 2
    assert "world classroom has no knowledge collections" in result.stderr
