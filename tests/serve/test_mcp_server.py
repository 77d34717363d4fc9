"""``rolecall serve --mcp``: driven by the official MCP SDK's own client, over stdio and
over streamable HTTP, as any MCP client would (docs/compare.md)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from tests.cli.test_run_cli import ROOT, rolecall

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(120)]

TOOLS = {"list_worlds", "start_session", "say", "read_session", "debate", "consensus"}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@asynccontextmanager
async def over_stdio(data_dir: Path, *flags: str) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "rolecall", "serve", "--mcp", "--data-dir", str(data_dir), *flags],
        env={k: os.environ[k] for k in ("PATH", "HOME") if k in os.environ},
        cwd=str(ROOT),
    )
    async with AsyncExitStack() as stack:
        read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def http_server(data_dir: Path) -> Iterator[str]:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall", "serve", "--mcp", "--port", str(port)],
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
                assert proc.poll() is None, "rolecall serve --mcp --port exited"
                time.sleep(0.1)
        else:
            pytest.fail("rolecall serve --mcp --port did not listen")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


@asynccontextmanager
async def over_http(url: str) -> AsyncIterator[ClientSession]:
    async with AsyncExitStack() as stack:
        read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
        session = await stack.enter_async_context(ClientSession(read, write))
        await session.initialize()
        yield session


async def call(session: ClientSession, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await session.call_tool(tool, arguments)
    assert not result.is_error, result.content
    data: dict[str, Any] = result.structured_content
    # the text a model reads says the same, after a readable first line
    text = result.content[0].text  # type: ignore[union-attr]
    assert json.loads(text.split("\n", 1)[1]) == data
    return data


async def debate_and_read_back(session: ClientSession) -> str:
    listed = await session.list_tools()
    assert {t.name for t in listed.tools} == TOOLS
    worlds = await call(session, "list_worlds")
    names = [w["name"] for w in worlds["worlds"]]
    assert {"classroom", "debate", "panel", "consult"} <= set(names)
    ran = await call(session, "debate", topic="Cities should ban cars", max_turns=2)
    sid = ran["session_id"]
    assert ran["state"] == "finished" and ran["stop_reason"] == "max_turns"
    senders = [m["sender"] for m in ran["transcript"]]
    assert senders == ["pro", "con", "moderator"]
    back = await call(session, "read_session", session_id=sid)
    assert back["transcript"] == ran["transcript"]
    after = await call(session, "read_session", session_id=sid[:17], after="m1")
    assert [m["id"] for m in after["transcript"]] == ["m2", "m3"]
    return str(sid)


def listed_ids(data_dir: Path) -> list[str]:
    out = rolecall("sessions", "list", "--json", "--data-dir", str(data_dir))
    assert out.returncode == 0, out.stderr
    return [r["session_id"] for r in json.loads(out.stdout)]


async def test_over_stdio_a_debate_is_run_read_back_and_stored(tmp_path: Path) -> None:
    data = tmp_path / "served"
    async with over_stdio(data) as session:
        sid = await debate_and_read_back(session)
    assert sid in listed_ids(data)


async def test_over_http_a_debate_is_run_read_back_and_stored(
    http_server: str, data_dir: Path
) -> None:
    async with over_http(http_server) as session:
        sid = await debate_and_read_back(session)
    assert sid in listed_ids(data_dir)


async def test_start_session_say_and_the_errors(tmp_path: Path) -> None:
    data = tmp_path / "served"
    async with over_stdio(data) as session:
        lesson = await call(session, "start_session", world="classroom", max_turns=2)
        assert lesson["stop_reason"] == "max_turns" and len(lesson["transcript"]) == 2
        chat = await call(session, "start_session", world="panel", topic="Cooling streets")
        assert chat["state"] != "finished" and chat["transcript"] == []
        said = await call(
            session, "say", session_id=chat["session_id"], text="@ecologist what cools a street?"
        )
        first, *replies = said["transcript"]
        assert first["sender"] == "human" and first["content"].startswith("@ecologist")
        assert replies and replies[0]["sender"] == "ecologist"
        # a tool's error names the problem; the server goes on
        bad = await session.call_tool("start_session", {"world": "nowhere"})
        assert bad.is_error and "nowhere" in bad.content[0].text  # type: ignore[union-attr]
        flow = await session.call_tool("say", {"session_id": lesson["session_id"], "text": "hi"})
        assert flow.is_error and "not a chat" in flow.content[0].text  # type: ignore[union-attr]
        gone = await session.call_tool("read_session", {"session_id": "20990101-000000-abcdef"})
        assert gone.is_error and "20990101-000000-abcdef" in gone.content[0].text  # type: ignore[union-attr]
        still = await call(session, "read_session", session_id=lesson["session_id"])
        assert len(still["transcript"]) == 2
    assert {lesson["session_id"], chat["session_id"]} <= set(listed_ids(data))


def exported(data: Path, sid: str) -> str:
    out = rolecall("sessions", "export", sid, "--format", "json", "--data-dir", str(data))
    assert out.returncode == 0, out.stderr
    return out.stdout


async def test_an_approval_tool_is_refused_unless_approve_auto(tmp_path: Path) -> None:
    data = tmp_path / "served"
    async with over_stdio(data) as session:
        ran = await call(session, "start_session", world="research")
    assert ran["state"] == "finished"
    refused = exported(data, ran["session_id"])
    assert "start the server with `rolecall serve --mcp --approve auto`" in refused
    async with over_stdio(data, "--approve", "auto") as session:
        allowed = await call(session, "start_session", world="research")
    done = exported(data, allowed["session_id"])
    assert "--approve auto" in done  # the decision: by the server's flag
    assert "start the server with" not in done and "saved note" in done


def test_serve_needs_mcp_and_a_free_port(tmp_path: Path) -> None:
    out = rolecall("serve", "--data-dir", str(tmp_path))
    assert out.returncode == 2 and "serve needs --mcp" in out.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = rolecall("serve", "--mcp", "--port", str(port), "--data-dir", str(tmp_path))
    assert out.returncode == 2
    assert f"cannot listen on 127.0.0.1:{port}" in out.stderr and "Traceback" not in out.stderr
