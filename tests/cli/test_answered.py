"""Which message a reply answers (issue 16): `↩ m7 "what would you build first?"`,
shortened, in `run`, a piped chat, `sessions show` and the exports alike."""

from __future__ import annotations

import re
from pathlib import Path

from tests.cli.test_run_cli import rolecall

QUOTE = re.compile(r'↩ (m\d+) "([^"]*)"')


def test_run_and_the_exports_show_the_answered_message(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    ran = rolecall("run", "tutoring", "--data-dir", data, "-q")
    assert ran.returncode == 0, ran.stderr
    # each reply's header names the message it answers, with its text shortened
    head = next(line for line in ran.stdout.splitlines() if line.startswith("learner → tutor"))
    found = QUOTE.search(head)
    assert found is not None and found.group(1) == "m1", head
    first = ran.stdout.split("\n", 2)[1]  # m1's text, under the first header
    quoted = found.group(2)
    assert quoted.endswith("…") and len(quoted) == 40 and first.startswith(quoted[:-1])
    shown = rolecall("sessions", "show", "last", "--data-dir", data)
    assert f'[m2] learner → tutor  [step ask]  ↩ m1 "{quoted}"' in shown.stdout
    md = rolecall("sessions", "export", "last", "--format", "md", "--data-dir", data)
    assert f'replying to m1 "{quoted}"' in md.stdout
    html = rolecall("sessions", "export", "last", "--format", "html", "--data-dir", data)
    escaped = quoted.replace("'", "&#x27;")  # the page escapes the message's text
    assert (
        f'↩ replying to <a href="#m1">m1</a> <span class="answered">“{escaped}”</span>'
        in html.stdout
    )


def test_a_piped_chat_shows_which_question_each_reply_answers(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    said = "@historian what came first?\n@planner what would you build first?\n"
    done = rolecall("chat", "panel", "--data-dir", data, stdin=said)
    assert done.returncode == 0, done.stderr
    heads = [line for line in done.stdout.splitlines() if "→ human" in line]
    assert any('↩ m1 "@historian what came first?"' in h for h in heads), heads
    assert any('↩ m3 "@planner what would you build first?"' in h for h in heads), heads


def test_a_resumed_run_quotes_the_messages_said_before_it(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    first = rolecall("run", "tutoring", "--data-dir", data, "--mode", "step", stdin="\n")
    assert first.returncode == 0, first.stderr
    again = rolecall("resume", "last", "--data-dir", data, "-q", "--mode", "auto", stdin="")
    assert again.returncode == 0, again.stderr
    head = next(line for line in again.stdout.splitlines() if "↩ m1" in line)
    found = QUOTE.search(head)
    # m1 was said by the first command: the resumed one still quotes it
    assert found is not None and found.group(2), head
