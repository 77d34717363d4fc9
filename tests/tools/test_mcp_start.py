"""What a user is told about a stdio MCP server that misbehaves (tools.md): one that
fails to start is named with the last line it wrote on its stderr; one that writes lines
that are not JSON-RPC on its stdout works, with one warning line naming it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tools.helpers import events, of, one_step_world, rolecall, write_world

NOISY = """\
import sys

for i in range(4):  # a banner on stdout, where only JSON-RPC belongs
    print(f"noisy banner line {i}: starting up", flush=True)

from tests.tools.mcp_fixture import server

server.run()
"""


def test_a_server_that_fails_to_start_is_named_with_its_last_stderr_line(
    tmp_path: Path, data_dir: Path
) -> None:
    failing = tmp_path / "failing.py"
    failing.write_text(
        "import sys\n"
        "print('reading the configuration', file=sys.stderr)\n"
        "print('fatal: no such file /srv/notes.db', file=sys.stderr, flush=True)\n"
        "sys.exit(1)\n",
        encoding="utf-8",
    )
    world = one_step_world(
        ["hello"],
        tools={"mcp": {"notes": {"command": [sys.executable, str(failing)]}}},
        role_tools=["notes.*"],
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)))
    assert result.returncode == 2, result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if "tools.mcp.notes" in ln]
    assert "the server did not start" in line
    assert line.endswith("; it said: fatal: no such file /srv/notes.db"), line
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(60)
def test_lines_that_are_not_json_on_a_servers_stdout_are_one_warning_naming_it(
    tmp_path: Path, data_dir: Path
) -> None:
    noisy = tmp_path / "noisy.py"
    noisy.write_text(NOISY, encoding="utf-8")
    world = one_step_world(
        [{"call": "loud.echo", "arguments": {"text": "still here"}}, "it answered: {result}"],
        tools={
            "mcp": {
                "loud": {"command": [sys.executable, str(noisy)], "env": {"PYTHONPATH": str(ROOT)}}
            }
        },
        role_tools=["loud.*"],
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert result.returncode == 0, result.stderr
    [message] = of(events(result.stdout), "messages/message")
    assert message["content"] == "it answered: still here"
    err = result.stderr.splitlines()
    assert "Traceback" not in result.stderr, result.stderr[:3000]
    [warning] = err  # nothing else on stderr
    assert "MCP server loud" in warning and "not a JSON-RPC message" in warning, warning
    assert "noisy banner line 0" in warning  # which line it was
