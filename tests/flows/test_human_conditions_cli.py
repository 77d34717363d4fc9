"""Flows and the human, through the CLI: conditions on what the human said, `previous`
after an interjection, the flow view (`/flow`, `worlds show`), common flags on `worlds`.

Driven as a user would: `rolecall chat WORLD` piped (one message or /command a line,
`/next` is step mode), `rolecall worlds ...`, real files, the JSON event stream.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT


def rolecall(*args: str, stdin: str = "", home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ROLECALL_HOME": str(home), "NO_COLOR": "1"}
    env.pop("ROLECALL_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=ROOT,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def world_dir(tmp_path: Path, steps: list[dict[str, Any]], name: str = "w", **flow: Any) -> Path:
    folder = tmp_path / name
    folder.mkdir()
    data = {
        "name": "w",
        "topic": "testing",
        "model": "scripted",
        "roles": [{"id": r, "script": [f"{r} says {{n}}"]} for r in ("a", "b")],
        "flow": {"steps": steps, **flow},
    }
    (folder / "world.yaml").write_text(yaml.safe_dump(data, sort_keys=False), "utf-8")
    return folder


def has_line(text: str, *parts: str) -> bool:
    """Some line of ``text`` holds every part, in order."""
    for line in text.splitlines():
        at = 0
        for part in parts:
            at = line.find(part, at)
            if at < 0:
                break
            at += len(part)
        else:
            return True
    return False


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def messages(records: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [
        (r["message_id"], r["sender"], r["reply_to"]) for r in records if r["type"] == "message"
    ]


def test_a_branch_on_what_the_human_said_in_step_mode(tmp_path: Path) -> None:
    steps = [
        {"id": "s1", "speaker": "a"},
        {
            "id": "s2",
            "speaker": "b",
            "next": [{"when": {"contains": "skip", "role": "human"}, "goto": "s4"}, {"goto": "s3"}],
        },
        {"id": "s3", "speaker": "a"},
        {"id": "s4", "speaker": "b", "next": "end"},
    ]
    folder = world_dir(tmp_path, steps)
    said = rolecall(
        "chat",
        str(folder),
        "--json",
        stdin="/next\nplease skip ahead\n/next\n/next\n",
        home=tmp_path,
    )
    assert said.returncode == 0, said.stderr
    records = events(said.stdout)
    assert [r["step_id"] for r in records if r["type"] == "step"] == ["s1", "s2", "s4"]
    when = [r for r in records if r["type"] == "condition" and r["context"] == "when:s2"]
    assert when[0]["result"] is True
    assert when[0]["detail"] == "latest message by human (m2) contains 'skip'"
    # without the human saying it, the default branch
    quiet = rolecall("chat", str(folder), "--json", stdin="/next\n/next\n/next\n", home=tmp_path)
    steps_run = [r["step_id"] for r in events(quiet.stdout) if r["type"] == "step"]
    assert steps_run == ["s1", "s2", "s3"]


def test_a_stop_on_what_the_human_said_ends_the_flow_and_drops_the_interjection(
    tmp_path: Path,
) -> None:
    folder = world_dir(
        tmp_path,
        [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}, {"id": "s3", "speaker": "a"}],
        stop=[{"contains": "enough", "role": "human", "name": "human_enough"}],
    )
    result = rolecall(
        "chat", str(folder), "--json", stdin="/next\n@b that is enough\n/next\n", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    records = events(result.stdout)
    assert messages(records) == [("m1", "a", None), ("m2", "human", None)]
    stop = [r for r in records if r["type"] == "stop"]
    assert [(s["reason"], s["detail"]) for s in stop] == [
        ("human_enough", "latest message by human (m2) contains 'enough'")
    ]
    checked = [r for r in records if r["type"] == "condition" and r["context"] == "stop"]
    assert checked[-1]["result"] is True
    # an agent saying the word does not count: the condition is on the human's messages
    folder2 = world_dir(
        tmp_path,
        [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}],
        name="w2",
        stop=[{"contains": "says", "role": "human"}],
    )
    ran = rolecall("chat", str(folder2), "--json", stdin="/next\n/next\n", home=tmp_path)
    assert [r["reason"] for r in events(ran.stdout) if r["type"] == "stop"] == ["flow_end"]


def test_previous_after_an_interjection_is_never_the_speakers_own_message(
    tmp_path: Path,
) -> None:
    folder = world_dir(
        tmp_path,
        [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}, {"id": "s3", "speaker": "b"}],
    )
    result = rolecall(
        "chat", str(folder), "--json", stdin="/next\n@b your view?\n/next\n/next\n", home=tmp_path
    )
    assert result.returncode == 0, result.stderr
    records = events(result.stdout)
    # m3 is b's interjection; s2 (b, reply_to previous) answers the human's m2, not m3;
    # s3 (b again) answers the latest message by someone else: still m2
    assert messages(records) == [
        ("m1", "a", None),
        ("m2", "human", None),
        ("m3", "b", "m2"),
        ("m4", "b", "m2"),
        ("m5", "b", "m2"),
    ]
    targets = [r["target"] for r in records if r["type"] == "message"]
    assert targets[3:] == ["human", "human"]


def test_the_flow_view_shows_speaker_reply_target_counters_and_the_current_step(
    tmp_path: Path,
) -> None:
    steps = [
        {"id": "open", "speaker": "a", "reply_to": "none"},
        {
            "id": "ask",
            "speaker": "b",
            "loop": {"to": "ask", "max": 3, "until": {"not": {"contains": "zzz"}}},
        },
        {"id": "close", "speaker": "a", "reply_to": {"role": "b"}},
    ]
    folder = world_dir(tmp_path, steps, stop=[{"not": {"contains": "zzz", "role": "human"}}])
    live = rolecall("chat", str(folder), stdin="/flow\n", home=tmp_path)
    assert live.returncode == 0, live.stderr
    view = live.stderr
    assert "stop when {not: {contains: zzz, role: human}}" in view
    assert "{{" not in view
    assert "▶ open   a → nobody" in view
    assert has_line(view, "ask    b → previous", "loop → ask (0/3) until {not: {contains: zzz}}")
    assert "close  a → latest by b" in view
    assert "next: open" in view
    static = rolecall("worlds", "show", str(folder), "--data-dir", str(tmp_path), home=tmp_path)
    assert static.returncode == 0, static.stderr
    assert "a  A · scripted" in static.stdout
    assert has_line(static.stdout, "ask    b → previous", "loop → ask (max 3)")
    assert "close  a → latest by b" in static.stdout


def test_the_flow_view_resolves_the_current_steps_target(tmp_path: Path) -> None:
    folder = world_dir(
        tmp_path,
        [
            {"id": "s1", "speaker": "a"},
            {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 2}},
        ],
    )
    result = rolecall("chat", str(folder), stdin="/next\n/next\n/next\n/flow\n", home=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "✓ s1  a → previous  ran 2×" in result.stderr
    assert "▶ s2  b → previous  ran 1×  loop → s1 (1/2)  (answers m3 by a)" in result.stderr
    assert "next: s2 · 3 steps executed" in result.stderr


def test_worlds_commands_take_the_common_flags_and_accept_role_human(tmp_path: Path) -> None:
    folder = world_dir(
        tmp_path,
        [
            {
                "id": "s1",
                "speaker": "a",
                "loop": {"to": "s1", "max": 3, "until": {"regex": "^ok", "role": "human"}},
            }
        ],
    )
    ok = rolecall(
        "worlds", "validate", str(folder), "--data-dir", str(tmp_path / "d"), "-q", home=tmp_path
    )
    assert ok.returncode == 0, ok.stderr
    assert "ok (2 roles, 1 step)" in ok.stdout
    listing = rolecall(
        "worlds", "list", "--dir", str(tmp_path), "--data-dir", str(tmp_path), home=tmp_path
    )
    assert listing.returncode == 0, listing.stderr
    text = (folder / "world.yaml").read_text("utf-8").replace("role: human", "role: humn")
    (folder / "world.yaml").write_text(text, "utf-8")
    bad = rolecall("worlds", "validate", str(folder), home=tmp_path)
    assert bad.returncode == 2
    assert "flow.steps[0].loop.until.role: no role 'humn'" in bad.stderr
