"""Tools on NATS (tools.md, nats.md), with a real `nats-server -js`: a batch run by a
worker starts its MCP servers on the worker and answers `ask` calls by the batch's
`--approve`; a remote role's agent relays its model's calls, which the session runs.
The tool events go over the cluster's subjects and are stored there."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.test_agents import served, start_agent, stop
from tests.cluster.test_workers import start_worker
from tests.conftest import ROOT
from tests.faults import Cli
from tests.nats_server import NatsServer

FIXTURE = [sys.executable, "-m", "tests.tools.mcp_fixture"]
COMPUTE = "rolecall.examples.desk_tools:compute"


def lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def of(found: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    topic, _, type_ = kind.partition("/")
    return [e for e in found if e.get("topic") == topic and e.get("type") == type_]


def write(folder: Path, name: str, world: dict[str, Any]) -> Path:
    where = folder / name
    where.mkdir(exist_ok=True)
    (where / "world.yaml").write_text(yaml.safe_dump(world, sort_keys=False), encoding="utf-8")
    return where


@pytest.mark.timeout(180)  # a worker, a batch, an import: several processes
def test_a_worker_runs_the_tools_on_its_side_and_approves_by_the_batch_flag(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = {
        "name": "desk",
        "topic": "t",
        "model": "scripted",
        "tools": {
            "mcp": {"fx": {"command": FIXTURE, "env": {"PYTHONPATH": str(ROOT)}}},
            "python": {"compute": COMPUTE},
        },
        "roles": [
            {
                "id": "clerk",
                "tools": ["fx.parent", "compute"],
                "approve": "ask",
                "script": [
                    {"call": "fx.parent", "arguments": {}},
                    {"call": "compute", "arguments": {"expression": "6*7"}},
                    "ran where asked: {result}",
                ],
            }
        ],
        "flow": {"steps": [{"id": "s1", "speaker": "clerk"}]},
    }
    folder = write(tmp_path, "desk", world)
    worker = start_worker(cli, nats, tmp_path / "w1")
    try:
        done = cli.run(
            "batch", str(folder), "--name", "tooled", "--nats", nats.url, "--approve", "auto",
            "--json", timeout=120,
        )  # fmt: skip
        # the events as the cluster's stream holds them, from its subjects
        assert done.returncode == 0, (done.stdout, done.stderr)
        sid = next(e["session_id"] for e in lines(done.stdout) if "session_id" in e)
        watched = cli.run("watch", sid, "--nats", nats.url, "--from-start", "--json")
    finally:
        stop(worker)
    assert done.returncode == 0, done.stderr
    found = lines(done.stdout)
    approvals = of(found, "system/tool_approval")
    assert [(a["decision"], a["by"]) for a in approvals] == [("allow", "--approve auto")] * 2
    where, computed = of(found, "messages/tool_result")
    assert where["tool"] == "fx.parent" and not where["is_error"]
    assert int(where["content"]) == worker.pid  # the worker started the MCP server
    assert computed["content"] == "6*7 = 42"
    (message,) = of(found, "messages/message")
    assert message["content"] == "ran where asked: 6*7 = 42"

    assert watched.returncode == 0, watched.stderr
    kinds = [(e["type"], e.get("call_id")) for e in lines(watched.stdout)]
    assert [k for k in kinds if k[0].startswith("tool")] == [
        ("tool_call", "c1"), ("tool_approval", "c1"), ("tool_result", "c1"),
        ("tool_call", "c2"), ("tool_approval", "c2"), ("tool_result", "c2"),
    ]  # fmt: skip

    # gathered from the stream into this data directory: stored with their calls
    imported = cli.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    shown = cli.run("sessions", "show", sid)
    assert shown.returncode == 0, shown.stderr
    assert '  ⚙ compute(expression="6*7") → 6*7 = 42 · ' in shown.stdout


@pytest.mark.timeout(180)  # an agent, a session: several processes
def test_a_remote_role_s_calls_are_relayed_by_its_agent_and_run_by_the_session(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = {
        "name": "duo",
        "topic": "t",
        "model": "scripted",
        "settings": {"agent_timeout": 5, "retries": 1},
        "tools": {"python": {"compute": COMPUTE}},
        "roles": [
            {"id": "a", "script": ["what is 6*7?"]},
            {
                "id": "b",
                "transport": "nats",
                "tools": ["compute"],
                "approve": "ask",
                "script": [
                    {"call": "compute", "arguments": {"expression": "6*7"}},
                    "b found {result}",
                ],
            },
        ],
        "flow": {"steps": [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}]},
    }
    write(tmp_path, "duo", world)
    agent = start_agent(cli, nats, tmp_path / "agent.log")
    try:
        done = cli.run("run", "./duo", "--nats", nats.url, "--approve", "auto", "--json")
        sid = next(e["session_id"] for e in lines(done.stdout) if "session_id" in e)
        watched = cli.run("watch", sid, "--nats", nats.url, "--from-start", "--json")
    finally:
        stop(agent)
    assert done.returncode == 0, done.stderr
    found = lines(done.stdout)
    (call,) = of(found, "messages/tool_call")
    assert (call["sender"], call["tool"], call["arguments"]) == (
        "b",
        "compute",
        {"expression": "6*7"},
    )
    (approval,) = of(found, "system/tool_approval")
    assert approval["by"] == "--approve auto"
    (result,) = of(found, "messages/tool_result")
    assert result["content"] == "6*7 = 42"
    said = [(m["sender"], m["content"]) for m in of(found, "messages/message")]
    assert said == [("a", "what is 6*7?"), ("b", "b found 6*7 = 42")]
    assert served(tmp_path / "agent.log") == 2  # b's turn: its call, then its text
    assert watched.returncode == 0, watched.stderr
    assert [e["type"] for e in lines(watched.stdout) if e["type"].startswith("tool")] == [
        "tool_call", "tool_approval", "tool_result"
    ]  # fmt: skip
