"""Issue 37's done-when, as a batch: a world whose role calls mcp-server-time and a
Python tool, both `approve: ask`, run with `rolecall batch --approve auto` (tools.md,
Approval): every call allowed by the flag and run; without the flag, refused."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tools.helpers import TIME, events, of, one_step_world, rolecall, write_world


def _desk() -> dict[str, Any]:
    return one_step_world(
        [
            {"call": "time.get_current_time", "arguments": {"timezone": "UTC"}},
            {"call": "compute", "arguments": {"expression": "6*7"}},
            "Here it is: {result}",
        ],
        tools={
            "mcp": {"time": {"command": TIME}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        },
        role_tools=["time.*", "compute"],
        approve="ask",
    )


@pytest.mark.timeout(150)  # batches whose runs each start an MCP server
def test_a_batch_with_approve_auto_runs_the_calls_a_role_must_ask_for(
    tmp_path: Path, data_dir: Path
) -> None:
    folder = write_world(tmp_path / "w", _desk())
    ran = rolecall("batch", str(folder), "--runs", "2", "--approve", "auto", "--json")
    assert ran.returncode == 0, ran.stderr
    evs = events(ran.stdout)
    assert len({e["session_id"] for e in evs if "session_id" in e}) == 2
    approvals = of(evs, "system/tool_approval")
    assert [(a["decision"], a["by"]) for a in approvals] == [("allow", "--approve auto")] * 4
    results = of(evs, "messages/tool_result")
    assert not any(r["is_error"] for r in results)
    assert sorted(r["content"] for r in results if r["tool"] == "compute") == ["6*7 = 42"] * 2
    times = [json.loads(r["content"]) for r in results if r["tool"] == "time.get_current_time"]
    assert [t["timezone"] for t in times] == ["UTC", "UTC"]
    said = [m["content"] for m in of(evs, "messages/message")]
    assert said == ["Here it is: 6*7 = 42"] * 2

    refused = rolecall("batch", str(folder), "--json")  # the default: --approve deny
    assert refused.returncode == 0, refused.stderr
    evs = events(refused.stdout)
    assert [a["by"] for a in of(evs, "system/tool_approval")] == ["--approve deny"] * 2
    (message,) = of(evs, "messages/message")
    assert message["content"].startswith("Here it is: refused: compute needs approval")
