"""`--log-file FILE -vv`: what a person debugging a flow needs, as structured JSON lines."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.conftest import ROOT


def run_logged(tmp_path: Path, *args: str, stdin: str | None = None) -> list[dict[str, Any]]:
    log = tmp_path / "debug.log"
    done = subprocess.run(
        [sys.executable, "-m", "rolecall", *args, "-vv", "--log-file", str(log)],
        cwd=ROOT,
        env={**os.environ, "ROLECALL_HOME": str(tmp_path / "home")},
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in log.read_text("utf-8").splitlines()]


def test_a_flow_run_logs_steps_loops_conditions_and_commits(tmp_path: Path) -> None:
    records = run_logged(tmp_path, "run", "worlds/tutoring", "--max-turns", "4")
    kinds = [r["event"] for r in records]

    started = [r for r in records if r["event"] == "step_started"]
    assert [(r["step"], r["loop_iteration"]) for r in started] == [
        ("intro", 0),
        ("ask", 0),
        ("explain", 0),
        ("ask", 1),
    ]
    assert started[1]["reply_target"] == "tutor"
    finished = [r for r in records if r["event"] == "step_finished"]
    assert [r["result"] for r in finished] == ["success", "success", "loop_continue", "success"]
    (condition,) = [r for r in records if r["event"] == "condition"]
    assert condition["result"] is False and "UNDERSTOOD" in condition["condition"]
    commits = [r for r in records if r["event"] == "store_commit"]
    assert len(commits) >= 4 and all(r["ms"] >= 0 for r in commits)
    assert kinds.count("message") == 4
    assert records[-1]["event"] in ("store_commit", "session_finished")
    assert any(r["event"] == "session_stop" and r["reason"] == "max_turns" for r in records)


def test_chat_logs_who_answers_and_why(tmp_path: Path) -> None:
    records = run_logged(tmp_path, "chat", "worlds/panel", stdin="@ecologist what now?\n")
    # the human's message (an agent's reply is routed, and logged, the same way)
    (routing,) = [r for r in records if r["event"] == "routing" and r["message_id"] == "m1"]
    assert routing["answerers"] == ["ecologist"]
    assert routing["reason"] == "direct"
    assert any(r["event"] == "turn_started" and r["speaker"] == "ecologist" for r in records)
