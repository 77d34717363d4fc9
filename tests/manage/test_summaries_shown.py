"""Summaries are visible (issue 46): once a role's older messages are folded into its
running summary (``settings.context_tokens``), the transcript, `sessions show` and
`sessions trace` say so, one dimmed line each; the summary itself on request
(`sessions show --summaries`, `-v`). Real `rolecall chat` processes, piped."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall
from tests.tools.helpers import write_world

WORLD = {
    "name": "long",
    "topic": "planning a garden",
    "settings": {"context_tokens": 600},
    "roles": [
        {"id": "alice", "description": "a gardener"},
        {"id": "bob", "description": "a botanist"},
    ],
}
QUESTION = (
    "question {n}: what should we plant near the west fence, and how often should we "
    "water the beds in a dry summer?"
)
QUESTIONS = "".join(QUESTION.format(n=n) + "\n" for n in range(1, 9))


def _run(home: Path, *args: str, stdin: str | None = None) -> str:
    env = {"ROLECALL_HOME": str(home), "NO_COLOR": "1", "ROLECALL_MODEL": ""}
    done = rolecall(*args, env=env, stdin=stdin)
    assert "Traceback" not in done.stderr, done.stderr
    return done.stdout


@pytest.mark.timeout(120)
def test_a_long_chat_says_where_its_roles_read_a_summary(tmp_path: Path) -> None:
    folder = write_world(tmp_path / "long", WORLD)
    home = tmp_path / "home"
    out = _run(home, "chat", str(folder), stdin=QUESTIONS)
    lines = [line.strip() for line in out.splitlines() if "now reads a summary of" in line]
    sessions = json.loads(_run(home, "sessions", "list", "--json"))
    sid = sessions[0]["session_id"]
    doc = json.loads(_run(home, "sessions", "export", sid, "--format", "json"))
    made = [e for e in doc["events"] if e["type"] == "summary"]
    assert len(made) >= 4  # the world folds: the test is about showing it
    words = len(made[0]["text"].split())
    first = (
        f"≡ {made[0]['role']} now reads a summary of {made[0]['from_id']}–{made[0]['to_id']} "
        f"({words} words) in place of those messages"
    )
    # the live transcript: a line for each summary made, the text only with -v
    assert len(lines) == len(made)
    assert lines[0] == first
    assert "Covered:" not in out

    show = _run(home, "sessions", "show", sid)
    assert show.count("now reads a summary of") == len(made)
    assert first in show
    assert "Covered:" not in show
    # right before the reply whose prompt it was made for: that role's
    following = show[show.index(first) :].split("\n[m", 1)[1]
    assert following.split("]", 1)[1].split()[0] == made[0]["role"]
    texts = _run(home, "sessions", "show", sid, "--summaries")
    assert made[0]["text"].splitlines()[0] in texts
    assert "Covered: m1 to" in texts

    trace = _run(home, "sessions", "trace", sid)
    assert f"summaries: {len(made)} summaries" in trace
    rows = [line for line in trace.splitlines() if line.startswith(("alice ", "bob "))]
    assert len(rows) == len(made)
    assert rows[0].split()[:2] == [made[0]["role"], f"{made[0]['from_id']}–{made[0]['to_id']}"]


@pytest.mark.timeout(120)
def test_verbose_shows_the_summary_text_as_it_is_made(tmp_path: Path) -> None:
    folder = write_world(tmp_path / "long", WORLD)
    out = _run(tmp_path / "home", "chat", str(folder), "-v", stdin=QUESTIONS)
    assert "now reads a summary of" in out
    assert "Covered: m1 to" in out


@pytest.mark.timeout(120)
def test_one_message_is_one_message_in_a_summary(tmp_path: Path) -> None:
    folder = write_world(tmp_path / "long", WORLD)
    asked = "@bob " + QUESTION.format(n=1) + "\n"
    asked += "".join("@alice " + QUESTION.format(n=n) + "\n" for n in range(2, 9))
    out = _run(tmp_path / "home", "chat", str(folder), "-v", stdin=asked)
    assert "bob (1 message) spoke of" in out
    assert "(1 messages)" not in out


def test_a_collection_of_one_passage_says_passage(tmp_path: Path) -> None:
    folder = tmp_path / "w"
    (folder / "docs").mkdir(parents=True)
    (folder / "docs" / "note.md").write_text("Oil the chain every month.\n", encoding="utf-8")
    world = {
        "name": "shop",
        "topic": "bikes",
        "knowledge": {"shop": {"paths": ["docs"]}},
        "roles": [{"id": "mechanic", "knowledge": ["shop"]}],
    }
    write_world(folder, world)
    out = _run(tmp_path / "home", "knowledge", "list", str(folder))
    assert "    1 passage " in out, out
    assert "1 passages" not in out
