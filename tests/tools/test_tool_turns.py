"""A role that calls tools, run from the CLI as a user runs it (tools.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.tools.helpers import (
    FIXTURE,
    TIME,
    events,
    of,
    one_step_world,
    rolecall,
    write_world,
)


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_scripted_role_calls_mcp_server_time_and_a_python_tool(
    tmp_path: Path, data_dir: Path
) -> None:
    world = one_step_world(
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
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    calls = of(evs, "messages/tool_call")
    results = of(evs, "messages/tool_result")
    assert [c["tool"] for c in calls] == ["time.get_current_time", "compute"]
    assert calls[0]["arguments"] == {"timezone": "UTC"}
    assert [a["decision"] for a in of(evs, "system/tool_approval")] == ["allow", "allow"]
    current = json.loads(results[0]["content"])
    assert current["timezone"] == "UTC" and not results[0]["is_error"]
    assert results[1]["content"] == "6*7 = 42"
    (message,) = of(evs, "messages/message")
    assert message["content"] == "Here it is: 6*7 = 42"
    assert message["tool_calls"] == [c["call_id"] for c in calls]
    # each call's events come before the message, and the result after its call
    order = [e["seq"] for e in [calls[0], results[0], calls[1], results[1], message]]
    assert order == sorted(order)

    # stored as published: the session's events hold the calls and results
    sid = evs[0]["session_id"]
    shown = rolecall("sessions", "export", sid, "--format", "json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    stored_kinds = [f"{e['topic']}/{e['type']}" for e in doc["events"]]
    assert stored_kinds.count("messages/tool_result") == 2
    assert doc["messages"][0]["tool_calls"] == message["tool_calls"]
    # the speaker's memory file records its calls with its message
    assert doc["memory"]["clerk"][0]["tool_calls"] == message["tool_calls"]
    # the Markdown export shows them collapsed, one line per call, under the message
    md = rolecall("sessions", "export", sid, "--format", "md")
    assert md.returncode == 0, md.stderr
    assert "<details><summary>2 tool calls</summary>" in md.stdout
    assert '- `compute` {"expression": "6\\*7"} → 6\\*7 = 42 (' in md.stdout


def test_world_errors_name_every_problem_with_exit_2(tmp_path: Path, data_dir: Path) -> None:
    world = one_step_world(
        ["hello"],
        tools={
            "mcp": {
                "time": {"command": TIME},
                "broken": {"command": ["/nonexistent/mcp-server"]},
            },
            "python": {"gone": "no_such_module_here:fn"},
        },
        role_tools=["time.*", "clock.*", "gone", "broken.*"],
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)))
    assert result.returncode == 2, result.stderr
    err = result.stderr
    assert "'clock.*' matches no tool" in err
    assert "tools.python.gone: no_such_module_here:fn does not import" in err
    assert "tools.mcp.broken: the server did not start" in err
    assert "Traceback" not in err


def test_a_server_that_exits_at_once_is_an_error_not_a_hang(tmp_path: Path, data_dir: Path) -> None:
    world = one_step_world(
        ["hello"],
        tools={"mcp": {"dead": {"command": ["python3", "-c", "import sys; sys.exit(4)"]}}},
        role_tools=["dead.*"],
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)))
    assert result.returncode == 2, result.stderr
    assert "tools.mcp.dead: the server did not start" in result.stderr


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
def test_bad_cases_give_the_model_an_error_result_and_the_turn_goes_on(
    tmp_path: Path, data_dir: Path
) -> None:
    world = one_step_world(
        [
            {"call": "fx.sleep", "arguments": {"seconds": 30}},
            "after the sleep: {result}",
            {"call": "fx.big", "arguments": {"chars": 1_000_000}},
            "big: {result}",
            {"call": "fx.echo", "arguments": {"txt": "wrong key"}},
            "bad arguments: {result}",
            {"call": "fx.crash"},
            "after the crash: {result}",
            {"call": "fx.echo", "arguments": {"text": "anyone there?"}},
            "after it died: {result}",
        ],
        tools={"mcp": {"fx": {"command": FIXTURE, "timeout": 2}}},
        role_tools=["fx.*"],
        settings={"max_tool_result_chars": 1000},
        steps=5,
    )
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    results = of(evs, "messages/tool_result")
    assert [r["is_error"] for r in results] == [True, False, True, True, True]
    assert results[0]["content"] == "timed out after 2 s"
    big = results[1]["content"]
    assert big.startswith("x" * 1000) and "[cut: the result had 1000000 characters" in big
    assert len(big) < 1100
    assert "'text' is a required property" in results[2]["content"]
    assert "fx" in results[4]["content"] and "not running" in results[4]["content"]
    warnings = [w["message"] for w in of(evs, "system/warning")]
    assert any("MCP server fx stopped" in w for w in warnings), warnings
    messages = of(evs, "messages/message")
    assert len(messages) == 5  # every turn was said
    assert messages[0]["content"] == "after the sleep: timed out after 2 s"


def test_a_server_gets_only_the_variables_the_world_lists(tmp_path: Path, data_dir: Path) -> None:
    world = one_step_world(
        [{"call": "fx.env"}, "{result}"],
        tools={"mcp": {"fx": {"command": FIXTURE, "env": {"NOTES_DIR": "/tmp/n"}}}},
        role_tools=["fx.env"],
    )
    env = {"OPENAI_API_KEY": "sk-test-secret-value-1234", "ROLECALL_TEST_OTHER": "1"}
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json", env=env)
    assert result.returncode == 0, result.stderr
    (res,) = of(events(result.stdout), "messages/tool_result")
    names = set(res["content"].split())
    assert {"NOTES_DIR", "PATH", "HOME"} <= names
    assert "OPENAI_API_KEY" not in names and "ROLECALL_TEST_OTHER" not in names
