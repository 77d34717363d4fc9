"""Help texts and argument errors, read as a new user reads them (real subprocesses)."""

from __future__ import annotations

import argparse
import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from rolecall.cli.main import build_parser
from tests.cli.test_run_cli import rolecall


def _commands(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, str]]:
    yield name, parser.format_help()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, child in action.choices.items():
                yield from _commands(child, f"{name} {sub}")


def test_every_command_and_action_has_examples() -> None:
    def examples(text: str) -> str:
        _, found, after = text.partition("\nexample")
        return after if found else ""

    missing = [
        name
        for name, text in _commands(build_parser(), "rolecall")
        if "  rolecall " not in examples(text)
    ]
    assert missing == []


def test_chat_and_worlds_new_help_say_what_they_take() -> None:
    chat = rolecall("chat", "--help").stdout
    assert "WORLD                 a shipped world (classroom" in chat
    assert "step: one turn per Enter" in chat
    assert "--from study" in rolecall("worlds", "new", "--help").stdout
    assert "rolecall worlds list" in rolecall("worlds", "--help").stdout


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["debate", "Cities should ban cars", "--max-turns", "99"], "--max-turns: input should"),
        (["consensus", "Pick a stack", "--max-rounds", "0"], "--max-rounds: input should"),
        (["study", "README.md", "--delay", "9"], "--delay: input should"),
        (["study", "README.md", "--lock", "1"], "--lock: input should"),
    ],
)
def test_an_out_of_range_flag_is_named_by_its_flag(
    data_dir: Path, argv: list[str], expected: str
) -> None:
    result = rolecall(*argv)
    assert result.returncode == 2
    assert expected in result.stderr
    assert ".max_turns" not in result.stderr and "study." not in result.stderr
    assert not data_dir.exists()  # nothing was stored


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["chta", "panel"], "(did you mean 'chat'?)"),
        (
            ["run", "classroom", "--mdoe", "step"],
            "rolecall run: error: unrecognized arguments: --mdoe step (did you mean '--mode'?)",
        ),
        (["sessions", "lsit"], "(did you mean 'list'?)"),
        (["sessions", "list", "--data-dri", "x"], "(did you mean '--data-dir'?)"),
        (["worlds", "new", "x", "--from", "stduy"], "(did you mean 'study'?)"),
    ],
)
def test_a_mistyped_command_or_flag_gets_a_did_you_mean(
    data_dir: Path, tmp_path: Path, argv: list[str], expected: str
) -> None:
    result = rolecall(*argv, cwd=tmp_path)
    assert result.returncode == 2
    assert expected in result.stderr
    assert "Traceback" not in result.stderr


def test_exports_and_session_files_follow_the_umask(data_dir: Path, tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        session_file = tmp_path / "live.json"
        ran = rolecall("run", "worlds/classroom", "--json", "--session-file", str(session_file))
        assert ran.returncode == 0, ran.stderr
        sid = json.loads(ran.stdout.splitlines()[0])["session_id"]
        for fmt in ("md", "html", "json"):
            out = tmp_path / f"export.{fmt}"
            done = rolecall("sessions", "export", sid, "--format", fmt, "--out", str(out))
            assert done.returncode == 0, done.stderr
            assert stat.S_IMODE(out.stat().st_mode) == 0o640
        assert stat.S_IMODE(session_file.stat().st_mode) == 0o640
    finally:
        os.umask(old)


def test_help_does_not_load_the_runtime() -> None:
    """`rolecall --help` stays fast (issue 18: <= 0.1 s): no command's help text imports
    the runtime, pydantic or the bus (the batch keys' help once pulled them all in)."""
    probe = (
        "import sys, io, contextlib\n"
        "from rolecall.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        main(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n"
        "heavy = ('rolecall.runtime', 'rolecall.batch.plan', 'rolecall.bus', 'pydantic')\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("command", ["run", "chat"])
def test_run_and_chat_help_name_the_shipped_worlds(command: str) -> None:
    from rolecall.world.catalog import shipped_dir

    shown = subprocess.run(
        [sys.executable, "-m", "rolecall", command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    flat = " ".join(shown.split())
    names = sorted(p.parent.name for p in shipped_dir().glob("*/world.yaml"))
    assert len(names) >= 5
    for name in names:
        assert name in flat, name
