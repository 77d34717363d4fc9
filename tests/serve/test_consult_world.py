"""rolecall as the MCP client of rolecall: the shipped ``consult`` world's chair has a
tool that is another rolecall world (``rolecall serve --mcp``'s ``debate``), offline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall


@pytest.mark.timeout(150)  # two rolecall processes: the panel's, and the server it starts
def test_the_panel_consults_a_debate_through_mcp(data_dir: Path) -> None:
    out = rolecall("run", "consult", "--json")
    assert out.returncode == 0, out.stderr
    events = [json.loads(line) for line in out.stdout.splitlines()]
    (call,) = [e for e in events if e["type"] == "tool_call"]
    assert call["sender"] == "chair" and call["tool"] == "rolecall.debate"
    (result,) = [e for e in events if e["type"] == "tool_result"]
    assert not result["is_error"], result["content"]
    first, _, rest = result["content"].partition("\n")
    debate = json.loads(rest)
    assert first == f"session {debate['session_id']}: finished (max_turns), 11 messages"
    assert [m["sender"] for m in debate["transcript"]][-1] == "moderator"
    consult_id = events[0]["session_id"]
    # the debate is a session of its own, stored beside the panel's (ROLECALL_HOME)
    listed = json.loads(rolecall("sessions", "list", "--json").stdout)
    by_id = {r["session_id"]: r for r in listed}
    assert by_id[debate["session_id"]]["world"] == "debate"
    assert by_id[consult_id]["world"] == "consult"
    stored = json.loads(
        rolecall("sessions", "export", debate["session_id"], "--format", "json").stdout
    )
    assert [m["content"] for m in stored["messages"]] == [
        m["content"] for m in debate["transcript"]
    ]
    # the chair told the panel what came back; the panel went on to its last step
    messages = [e for e in events if e["type"] == "message"]
    assert messages[0]["sender"] == "chair"
    assert f"session {debate['session_id']}: finished" in messages[0]["content"]
    stop = next(e for e in events if e["type"] == "stop")
    assert stop["reason"] == "flow_end"
