"""Audiences on a real ``nats-server -js`` (docs/audiences.md): a remote agent is sent
only what its role may see, the session's stream still holds everything, `watch` shows
the audience, and `sessions import` keeps it."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from contextlib import closing
from pathlib import Path
from typing import Any

import nats
import pytest

from tests.cluster.test_agents import events, stop
from tests.faults import Cli
from tests.nats_server import NatsServer

pytestmark = pytest.mark.timeout(240)  # four processes on a real server, on a busy machine

MARKER = "zanzibar"  # only c's private message holds it


def trio_world(folder: Path) -> Path:
    world = folder / "trio"
    world.mkdir(exist_ok=True)
    (world / "world.yaml").write_text(
        f"""\
name: trio
topic: t
model: scripted
settings: {{agent_timeout: 5, retries: 1}}
roles:
  - {{id: a, script: ["a says {{n}} one two three"]}}
  - {{id: b, transport: nats, script: ["b says {{n}} four five"]}}
  - {{id: c, script: ["c tells a the word {MARKER}"]}}
flow:
  steps:
    - {{id: s1, speaker: a, reply_to: none}}
    - {{id: s2, speaker: c, audience: [a, c]}}
    - {{id: s3, speaker: b}}
    - {{id: s4, speaker: a}}
""",
        encoding="utf-8",
    )
    return world


class Spy:
    """A plain subscriber beside the agents' queue group: a copy of every request sent to
    role b's agents, as the agent process receives it."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.payloads: list[str] = []
        self.ready = threading.Event()
        self.done: asyncio.Event | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread = threading.Thread(target=lambda: asyncio.run(self._main()), daemon=True)

    async def _main(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.done = asyncio.Event()
        conn = await nats.connect(self.url)

        async def on_request(msg: Any) -> None:
            self.payloads.append(msg.data.decode("utf-8"))

        await conn.subscribe("rolecall_agents.trio.b", cb=on_request)
        await conn.flush()
        self.ready.set()
        await self.done.wait()
        await conn.drain()

    def __enter__(self) -> Spy:
        self.thread.start()
        assert self.ready.wait(10), "the spy did not connect"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.loop is not None and self.done is not None
        self.loop.call_soon_threadsafe(self.done.set)
        self.thread.join(10)


def test_a_remote_agent_is_sent_only_what_its_role_saw(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    trio_world(tmp_path)
    agent = cli.popen(
        "agent", "b", "--world", "./trio", "--nats", nats.url, "--log-file", str(tmp_path / "b.log")
    )
    assert agent.stderr is not None
    assert agent.stderr.readline().startswith("ready: agent for role b of world trio")
    try:
        with Spy(nats.url) as spy:
            done = cli.run("run", "./trio", "--nats", nats.url, "--json")
    finally:
        stop(agent)
    assert done.returncode == 0, done.stderr
    found = events(done.stdout)
    said = [e for e in found if e["topic"] == "messages" and e["type"] == "message"]
    assert [(e["sender"], e.get("audience")) for e in said] == [
        ("a", None),
        ("c", ["a", "c"]),
        ("b", None),
        ("a", None),
    ]
    assert said[2]["reply_to"] == said[0]["message_id"]  # b answers what it saw
    # what went over the wire to b's agents: its prompt, never the private message
    assert spy.payloads, "b's agent was asked"
    assert all(MARKER not in p for p in spy.payloads)
    assert any("a says 1" in p for p in spy.payloads)
    sid = said[0]["session_id"]
    # the stream keeps everything; watch shows the audience
    watched = cli.run("watch", sid, "--from-start", "--nats", nats.url, timeout=20)
    assert watched.returncode == 0, watched.stderr
    assert "(to a, c only)" in watched.stdout and MARKER in watched.stdout
    # imported elsewhere, the private message keeps its audience
    elsewhere = Cli(home=tmp_path / "elsewhere", guard=cli.guard, cwd=tmp_path)
    imported = elsewhere.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    with closing(sqlite3.connect(elsewhere.home / "rolecall.db")) as db:
        bodies = [
            json.loads(b)
            for (b,) in db.execute(
                "SELECT body FROM messages WHERE session_id = ? ORDER BY idx", (sid,)
            )
        ]
    assert [m.get("audience") for m in bodies] == [None, ["a", "c"], None, None]
    as_b = elsewhere.run("sessions", "show", sid, "--as", "b")
    assert as_b.returncode == 0 and MARKER not in as_b.stdout
