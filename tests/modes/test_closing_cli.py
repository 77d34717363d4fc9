"""The debate's closing synthesis, its chat-style headers, and consensus's five voices,
through the CLI (real subprocesses, the JSON stream, exports) and the prompt a model gets."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.helpers import run_flow, world_from
from tests.modes.test_debate import Capture

TOPIC = "Cities should ban private cars from their centres"


def rolecall(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROLECALL_HOME": str(home), "NO_COLOR": "1"}
    env.pop("ROLECALL_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def records(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_the_offline_synthesis_is_a_closing_that_cites_the_debate(tmp_path: Path) -> None:
    result = rolecall("debate", TOPIC, "--json", "--max-turns", "4", home=tmp_path)
    assert result.returncode == 0, result.stderr
    msgs = [r for r in records(result.stdout) if r["type"] == "message"]
    debaters = {m["message_id"] for m in msgs if m["sender"] in ("pro", "con")}
    synthesis = msgs[-1]
    assert synthesis["sender"] == "moderator" and synthesis["step_id"] == "synthesis"
    cited = set(re.findall(r"\[(m[0-9]+)\]", synthesis["content"]))
    assert cited == debaters  # every debater message is cited, and only those
    text = synthesis["content"].lower()
    assert "common ground" in text and "disagreement" in text and "assessment" in text
    assert "floor" not in text and "?" not in text  # nobody is handed the floor


@pytest.mark.anyio
async def test_the_synthesis_prompt_closes_and_hands_nothing_on() -> None:
    capture = Capture()
    world = world_from(
        {
            "name": "d",
            "mode": "debate",
            "topic": TOPIC,
            "debate": {"max_turns": 2},
            "roles": [{"id": "moderator", "model": "capture"}],
        }
    )
    await run_flow(world, models={"capture": capture})
    prompt = "\n".join(m.content for m in capture.requests[-1].messages)
    assert "closing synthesis" in prompt and "hand the floor to no one" in prompt
    assert "hand the floor to a specific participant" not in prompt
    assert "Hand the floor to a named participant" not in prompt
    assert "continue the conversation" not in prompt


def test_debate_headers_show_turn_badge_and_persona_in_terminal_and_exports(
    tmp_path: Path,
) -> None:
    result = rolecall("debate", TOPIC, "--max-turns", "3", home=tmp_path)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "#1 PRO · Optimistic Advocate [step opening]" in out
    assert "#2 CON · Skeptical Critic → pro [step con]" in out
    assert "#4 MODERATOR · Moderator [step synthesis]" in out
    stream = rolecall("debate", TOPIC, "--max-turns", "3", "--json", home=tmp_path)
    session_id = records(stream.stdout)[0]["session_id"]
    shown = rolecall("sessions", "show", session_id, home=tmp_path)
    assert "[m2] #2 CON · Skeptical Critic → pro" in shown.stdout
    md = tmp_path / "d.md"
    html = tmp_path / "d.html"
    for fmt, path in (("md", md), ("html", html)):
        done = rolecall(
            "sessions", "export", session_id, "--format", fmt, "--out", str(path), home=tmp_path
        )
        assert done.returncode == 0, done.stderr
    assert "### m1 · \\#1 PRO · Optimistic Advocate" in md.read_text("utf-8")
    assert "#3 PRO · Optimistic Advocate</span>" in html.read_text("utf-8")


def test_other_worlds_keep_plain_headers(tmp_path: Path) -> None:
    result = rolecall("run", "worlds/classroom", "--max-turns", "2", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "\nstudent → teacher [step ask]" in result.stdout and "#" not in result.stdout


def test_consensus_offers_the_five_generic_voices_as_a_profile(tmp_path: Path) -> None:
    result = rolecall(
        "consensus", "Adopt a four-day week", "--profile", "five-voices", "--max-rounds", "2",
        "--json", home=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    senders = [r["sender"] for r in records(result.stdout) if r["type"] == "message"]
    five = ["analyst", "creative", "critic", "pragmatist", "stakeholder"]
    assert senders == [*five, *five, "synthesizer"]


def test_a_judge_replying_deeply_nested_json_cannot_crash_the_run(tmp_path: Path) -> None:
    world = {
        "name": "deep",
        "mode": "debate",
        "topic": "Tax sugar",
        "debate": {"judge": "judge", "max_turns": 4},
        "roles": [{"template": "judge", "model": "scripted", "script": ["[" * 3000 + "]" * 3000]}],
    }
    path = tmp_path / "deep.yaml"
    path.write_text(json.dumps(world))  # JSON is YAML
    result = rolecall("run", str(path), "--json", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr and "RecursionError" not in result.stderr
    stops = [r for r in records(result.stdout) if (r["topic"], r["type"]) == ("world", "stop")]
    assert [s["reason"] for s in stops] == ["max_turns"]
