"""`rolecall tools list`, the shipped research desk, --approve, an MCP server over
streamable HTTP (tools.md)."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.tools.helpers import NOTES, events, of, one_step_world, rolecall, write_world


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_tools_list_names_each_role_s_tools_and_where_they_come_from(data_dir: Path) -> None:
    result = rolecall("tools", "list", "worlds/research", "--json")
    assert result.returncode == 0, result.stderr
    listing = {r["role"]: r["tools"] for r in json.loads(result.stdout)["roles"]}
    assert [t["name"] for t in listing["researcher"]] == ["notes.search", "notes.read"]
    assert [t["name"] for t in listing["analyst"]] == ["word_count", "compute"]
    assert listing["analyst"][1]["source"] == "python rolecall.examples.desk_tools:compute"
    assert listing["researcher"][0]["source"].startswith("mcp notes (")
    assert listing["researcher"][0]["parameters"]["required"] == ["query"]
    text = rolecall("tools", "list", "worlds/research")
    assert text.returncode == 0, text.stderr
    assert "  word_count  [python rolecall.examples.desk_tools:word_count]" in text.stdout


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_the_research_desk_runs_offline_and_asks_before_filing_a_note(data_dir: Path) -> None:
    refused = rolecall("run", "worlds/research", "--json")
    assert refused.returncode == 0, refused.stderr
    evs = events(refused.stdout)
    assert [c["tool"] for c in of(evs, "messages/tool_call")] == [
        "notes.search",
        "word_count",
        "notes.add",
    ]
    search = of(evs, "messages/tool_result")[0]
    assert search["content"].startswith("honeybees: A honeybee colony keeps its brood")
    approvals = of(evs, "system/tool_approval")
    assert [(a["decision"], a["by"]) for a in approvals] == [
        ("allow", "policy"),
        ("allow", "policy"),
        ("deny", "--approve deny"),
    ]
    (warning,) = of(evs, "system/warning")
    assert "tool call c3 refused: notes.add needs approval" in warning["message"]
    assert "--approve auto" in warning["message"]
    assert of(evs, "messages/tool_result")[2]["is_error"] is True
    messages = of(evs, "messages/message")
    assert "I checked notes.search: honeybees:" in messages[0]["content"]

    allowed = rolecall("run", "worlds/research", "--json", "--approve", "auto")
    assert allowed.returncode == 0, allowed.stderr
    evs = events(allowed.stdout)
    assert of(evs, "system/tool_approval")[2]["by"] == "--approve auto"
    assert of(evs, "messages/tool_result")[2]["content"].startswith("saved note")
    assert not of(evs, "system/warning")


def test_approve_deny_tells_the_model_without_a_warning(tmp_path: Path, data_dir: Path) -> None:
    world = one_step_world(
        [{"call": "compute", "arguments": {"expression": "1+1"}}, "{result}"],
        tools={"python": {"compute": "rolecall.examples.desk_tools:compute"}},
        role_tools=["compute"],
        approve={"comp*": "deny"},
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    (approval,) = of(evs, "system/tool_approval")
    assert (approval["decision"], approval["by"]) == ("deny", "policy")
    (message,) = of(evs, "messages/message")
    assert message["content"] == "refused: clerk may not call compute (approve: deny)"
    assert not of(evs, "system/warning")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def notes_over_http() -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [*NOTES, "--http", str(port)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("the notes server did not listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_a_streamable_http_server_is_called_by_url(
    notes_over_http: str, tmp_path: Path, data_dir: Path
) -> None:
    world = one_step_world(
        [
            {"call": "notes.add", "arguments": {"title": "drones", "text": "males, no sting"}},
            {"call": "notes.read", "arguments": {"title": "drones"}},
            "{result}",
        ],
        tools={"mcp": {"notes": {"url": notes_over_http}}},
        role_tools=["notes.*"],
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    (message,) = of(evs, "messages/message")
    assert message["content"] == "males, no sting"
    listing = rolecall("tools", "list", str(tmp_path / "w"), "--json")
    assert listing.returncode == 0, listing.stderr
    (role,) = json.loads(listing.stdout)["roles"]
    assert role["tools"][0]["source"] == f"mcp notes ({notes_over_http})"
