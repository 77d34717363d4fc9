"""Stop a flow after its 3rd message three ways; resume; compare with an uninterrupted run."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

WORLD = """
name: relay
topic: relays
model: scripted
roles:
  - {id: a, script: ["a speaks {n} at m{turn}"]}
  - {id: b, script: ["b answers {target} #{n}"]}
flow:
  steps:
    - {id: one, speaker: a}
    - {id: two, speaker: b}
    - {id: three, speaker: a, loop: {to: two, max: 3}}
    - {id: four, speaker: b}
"""


@pytest.fixture
def world(tmp_path: Path) -> Path:
    folder = tmp_path / "relay"
    folder.mkdir()
    (folder / "world.yaml").write_text(WORLD)
    return folder


def cli(*args: str, home: Path, delay: float | None = None) -> list[str]:
    env = {**os.environ, "ROLECALL_HOME": str(home)}
    if delay is not None:
        env["ROLECALL_STREAM_DELAY"] = str(delay)
    else:
        env.pop("ROLECALL_STREAM_DELAY", None)
    return [sys.executable, "-m", "rolecall.cli.main", *args], env  # type: ignore[return-value]


def run(
    *args: str, home: Path, stdin: str = "", delay: float | None = None
) -> subprocess.CompletedProcess[str]:
    argv, env = cli(*args, home=home, delay=delay)
    return subprocess.run(
        argv, env=env, input=stdin, capture_output=True, text=True, timeout=60, check=False
    )


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def messages(recs: list[dict[str, Any]]) -> list[tuple[str, str, str | None]]:
    return [(r["message_id"], r["content"], r["step_id"]) for r in recs if r["type"] == "message"]


def starts(recs: list[dict[str, Any]]) -> int:
    return sum(1 for r in recs if r["topic"] == "sse" and r["type"] == "start")


def stored_sessions(home: Path) -> list[str]:
    import sqlite3

    with sqlite3.connect(home / "rolecall.db") as db:
        return [row[0] for row in db.execute("SELECT id FROM sessions")]


def stop_after_third(argv: list[str], env: dict[str, str], sig: int) -> subprocess.Popen[str]:
    """Start a run; once the 3rd message is out, send ``sig``."""
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if '"type":"message"' in line:
            seen += 1
            if seen == 3:
                time.sleep(0.05)  # inside the 4th generation (words come every 0.05 s)
                proc.send_signal(sig)
                break
    assert seen == 3
    return proc


@pytest.fixture
def uninterrupted(world: Path, tmp_path: Path) -> list[tuple[str, str, str | None]]:
    result = run("run", str(world), "--json", home=tmp_path / "clean")
    assert result.returncode == 0, result.stderr
    full = messages(records(result.stdout))
    assert [m[2] for m in full] == ["one", "two", "three", "two", "three", "two", "three", "four"]
    return full


def test_manual_stop_then_resume(world: Path, tmp_path: Path, uninterrupted: list[Any]) -> None:
    home = tmp_path / "home"
    first = run("run", str(world), "--json", "--mode", "step", home=home, stdin="\n\n\nq\n")
    assert first.returncode == 0, first.stderr
    before = records(first.stdout)
    assert len(messages(before)) == 3
    assert before[-1]["type"] == "stop" and before[-1]["reason"] == "manual"
    (session_id,) = stored_sessions(home)
    second = run("resume", session_id, "--json", "--mode", "auto", home=home)
    assert second.returncode == 0, second.stderr
    after = records(second.stdout)
    assert messages(before) + messages(after) == uninterrupted
    assert starts(after) == len(uninterrupted) - 3  # no call for an existing message
    assert after[0]["seq"] == before[-1]["seq"] + 1  # the event sequence goes on
    assert after[-1]["reason"] == "flow_end"


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL], ids=["ctrl-c", "kill-9"])
def test_interrupted_run_resumes_to_the_same_transcript(
    world: Path, tmp_path: Path, uninterrupted: list[Any], sig: int
) -> None:
    home = tmp_path / "home"
    argv, env = cli("run", str(world), "--json", home=home, delay=0.05)
    proc = stop_after_third(argv, env, sig)
    _, err = proc.communicate(timeout=30)
    if sig == signal.SIGINT:
        assert proc.returncode == 130
        assert "saved as paused" in err
    else:
        assert proc.returncode == -signal.SIGKILL
    (session_id,) = stored_sessions(home)
    resumed = run("resume", session_id, "--json", home=home)
    assert resumed.returncode == 0, resumed.stderr
    after = records(resumed.stdout)
    # the stored part plus the resumed part is the uninterrupted transcript
    import sqlite3

    with sqlite3.connect(home / "rolecall.db") as db:
        stored = [json.loads(b) for (b,) in db.execute("SELECT body FROM messages ORDER BY idx")]
    assert [(m["id"], m["content"], m["step_id"]) for m in stored] == uninterrupted
    assert starts(after) == len(uninterrupted) - 3
    assert after[-1]["reason"] == "flow_end"
    with sqlite3.connect(home / "rolecall.db") as db:
        seqs = [s for (s,) in db.execute("SELECT seq FROM events ORDER BY seq")]
    assert seqs == list(range(1, len(seqs) + 1))  # gap-free across the interruption


def test_session_file_resume_and_finished_sessions(
    world: Path, tmp_path: Path, uninterrupted: list[Any]
) -> None:
    home = tmp_path / "home"
    saved = tmp_path / "saved.json"
    first = run(
        "run",
        str(world),
        "--json",
        "--mode",
        "step",
        "--session-file",
        str(saved),
        home=home,
        stdin="\n\n\nq\n",
    )
    assert first.returncode == 0, first.stderr
    doc = json.loads(saved.read_text())
    assert doc["format"] == "rolecall-session" and doc["version"] == 1
    assert len(doc["messages"]) == 3
    assert set(doc["memory"]) == {"a", "b"} and len(doc["memory"]["a"]) == 3
    # resume from the file into a fresh data directory: the session is imported and continued
    other = tmp_path / "other"
    resumed = run("resume", str(saved), "--json", "--mode", "auto", home=other)
    assert resumed.returncode == 0, resumed.stderr
    assert messages(records(first.stdout)) + messages(records(resumed.stdout)) == uninterrupted
    again = run("resume", doc["session_id"], home=other)
    assert again.returncode == 0
    assert "already finished (flow_end)" in again.stderr


def test_session_files_from_other_versions_are_refused_clearly(tmp_path: Path) -> None:
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps({"format": "rolecall-session", "version": 99}))
    result = run("resume", str(newer), home=tmp_path / "h")
    assert result.returncode == 2
    assert "version 99 is newer than this rolecall supports (1)" in result.stderr
    older = tmp_path / "older.json"
    older.write_text(json.dumps({"format": "rolecall-session", "version": 0}))
    result = run("resume", str(older), home=tmp_path / "h")
    assert result.returncode == 2
    assert "version 0" in result.stderr and "re-run the world" in result.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not json")
    result = run("resume", str(junk), home=tmp_path / "h")
    assert result.returncode == 2 and "invalid JSON at line 1" in result.stderr


def test_resume_more_turns_below_one_is_a_usage_error(world: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    assert run("run", str(world), "--mode", "step", home=home, stdin="\n").returncode == 0
    for flag in ("--more-turns", "--max-turns"):
        refused = run("resume", "last", flag, "0", home=home)
        assert refused.returncode == 2
        assert "--more-turns (--max-turns) must be at least 1, got 0" in refused.stderr


def test_unknown_session_id(tmp_path: Path) -> None:
    result = run("resume", "20260101-000000-abcdef", home=tmp_path / "h")
    assert result.returncode == 2
    assert "no session '20260101-000000-abcdef'" in result.stderr
    result = run("resume", "../no-such-session", home=tmp_path / "h")
    assert result.returncode == 2
    assert "not safe in a file name" in result.stderr


def test_resume_more_turns_pauses_and_says_how_to_go_on(world: Path, tmp_path: Path) -> None:
    """`resume --more-turns N` (its first name `--max-turns` kept): N more agent messages,
    then paused with its own reason, `more_turns` (not `max_turns`, the world's budget,
    which finishes a session)."""
    from tests.faults import stored

    home = tmp_path / "home"
    first = run("run", str(world), "--mode", "step", home=home, stdin="\n")  # 1 turn, EOF pauses
    assert first.returncode == 0, first.stderr
    assert len(stored(home).messages) == 1
    capped = run("resume", "last", "--mode", "auto", "--more-turns", "2", home=home)
    assert capped.returncode == 0, capped.stderr
    s = stored(home)
    assert (s.state, s.pause_reason, len(s.messages)) == ("paused", "more_turns", 3)
    assert "paused after --more-turns 2 more turns" in capped.stderr
    assert f"`rolecall resume {s.id}` goes on" in capped.stderr
    again = run("resume", "last", "--max-turns", "2", home=home)  # the flag's first name
    assert again.returncode == 0, again.stderr
    s = stored(home)
    assert (s.pause_reason, len(s.messages)) == ("more_turns", 5)  # a cap is not "finished"
    rest = run("resume", "last", home=home)
    assert rest.returncode == 0, rest.stderr
    s = stored(home)
    assert (s.state, s.stop_reason, len(s.messages)) == ("finished", "flow_end", 8)


def test_resume_of_a_stepped_session_steps(world: Path, tmp_path: Path) -> None:
    from tests.faults import stored

    home = tmp_path / "home"
    first = run("run", str(world), "--mode", "step", home=home, stdin="\n")
    assert first.returncode == 0, first.stderr
    resumed = run("resume", "last", home=home, stdin="\n")  # one more step, then EOF
    assert resumed.returncode == 0, resumed.stderr
    s = stored(home)
    assert (s.state, len(s.messages)) == ("paused", 2)
    assert "[Enter] next turn" in resumed.stderr
