"""Citations [kN] shown with their source: the terminal, sessions show, md and html exports."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.test_run_cli import rolecall
from tests.knowledge.test_retrieval import make_world


def run_and_id(world: str) -> tuple[str, str]:
    result = rolecall("run", world, env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    found = re.search(r"session (\S+) · export it", result.stdout)
    assert found is not None
    return result.stdout, found.group(1)


def test_terminal_and_exports_show_each_cited_source(tmp_path: Path, data_dir: Path) -> None:
    world = str(make_world(tmp_path, "offline"))
    out, sid = run_and_id(world)
    answer = out.split("professor → student [step answer]")[1].splitlines()
    assert "According to [k1]: Chlorophyll absorbs red and blue light" in answer[1]
    assert answer[2:4] == ["  [k1] docs/botany.md:1-5", "  [k2] docs/botany.md:7-10"]
    student = out.split("student [step ask]")[1].split("professor")[0]
    assert "[k" not in student  # a role without knowledge: no sources

    shown = rolecall("sessions", "show", sid).stdout
    assert "    [k1] docs/botany.md:1-5\n    [k2] docs/botany.md:7-10\n" in shown

    rolecall("sessions", "export", sid, "--format", "md", "--out", str(tmp_path / "s.md"))
    md = (tmp_path / "s.md").read_text()
    assert "Sources:\n\n- \\[k1\\] docs/botany.md:1-5\n- \\[k2\\] docs/botany.md:7-10\n" in md

    rolecall("sessions", "export", sid, "--format", "html", "--out", str(tmp_path / "s.html"))
    html = (tmp_path / "s.html").read_text()
    assert '<a class="cite" href="#m2-k1">[k1]</a>' in html
    assert (
        '<ol class="sources"><li id="m2-k1">[k1] <code>docs/botany.md:1-5</code></li>'
        '<li id="m2-k2">[k2] <code>docs/botany.md:7-10</code></li></ol>'
    ) in html


def test_a_citation_the_turn_was_not_given_is_left_alone(tmp_path: Path, data_dir: Path) -> None:
    world = make_world(tmp_path, "scripted")
    text = (world / "world.yaml").read_text()
    text = text.replace("model: scripted\n  - id: professor", "model: scripted\n  - id: professor")
    text = text.replace("    model: scripted\n", "    model: scripted\n", 1)
    text = text.replace(
        "    knowledge_top_k: 2\n    model: scripted",
        '    knowledge_top_k: 2\n    model: scripted\n    script: ["See [k1] and [k9]."]',
    )
    (world / "world.yaml").write_text(text)
    out, sid = run_and_id(str(world))
    assert "See [k1] and [k9].\n  [k1] docs/botany.md:1-5\n↑" in out
    rolecall("sessions", "export", sid, "--format", "md", "--out", str(tmp_path / "s.md"))
    md = (tmp_path / "s.md").read_text()
    assert "- \\[k1\\] docs/botany.md:1-5\n" in md and "k9\\] docs" not in md
