"""``/fork``, ``/retry`` and ``/branch`` in the real REPL on a real terminal (tmux)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.repl.test_tmux import TMUX, Terminal, flat, terminal, toolbar

__all__ = ["terminal"]  # the fixture
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not on PATH: the REPL needs a terminal"
)

STEP = "learner → tutor [step ask]"
ANSWER = "tutor → learner [step explain]"


def sessions(home: Path) -> dict[str, dict[str, Any]]:
    """Each stored session: its fork info, messages (sender, content) and pending replies."""
    with sqlite3.connect(home / "rolecall.db") as db:
        rows = db.execute("SELECT id, state_json FROM sessions ORDER BY created_at").fetchall()
        out = {}
        for sid, state in rows:
            bodies = db.execute(
                "SELECT body FROM messages WHERE session_id = ? ORDER BY idx", (sid,)
            ).fetchall()
            st = json.loads(state)
            out[sid] = {
                "fork": st["extra"].get("fork"),
                "messages": [
                    (json.loads(b)["sender"], json.loads(b)["content"]) for (b,) in bodies
                ],
            }
    return out


def command(t: Terminal, line: str, expect: str | Callable[[str], bool]) -> str:
    t.type(line)
    t.key("Enter")
    return t.wait_for(expect)


def test_retry_keeps_both_answers_as_branches_and_branch_switches(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/tutoring", "--mode", "step")
    t.ready()
    command(t, "/retry", "nothing to retry: no message yet")
    command(t, "/branch", "no branches here: this session has no forks")
    for n, expect in enumerate(("tutor [step intro]", STEP, ANSWER), start=1):
        command(t, "/next", lambda s, e=expect, n=n: e in s and s.count("  ↑") == n)
        t.wait_for(lambda s: "│ ready │" in toolbar(s))
    screen = command(t, "/retry", lambda s: s.count(ANSWER) == 2 and s.count("  ↑") == 4)
    parent, fork = list(sessions(t.home))
    assert f"asking tutor again in a new branch {fork} (m1..m2); m3 stays in {parent}" in screen
    assert f"session {fork}: 2 messages, paused (fork)" in screen
    t.wait_for(lambda s: fork in toolbar(s) and "│ ready │" in toolbar(s))

    screen = command(t, "/branch", "/branch N switches")
    listing = screen[screen.rindex("branches at m2") :]
    assert "branches at m2 (2; what each says after it):" in listing
    assert f"  1  {parent}  m3 tutor: Learner, let's slow down" in listing
    assert f"* 2  {fork}  m3 tutor: Learner, let's slow down" in listing

    screen = command(
        t, "/branch 1", lambda s: parent in toolbar(s) and f"session {parent}: 3 messages" in s
    )
    assert f"switching to branch 1 at m2: {parent}" in screen
    assert f"session {parent}: 3 messages, paused (quit)" in screen
    command(t, "/branch 1", f"already on branch 1 ({parent})")
    command(t, "/branch 7", "no branch 7 at m2: there are 1..2 (/branch)")

    screen = command(t, "/fork m2 Is it the tilt, then?", lambda s: "m2 edited" in s)
    stored = sessions(t.home)
    edited = list(stored)[-1]
    assert f"forked {parent} at m2 → {edited} (m1..m2, m2 edited)" in screen
    assert f"/load {parent} goes back" in flat(screen)
    t.wait_for(f"session {edited}: 2 messages, paused (fork)")
    # ask's step is decided at once on the edited m2: the next turn is the tutor's
    t.wait_for(lambda s: edited in toolbar(s) and "step explain" in toolbar(s))
    screen = command(t, "/branch", lambda s: s.count("/branch N switches") == 2)
    listing = screen[screen.rindex("branches at m2") :]
    assert "branches at m2 (3; what each says from it):" in listing
    assert f"* 3  {edited}  m2 learner: Is it the tilt, then? → (nothing after m2 yet)" in listing
    t.type("/next")  # the tutor answers the edited question
    t.key("Enter")
    t.wait_for(
        lambda s: edited in toolbar(s) and "explain×1" in toolbar(s) and "ready" in toolbar(s)
    )
    command(t, "/fork m9", f"/fork m9: session {edited} has messages m1..m3")
    t.key("C-d")
    t.wait_for("EXIT=0")

    stored = sessions(t.home)
    assert stored[fork]["fork"] == {"parent": parent, "at": "m2"}
    assert stored[edited]["fork"] == {"parent": parent, "at": "m2"}
    assert stored[fork]["messages"] == stored[parent]["messages"]  # the offline model
    assert len(stored[parent]["messages"]) == 3  # the old answer stayed where it was
    assert stored[edited]["messages"][1] == ("learner", "Is it the tilt, then?")
    assert stored[edited]["messages"][2][0] == "tutor"
    memory = t.home / "memory" / fork / "tutor.jsonl"
    assert len(memory.read_text().splitlines()) == 3


def test_retry_in_a_chat_asks_the_same_agent_again(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("worlds/panel")
    t.ready()
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    t.wait_for(lambda s: "historian → human" in s and "  ↑" in s)
    screen = command(
        t, "/retry", lambda s: s.count("historian → human") == 2 and s.count("  ↑") == 2
    )
    parent, fork = list(sessions(t.home))
    assert f"asking historian again in a new branch {fork} (m1); m2 stays in {parent}" in screen
    t.wait_for(lambda s: fork in toolbar(s) and "│ ready │" in toolbar(s))
    screen = command(t, "/branch", "/branch N switches")
    assert f"* 2  {fork}  m2 historian: " in screen
    command(t, "/fork", "/fork: wrong number of arguments (usage: /fork mK [TEXT])")
    t.key("C-d")
    t.wait_for("EXIT=0")
    stored = sessions(t.home)
    assert [s for s, _ in stored[fork]["messages"]] == ["human", "historian"]
    assert stored[fork]["fork"] == {"parent": parent, "at": "m1"}


def test_a_forked_human_message_gets_its_replies(terminal: Callable[[], Terminal]) -> None:
    """/fork m1 TEXT of your own message in a chat: the edited message is answered in
    the fork, by whom it now addresses, without a /resume."""
    t = terminal()
    t.start("worlds/panel")
    t.ready()
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    t.wait_for("historian → human")
    t.wait_for(lambda s: "│ ready │" in toolbar(s))
    t.type("/fork m1 @economist what happened to prices in 1995?")
    t.key("Enter")
    t.wait_for("switching to the fork")
    t.wait_for("economist → human", timeout=30)
    t.wait_for(lambda s: "│ ready │" in toolbar(s))
    t.key("C-d")
    t.wait_for("EXIT=0")
    (fork,) = [s for s in sessions(t.home).values() if s["fork"]]
    assert [who for who, _ in fork["messages"]] == ["human", "economist"]
    assert fork["messages"][0][1] == "@economist what happened to prices in 1995?"
