"""Helpers for the management-command tests (``rolecall sessions|roles|memory``).

``call`` runs a command in-process through the command line's own parser and handler
(:mod:`rolecall.cli.registry`) with the same error-to-exit-code mapping as
``rolecall.cli.commands.dispatch`` (without configuring logging, which is process-wide).
``rolecall`` runs any command in a subprocess through ``rolecall.cli.main``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

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

# ``rolecall ARGV...`` as the installed command runs it: the real command line, nothing
# patched (``python -c`` rather than the console script: the test's own interpreter).
SHIM = r"""
import sys
from rolecall.cli.main import main
sys.exit(main(sys.argv[1:]))
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
    from rolecall.cli.main import build_parser
    from rolecall.cli.registry import COMMANDS, handler

    parser = build_parser()
    capsys.readouterr()
    args = parser.parse_args(list(argv))
    target = next(command.handler for command in COMMANDS if command.name == args.command)
    try:
        code = handler(target)(args)
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
