"""`rolecall chat` in piped mode, driven as a user would: a real subprocess and real files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from rolecall.bus import Envelope
from tests.conftest import ROOT

WORLD = {
    "name": "duo",
    "topic": "testing piped chat",
    "model": "scripted",
    "roles": [
        {"id": "alice", "script": ["alice answers #{n}"]},
        {"id": "bob", "script": ["bob answers #{n}"]},
    ],
}
INPUT = "hello @alice\n/flag x\n\n@bob hi\n"


def rolecall(*args: str, stdin: str, home: Path) -> subprocess.CompletedProcess[str]:
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


@pytest.fixture
def world_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "duo"
    folder.mkdir()
    (folder / "world.yaml").write_text(yaml.safe_dump(WORLD, sort_keys=False), "utf-8")
    return folder


def records_of(stdout: str) -> list[dict[str, Any]]:
    records = []
    for line in stdout.splitlines():
        record = json.loads(line)  # every stdout line is JSON
        assert isinstance(record, dict)
        Envelope.from_record(record)  # and a valid typed event
        records.append(record)
    return records


def test_piped_json_stream(world_dir: Path, tmp_path: Path) -> None:
    result = rolecall("chat", str(world_dir), "--json", stdin=INPUT, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    records = records_of(result.stdout)
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    assert len({r["session_id"] for r in records}) == 1
    messages = [r for r in records if r["type"] == "message"]
    assert [(m["message_id"], m["sender"], m["content"], m["reply_to"]) for m in messages] == [
        ("m1", "human", "hello @alice", None),
        ("m2", "alice", "alice answers #1", "m1"),
        ("m3", "human", "@bob hi", None),
        ("m4", "bob", "bob answers #1", "m3"),
    ]
    assert messages[0]["mentions"] == ["alice"] and messages[2]["mentions"] == ["bob"]
    assert [m["turn"] for m in messages] == [0, 1, 1, 2]
    # the /flag line is handled in its place: after alice's reply, before the next message
    flag = next(r for r in records if r["type"] == "log")
    assert flag["data"] == {"flag": "x"}
    assert messages[1]["seq"] < flag["seq"] < messages[2]["seq"]
    # at end of input the session is kept, paused, so it can be resumed
    assert records[-1]["topic"] == "world" and records[-1]["type"] == "session"
    assert (records[-1]["state"], records[-1]["reason"]) == ("paused", "end_of_input")
    assert not [r for r in records if r["type"] == "stop"]
    # every agent's passive memory file is in the data directory
    session_id = records[0]["session_id"]
    for agent in ("alice", "bob"):
        path = tmp_path / "home" / "memory" / session_id / f"{agent}.jsonl"
        entries = [json.loads(line) for line in path.read_text("utf-8").splitlines()]
        assert [(e["message_id"], e["content"]) for e in entries] == [
            (m["message_id"], m["content"]) for m in messages
        ]
        assert [e["role"] for e in entries] == [
            "assistant" if m["sender"] == agent else "user" for m in messages
        ]


def test_piped_transcript_text(world_dir: Path, tmp_path: Path) -> None:
    result = rolecall("chat", str(world_dir), stdin=INPUT, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    order = [
        "human: hello @alice",
        "alice → human",
        "alice answers #1",
        "human: @bob hi",
        "bob → human",
        "bob answers #1",
    ]
    positions = [out.index(text) for text in order]
    assert positions == sorted(positions), out
    assert "\033[" not in out  # no colours in a pipe
    assert "{" not in out  # not the JSON stream
    assert "paused (end_of_input)" in result.stderr


def test_a_line_after_stop_is_ignored_and_said(world_dir: Path, tmp_path: Path) -> None:
    """The command line does what say() after stop() does in Python: adds nothing."""
    stdin = "hello @alice\n/stop\n@bob still there?\n"
    result = rolecall("chat", str(world_dir), "--json", stdin=stdin, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "session finished (manual); message ignored" in result.stderr
    messages = [r["content"] for r in records_of(result.stdout) if r["type"] == "message"]
    assert messages == ["hello @alice", "alice answers #1"]


def test_piped_fork_prints_how_to_go_on_and_quit_pauses_as_in_the_repl(
    world_dir: Path, tmp_path: Path
) -> None:
    stdin = "hello @alice\n/fork m1\n/quit\n@bob never read\n"
    result = rolecall("chat", str(world_dir), "--json", stdin=stdin, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    forked = next(line for line in result.stderr.splitlines() if line.startswith("forked "))
    assert "switching" not in forked  # piped mode does not switch
    assert "continues it (switching works in the interactive REPL only)" in result.stderr
    last = records_of(result.stdout)[-1]
    assert (last["type"], last["state"], last["reason"]) == ("session", "paused", "quit")
    messages = [r["content"] for r in records_of(result.stdout) if r["type"] == "message"]
    assert "@bob never read" not in messages


def test_piped_turn_limit_and_unknown_mention(tmp_path: Path) -> None:
    folder = tmp_path / "pingpong"
    folder.mkdir()
    world = {
        "name": "pingpong",
        "model": "scripted",
        "settings": {"turn_limit": 2},
        "roles": [{"id": "a", "script": ["@b ping"]}, {"id": "b", "script": ["@a pong"]}],
    }
    (folder / "world.yaml").write_text(yaml.safe_dump(world), "utf-8")
    result = rolecall(
        "chat", str(folder), "--json", stdin="@a go\n@bee hi\n", home=tmp_path / "home"
    )
    assert result.returncode == 0, result.stderr
    records = records_of(result.stdout)
    messages = [(r["sender"], r["content"]) for r in records if r["type"] == "message"]
    assert messages == [
        ("human", "@a go"),
        ("a", "@b ping"),
        ("b", "@a pong"),
        ("a", "@b ping"),
        ("b", "@a pong"),
        ("system", "@human turn limit reached: a made 2 LLM calls without human input"),
        ("human", "@bee hi"),
    ]
    assert [(r["agent"], r["count"], r["limit"]) for r in records if r["type"] == "turn_limit"] == [
        ("a", 2, 2)
    ]
    (warning,) = [r for r in records if r["type"] == "warning"]
    assert "'bee'" in warning["message"]


def test_the_plain_transcript_shows_a_pass_without_its_tag(tmp_path: Path) -> None:
    folder = tmp_path / "passing"
    folder.mkdir()
    world = {
        "name": "passing",
        "model": "scripted",
        "roles": [{"id": "carol", "script": ["Not my fight. <world>pass</world>"]}],
    }
    (folder / "world.yaml").write_text(yaml.safe_dump(world), "utf-8")
    result = rolecall("chat", str(folder), stdin="@carol thoughts?\n", home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "Not my fight." in result.stdout
    assert "<world>" not in result.stdout


def test_the_panel_world_answers_as_documented(tmp_path: Path) -> None:
    stdin = "What should a city do about heat waves?\n@economist what does it cost?\n"
    result = rolecall("chat", "worlds/panel", "--json", stdin=stdin, home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    messages = [r for r in records_of(result.stdout) if r["type"] == "message"]
    assert [m["sender"] for m in messages] == [
        "human",
        "ecologist",
        "economist",
        "planner",
        "historian",
        "human",
        "economist",
    ]
    assert all(len(m["content"].split()) >= 10 for m in messages if m["sender"] != "human")
    text = rolecall("chat", "worlds/panel", stdin=stdin, home=tmp_path / "home")
    assert text.returncode == 0, text.stderr
    assert "economist → human" in text.stdout and "historian → human" in text.stdout


def test_an_unwritable_memory_folder_is_a_clean_runtime_failure(
    world_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "memory").write_text("a file where the memory folder should be")
    result = rolecall("chat", str(world_dir), stdin="hello @alice\n", home=home)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert "rolecall: cannot create memory folder" in result.stderr
    assert str(home / "memory") in result.stderr


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_during_a_piped_reply_stops_the_command(
    world_dir: Path, tmp_path: Path, sig: int, code: int
) -> None:
    """Nobody is there to go on after Ctrl-C (or a service manager's stop): the command
    pauses the session and exits, it does not read the rest of its input."""
    env = {
        **os.environ,
        "ROLECALL_HOME": str(tmp_path / "home"),
        "ROLECALL_STREAM_DELAY": "0.05",
        "NO_COLOR": "1",
    }
    env.pop("ROLECALL_MODEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "chat", str(world_dir), "--json"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("hello @alice\n@bob are you there?\n")
    proc.stdin.close()
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if '"type":"chunk"' in line:
            break
    proc.send_signal(sig)
    out = "".join(seen) + proc.stdout.read()  # what the text wrapper holds too
    assert proc.stderr is not None
    err = proc.stderr.read()
    proc.stdout.close()
    proc.stderr.close()
    assert proc.wait(timeout=30) == code, err
    contents = [r.get("content") for r in records_of(out) if r["type"] == "message"]
    assert "@bob are you there?" not in contents  # the rest of the input is not read
    assert "saved as paused" in err


def test_a_chat_killed_during_a_reply_between_agents_resumes_to_the_same_end(
    tmp_path: Path,
) -> None:
    """kill -9 while bob answers alice: what was seen is stored with the reply bob owes,
    and `resume` (no input) answers it and goes on to the same transcript as a run that
    was never interrupted."""
    folder = tmp_path / "pingpong"
    folder.mkdir()
    world = {
        "name": "pingpong",
        "model": "scripted",
        "settings": {"turn_limit": 3},
        "roles": [
            {"id": "alice", "script": ["@bob ping {n} one two three four five six"]},
            {"id": "bob", "script": ["@alice pong {n} one two three four five six"]},
        ],
    }
    (folder / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), "utf-8")

    def said(stdout: str) -> list[tuple[str, str]]:
        return [(r["sender"], r["content"]) for r in records_of(stdout) if r["type"] == "message"]

    whole = rolecall("chat", str(folder), "--json", stdin="hello @alice\n", home=tmp_path / "a")
    assert whole.returncode == 0, whole.stderr
    home = tmp_path / "b"
    env = {**os.environ, "ROLECALL_HOME": str(home), "ROLECALL_STREAM_DELAY": "0.02"}
    env.pop("ROLECALL_MODEL", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "chat", str(folder), "--json"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("hello @alice\n")
    proc.stdin.close()
    seen: list[str] = []
    for line in proc.stdout:  # alice's reply, then the first words of bob's
        seen.append(line)
        if len(said("".join(seen))) == 2 and '"type":"chunk"' in line:
            break
    proc.kill()
    proc.wait(timeout=20)
    proc.stdout.close()
    sid = json.loads(seen[0])["session_id"]
    again = rolecall("resume", sid, "--json", stdin="", home=home)
    assert again.returncode == 0, again.stderr
    assert said("".join(seen)) + said(again.stdout) == said(whole.stdout)
