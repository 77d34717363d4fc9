"""The JSON API, the SSE stream under many viewers and broken clients, the token, the
flow editor's validation: over real HTTP to a real `rolecall web` process."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

import rolecall as rolecall_api
from tests.web.conftest import Server, Site, rolecall, start_server, stop_server

pytestmark = pytest.mark.anyio


async def _sse(
    client: httpx.AsyncClient, url: str, limit: int | None = None
) -> list[dict[str, Any]]:
    """The events of an SSE stream, until its `end` (or `limit` events); other named
    events (`rest`) are left out, as a browser's onmessage leaves them."""
    events: list[dict[str, Any]] = []
    async with client.stream("GET", url) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        kind = "message"
        async for line in response.aiter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                if kind == "end":
                    return events
                if kind != "message":  # `rest`: what a held session does now, not an event
                    continue
                events.append(json.loads(line.split(":", 1)[1]))
                if limit is not None and len(events) >= limit:
                    return events
            elif not line:
                kind = "message"
    return events


async def _start(client: httpx.AsyncClient, base: str, world: str) -> str:
    answer = await client.post(f"{base}/api/sessions", json={"world": world})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session_id"])


async def test_api_lists_sessions_and_serves_events_after_a_seq(server: Server, site: Site) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        listed = (await client.get(f"{server.url}/api/sessions?world=tutoring")).json()
        assert listed["total"] == 1
        row = listed["sessions"][0]
        assert row["session_id"] == site.ids["tutoring"]
        assert row["messages"] >= 4 and row["output_tokens"] > 0
        sid = site.ids["hostile"]
        events = (await client.get(f"{server.url}/api/sessions/{sid}/events?after=10")).json()
        seqs = [e["seq"] for e in events]
        assert seqs[0] == 11 and seqs == list(range(11, 11 + len(seqs)))
        assert events[-1]["topic"] == "world" and events[-1]["type"] == "stop"
        assert all(e["session_id"] == sid for e in events)
        missing = await client.get(f"{server.url}/api/sessions/20990101-000000-abcdef/events")
        assert missing.status_code == 404
        bad = await client.post(f"{server.url}/api/sessions", json={"world": "no-such-world"})
        assert bad.status_code == 422 and "no world" in bad.json()["error"]


async def test_a_hundred_viewers_each_get_every_event_in_order(server: Server) -> None:
    limits = httpx.Limits(max_connections=120)
    async with httpx.AsyncClient(timeout=30, limits=limits) as client:
        sid = await _start(client, server.url, "slow")
        streams: list[list[dict[str, Any]]] = []

        async def view() -> None:
            streams.append(await _sse(client, f"{server.url}/api/sessions/{sid}/stream"))

        with anyio.fail_after(45):
            async with anyio.create_task_group() as tg:
                for _ in range(100):
                    tg.start_soon(view)
    assert len(streams) == 100
    reference = [e["seq"] for e in streams[0]]
    assert reference == list(range(1, len(reference) + 1))
    assert streams[0][-1]["type"] == "stop"
    assert any(e["topic"] == "sse" and e["type"] == "chunk" for e in streams[0])
    for events in streams:
        assert [e["seq"] for e in events] == reference


async def test_a_viewer_leaving_mid_stream_does_not_disturb_the_session(server: Server) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        sid = await _start(client, server.url, "slow")
        first = await _sse(client, f"{server.url}/api/sessions/{sid}/stream", limit=5)
        assert [e["seq"] for e in first] == [1, 2, 3, 4, 5]
        # the stream was dropped after 5 events; the session still runs to its end
        with anyio.fail_after(30):
            rest = await _sse(client, f"{server.url}/api/sessions/{sid}/stream?after=5")
        assert rest[0]["seq"] == 6 and rest[-1]["type"] == "stop"
        state = (await client.get(f"{server.url}/api/sessions/{sid}")).json()
        assert state["state"]["state"] == "finished" and len(state["messages"]) == 3


def test_a_non_loopback_host_needs_a_token(site: Site) -> None:
    refused = rolecall(
        "web",
        "--host",
        "0.0.0.0",
        "--port",
        "0",
        "--data-dir",
        str(site.data),
        cwd=site.root,
        timeout=20,
    )
    assert refused.returncode == 2
    assert "--token" in refused.stderr and "Traceback" not in refused.stderr


async def test_with_a_token_every_request_needs_it(site: Site) -> None:
    server = start_server(site, "--token", "s3cret")
    try:
        base = server.url
        async with httpx.AsyncClient(timeout=10) as client:
            assert (await client.get(f"{base}/")).status_code == 401
            assert (await client.get(f"{base}/api/sessions")).status_code == 401
            assert (await client.get(f"{base}/?token=wrong")).status_code == 401
            entered = await client.get(f"{base}/?token=s3cret", follow_redirects=True)
            assert entered.status_code == 200 and "Sessions" in entered.text
            assert (await client.get(f"{base}/api/sessions")).status_code == 200  # the cookie
        async with httpx.AsyncClient(timeout=10) as other:
            bearer = await other.get(
                f"{base}/api/sessions", headers={"authorization": "Bearer s3cret"}
            )
            assert bearer.status_code == 200
    finally:
        stop_server(server)


def test_web_without_its_dependencies_says_how_to_install(site: Site, tmp_path: Path) -> None:
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] in ('starlette', 'uvicorn'):\n"
        "            raise ModuleNotFoundError(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Block())\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", "web", "--data-dir", str(site.data)],
        cwd=site.root,
        env={
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(blocker), os.environ.get("PYTHONPATH", "")]),
        },
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 2
    assert "pip install 'rolecall[web]'" in done.stderr
    assert "starlette" in done.stderr and "Traceback" not in done.stderr


async def test_stopping_the_server_pauses_the_sessions_it_runs(site: Site) -> None:
    server = start_server(site, env={"ROLECALL_STREAM_DELAY": "0.2"})
    try:
        async with httpx.AsyncClient(timeout=30) as client:
            sid = await _start(client, server.url, "slow")
            seen = await _sse(client, f"{server.url}/api/sessions/{sid}/stream", limit=12)
            assert any(e["type"] == "chunk" for e in seen)
    finally:
        stop_server(server)  # SIGTERM, mid-reply
    assert server.process.returncode == 143, server.stderr
    with sqlite3.connect(site.data / "rolecall.db") as db:
        ((state, stop_reason),) = db.execute(
            "SELECT state, stop_reason FROM sessions WHERE id = ?", (sid,)
        ).fetchall()
    assert (state, stop_reason) == ("paused", None)
    resumed = rolecall("resume", sid, "--data-dir", str(site.data), "--json", cwd=site.root)
    assert resumed.returncode == 0, resumed.stderr
    assert '"reason":"flow_end"' in resumed.stdout


async def test_a_session_the_server_runs_is_refused_to_another_process(
    server: Server, site: Site
) -> None:
    async with httpx.AsyncClient(timeout=30) as client:
        sid = await _start(client, server.url, "slow")
        seen = await _sse(client, f"{server.url}/api/sessions/{sid}/stream", limit=3)
        assert seen, "the run started"
        refused = await anyio.to_thread.run_sync(
            lambda: rolecall("resume", sid, "--data-dir", str(site.data), cwd=site.root)
        )
        assert refused.returncode == 1, refused.stderr
        assert f"session {sid} is open in another process (pid {server.process.pid}" in (
            refused.stderr
        )
        assert "Traceback" not in refused.stderr
        rest = await _sse(client, f"{server.url}/api/sessions/{sid}/stream")
    finished = [e for e in rest if e["type"] == "stop"]
    assert finished and finished[-1]["reason"] == "flow_end"  # the server's run went on
    for _ in range(200):  # the finished run lets its session go (within 10 s)
        if not (site.data / "rolecall.db-claims" / sid).exists():
            break
        await anyio.sleep(0.05)
    assert not (site.data / "rolecall.db-claims" / sid).exists()


async def test_a_session_open_elsewhere_is_not_driven_from_the_page(
    server: Server, site: Site
) -> None:
    made = rolecall(
        "run",
        "slow",
        "--mode",
        "step",
        "--data-dir",
        str(site.data),
        "--json",
        cwd=site.root,
        stdin="\n",
    )
    assert made.returncode == 0, made.stderr
    sid = json.loads(made.stdout.splitlines()[0])["session_id"]
    async with httpx.AsyncClient(timeout=30) as client:
        async with rolecall_api.resume(
            sid, data_dir=site.data, mode="step"
        ):  # held by this process
            answer = await client.post(
                f"{server.url}/api/sessions/{sid}/control", json={"action": "next"}
            )
            assert answer.status_code == 409, answer.text
            assert answer.json()["error"].startswith(
                f"session {sid} is open in another process (pid {os.getpid()}"
            )
        answer = await client.post(  # let go: the page drives it now
            f"{server.url}/api/sessions/{sid}/control", json={"action": "next"}
        )
        assert answer.status_code == 202, answer.text
