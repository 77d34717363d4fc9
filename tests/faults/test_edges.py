"""The second pass of outside testing (issue 13): each defect found, as a user meets it.

Real ``rolecall`` subprocesses on scripted worlds, with the net guard of
``tests/faults``; the store is read with plain ``sqlite3`` afterwards.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Cli, assert_intact, only_session, stored, write_net_guard


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == []


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def exited(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


BACKTRACKING = """\
name: rx
topic: patterns
model: scripted
roles:
  - {id: a, script: ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"]}
flow:
  stop: [{regex: "(a|aa)+$"}, {max_seconds: 5}]
  steps: [{id: s, speaker: a}]
"""


def test_a_backtracking_regex_ends_the_run_with_the_condition_named(
    cli: Cli, tmp_path: Path
) -> None:
    world = write(tmp_path / "rx.yaml", BACKTRACKING)
    err = exited(cli.run("run", world, timeout=30), 1)
    assert "flow stop condition {regex: (a|aa)+$} on the latest message (m1)" in err
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == ["a" * 40 + "!"] and s.state == "paused"
    # resume does not hang at the same place: the same error, nothing regenerated
    err = exited(cli.run("resume", s.id, timeout=30), 1)
    assert "flow stop condition {regex: (a|aa)+$}" in err
    assert stored(cli.home, s.id).generations == {"m1": 1}
    assert only_session(cli.home) == s.id
