"""Function calling through a provider (tools.md, Models): litellm and the lean http
client, against the loopback OpenAI-compatible server streaming tool-call deltas."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rolecall.money import money
from tests.llm.openai_server import OpenAITestServer, Reply, ToolCalls
from tests.tools.helpers import TIME, events, of, rolecall, write_world


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.mark.timeout(150)  # several rolecall processes, each starting MCP servers
@pytest.mark.parametrize("client", ["litellm", "http"])
def test_streamed_tool_call_deltas_run_the_tools_and_the_model_sees_the_results(
    client: str, server: OpenAITestServer, tmp_path: Path, data_dir: Path
) -> None:
    server.reset()
    server.queue(
        ToolCalls(
            (
                ("time__get_current_time", json.dumps({"timezone": "UTC"})),
                ("compute", json.dumps({"expression": "2**10"})),
            )
        )
    )
    server.queue(Reply("It is late and 2**10 is 1024.", prompt_tokens=40, completion_tokens=9))
    world = {
        "name": "desk",
        "topic": "tools",
        "model": "openai/test-model",
        "settings": {"api_base": server.base_url, "client": client, "retries": 0},
        "tools": {
            "mcp": {"time": {"command": TIME}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        },
        "roles": [
            {
                "id": "clerk",
                "tools": ["time.get_current_time", "compute"],
                "price": {"input_per_mtok": 1000, "output_per_mtok": 2000},
            }
        ],
        "flow": {"start": "s", "steps": [{"id": "s", "speaker": "clerk"}]},
    }
    env = {
        "OPENAI_API_KEY": "sk-test-key-0123456789",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "*",
    }
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json", env=env)
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    calls = of(evs, "messages/tool_call")
    assert [(c["tool"], c["arguments"]) for c in calls] == [
        ("time.get_current_time", {"timezone": "UTC"}),
        ("compute", {"expression": "2**10"}),
    ]
    results = of(evs, "messages/tool_result")
    assert json.loads(results[0]["content"])["timezone"] == "UTC"
    assert results[1]["content"] == "2**10 = 1024"
    (message,) = of(evs, "messages/message")
    assert message["content"] == "It is late and 2**10 is 1024."
    assert message["tool_calls"] == ["c1", "c2"]
    # both rounds counted in the message's tokens
    assert message["input_tokens"] == 13 + 40 and message["output_tokens"] == 5 + 9
    # and in its cost, and the session's totals (both rounds priced)
    cost = (13 + 40) * 1000 / 1e6 + (5 + 9) * 2000 / 1e6
    assert message["cost_usd"] == pytest.approx(cost)
    shown = rolecall("sessions", "show", message["session_id"], env=env)
    assert shown.returncode == 0, shown.stderr
    assert f"tokens: ↑{13 + 40} ↓{5 + 9} in 1 message · cost {money(cost)}" in shown.stdout

    first, second = (r.body for r in server.requests)
    offered = [t["function"]["name"] for t in first["tools"]]
    assert offered == ["time__get_current_time", "compute"]
    assert first["tools"][1]["function"]["parameters"]["required"] == ["expression"]
    # the second round carries the assistant's calls and one tool message per result
    assistant, *answers = second["messages"][-3:]
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_0", "call_1"]
    assert assistant["tool_calls"][0]["function"]["name"] == "time__get_current_time"
    assert [(a["role"], a["tool_call_id"]) for a in answers] == [
        ("tool", "call_0"),
        ("tool", "call_1"),
    ]
    assert answers[1]["content"] == "2**10 = 1024"


@pytest.mark.timeout(150)  # a rolecall process importing litellm
@pytest.mark.parametrize(
    ("client", "model"),
    [("litellm", "deepseek/deepseek-reasoner"), ("http", "openai/deepseek-reasoner")],
)
def test_a_model_that_cannot_call_tools_is_offered_none_with_one_warning(
    client: str, model: str, server: OpenAITestServer, tmp_path: Path, data_dir: Path
) -> None:
    # litellm's model map says deepseek-reasoner has no function calling
    server.reset()
    server.queue(Reply("First, without tools."), Reply("Second, still without."))
    world = {
        "name": "desk",
        "topic": "tools",
        "model": model,
        "settings": {"api_base": server.base_url, "client": client, "retries": 0},
        "tools": {"python": {"compute": "rolecall.examples.desk_tools:compute"}},
        "roles": [{"id": "clerk", "tools": ["compute"]}],
        "flow": {
            "start": "a",
            "steps": [
                {"id": "a", "speaker": "clerk", "next": "b"},
                {"id": "b", "speaker": "clerk"},
            ],
        },
    }
    env = {
        "OPENAI_API_KEY": "sk-test-key-0123456789",
        "DEEPSEEK_API_KEY": "sk-test-key-0123456789",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "NO_PROXY": "*",
    }
    result = rolecall("run", str(write_world(tmp_path / "w", world)), "--json", env=env)
    assert result.returncode == 0, result.stderr
    evs = events(result.stdout)
    said = [m["content"] for m in of(evs, "messages/message")]
    assert said == ["First, without tools.", "Second, still without."]
    assert len(server.requests) == 2
    assert all("tools" not in r.body for r in server.requests)
    (warning,) = [w for w in of(evs, "system/warning") if "cannot call tools" in w["message"]]
    assert warning["message"].startswith(f"{model} cannot call tools")
    assert "clerk" in warning["message"]
