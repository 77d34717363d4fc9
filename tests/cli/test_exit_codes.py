"""The command line's exit codes come from one place (cli/exits.py, from the exception
tree's ``exit_code``): no command returns a failure's number of its own, and every entry
point maps a failure to its code the same way."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import rolecall.cli

CLI = Path(rolecall.cli.__file__).parent


def test_no_command_writes_a_failure_code_of_its_own() -> None:
    found = []
    for path in sorted(CLI.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, ast.Return) else None
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "exit":
                value = node.args[0] if node.args else None
            if isinstance(value, ast.Constant) and type(value.value) is int and value.value:
                found.append(f"{path.relative_to(CLI)}:{node.lineno}: {value.value}")
    assert found == [], "exit codes written in place of cli/exits.py's: " + ", ".join(found)


def test_the_repl_entry_point_exits_as_the_command_line_does(tmp_path: Path) -> None:
    """``python -m rolecall.cli.repl`` with a world that does not exist: exit 2, named."""
    env = {"ROLECALL_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.repl", "no_such_world"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "no_such_world" in done.stderr and "Traceback" not in done.stderr
