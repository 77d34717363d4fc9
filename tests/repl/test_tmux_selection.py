"""The REPL shows who chose each speaker on its line (issue 49, selection.md), and a
structured reply's data indented: the shipped `moderated` world and a schema role, on a
real terminal (tmux)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tests.repl.test_tmux import TMUX, Terminal, terminal

__all__ = ["TMUX", "terminal"]


def test_the_repl_says_on_each_speakers_line_who_chose_it(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("moderated")
    t.ready()
    t.type("@economist what would a four-day week cost the city?")
    t.key("Enter")
    screen = t.wait_for(lambda s: s.count("chosen by") >= 3, timeout=40)
    assert "economist → human" in screen and "· chosen by mention" in screen
    assert screen.count("· chosen by the selector (") == 2  # max_rounds 3: two more turns
    t.type("/quit")
    t.key("Enter")
    t.wait_for("EXIT=0")


def test_the_repl_shows_a_structured_reply_indented(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    world = tmp_path / "graded.yaml"
    world.write_text(
        "name: graded\nmodel: offline\ntopic: fruit trees\nroles:\n"
        "  - id: grader\n    output:\n      schema:\n        type: object\n"
        "        properties: {verdict: {type: string, enum: [apple, pear]}}\n"
        "        required: [verdict]\n",
        encoding="utf-8",
    )
    t = terminal()
    t.start(str(world))
    t.ready()
    t.type("@grader which tree?")
    t.key("Enter")
    # the whole block drawn, not only its first line (the screen is read while it draws)
    screen = t.wait_for(lambda s: '\n    "verdict": "' in s and '"\n  }\n' in s, timeout=30)
    assert '\n  {\n    "verdict": "apple"\n  }\n' in screen  # indented under the reply
    t.type("/quit")
    t.key("Enter")
    t.wait_for("EXIT=0")
