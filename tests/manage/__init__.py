"""Helpers for the management-command tests (``rolecall sessions|roles|memory``).

``call`` runs a command in-process through :func:`rolecall.cli.manage.register` with the
same error-to-exit-code mapping as ``rolecall.cli.commands.dispatch`` (without configuring
logging, which is process-wide). ``rolecall`` runs any command in a subprocess: through
``rolecall.cli.main`` once the management commands are wired into it, through a small
shim before that.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from rolecall.cli.manage import register
from rolecall.errors import RuntimeFailure, UsageError

RELAY = """
name: relay
title: Relay <b>race</b> & co
topic: relays
model: scripted
roles:
  - {id: a, name: Alpha, script: ["a speaks {n} at m{turn} <script>alert(1)</script>"]}
  - {id: b, name: Beta, script: ["# b answers {target} #{n}\\n---\\n* more | x"]}
flow:
  steps:
    - {id: one, speaker: a}
    - {id: two, speaker: b}
    - {id: three, speaker: a, loop: {to: two, max: 3}}
    - {id: four, speaker: b}
"""

# Before main.py knows the management commands, the shim builds a parser from
# ``register`` for them and loads worlds with the data directory's role library for the
# others (what ``rolecall.cli.commands._load`` does once wired). Once wired it is just
# ``rolecall.cli.main.main``: the real command line, nothing patched.
SHIM = r"""
import argparse, sys
from rolecall.cli import main as cli_main

def wired():
    parser = cli_main.build_parser()
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return "sessions" in action.choices
    return False

argv = sys.argv[1:]
if wired():
    sys.exit(cli_main.main(argv))
from rolecall.cli import commands, logs, manage
from rolecall.errors import RuntimeFailure, UsageError
if argv and argv[0] in ("sessions", "roles", "memory"):
    parser = argparse.ArgumentParser(prog="rolecall")
    handlers = manage.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    logs.configure(-1 if args.quiet else args.verbose, args.log_file)
    try:
        code = handlers[args.command](args)
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        code = 2
    except RuntimeFailure as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        code = 1
    sys.exit(code)
import rolecall.world.loader as loader
from rolecall.paths import data_dir
_Library = loader.RoleLibrary
def _with_user_roles(user_dir=None):
    return _Library(user_dir if user_dir is not None else data_dir(None) / "roles")
loader.RoleLibrary = _with_user_roles
sys.exit(cli_main.main(argv))
"""


def rolecall(
    *argv: str,
    home: Path,
    stdin: str = "",
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``rolecall ARGV...`` in a subprocess with ``ROLECALL_HOME=home``."""
    full_env = {**os.environ, "ROLECALL_HOME": str(home), **(env or {})}
    full_env.pop("ROLECALL_STREAM_DELAY", None)
    full_env.pop("ROLECALL_MODEL", None)
    return subprocess.run(
        [sys.executable, "-c", SHIM, *argv],
        env=full_env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def call(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """``rolecall ARGV...`` in-process: (exit code, stdout, stderr)."""
    parser = argparse.ArgumentParser(prog="rolecall")
    handlers = register(parser.add_subparsers(dest="command", required=True))
    capsys.readouterr()
    args = parser.parse_args(list(argv))
    try:
        code = handlers[args.command](args)
    except UsageError as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        code = 2
    except RuntimeFailure as exc:
        print(f"rolecall: {exc}", file=sys.stderr)
        code = 1
    out, err = capsys.readouterr()
    return code, out, err


def write_world(folder: Path, text: str = RELAY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(text)
    return folder


def records(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def session_ids(home: Path) -> list[str]:
    # closed here (sqlite3's own ``with`` only commits): an open reader keeps the
    # database's -wal and -shm files, which a copy of the data directory would take along
    with contextlib.closing(sqlite3.connect(home / "rolecall.db")) as db:
        return [row[0] for row in db.execute("SELECT id FROM sessions ORDER BY created_at, id")]


def files_under(root: Path) -> dict[str, bytes]:
    """Every file below ``root`` with its bytes (for before/after comparisons)."""
    if not root.exists():
        return {}
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }
