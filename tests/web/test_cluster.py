"""`rolecall web --nats URL`: sessions that run on another machine of a NATS cluster (here:
another process with its own data dir, on a real `nats-server -js`), watched in chromium
chunk by chunk, listed, and read from the stream."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.nats_server import NatsServer, free_port, nats_server
from tests.web.conftest import (
    SLOW_WORLD,
    Server,
    Site,
    rolecall,
    start_server,
    stop_server,
    streaming_so_far,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[NatsServer]:
    with nats_server(tmp_path / "nats") as server:
        yield server


@pytest.fixture
def watcher(tmp_path: Path, cluster: NatsServer) -> Iterator[tuple[Server, Site]]:
    """A web server with an empty store of its own, following the cluster."""
    site = Site(root=tmp_path, data=tmp_path / "web-data", ids={})
    (tmp_path / "worlds" / "slow").mkdir(parents=True)
    (tmp_path / "worlds" / "slow" / "world.yaml").write_text(SLOW_WORLD)
    served = start_server(site, "--nats", cluster.url)
    yield served, site
    stop_server(served)


def _remote_run(site: Site, url: str, delay: str) -> subprocess.Popen[str]:
    """`rolecall run slow --nats URL` with a data dir the web server never reads."""
    argv = ["run", "slow", "--nats", url, "--data-dir", str(site.root / "elsewhere"), "--json"]
    return subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", *argv],
        cwd=site.root,
        env={**os.environ, "ROLECALL_STREAM_DELAY": delay},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def _cluster_row(server: Server, deadline_s: float = 20) -> str:
    """The id of the first session the sessions page lists under the cluster."""
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        html = _get(server.url + "/")
        marker = 'class="cluster-row" data-session="'
        if marker in html:
            return html.split(marker, 1)[1].split('"', 1)[0]
        time.sleep(0.1)
    raise AssertionError("the sessions page never listed the cluster's session")


def test_a_session_on_another_machine_streams_into_the_page(
    page: Any, watcher: tuple[Server, Site], cluster: NatsServer
) -> None:
    server, site = watcher
    run = _remote_run(site, cluster.url, "0.05")
    try:
        sid = _cluster_row(server)
        # not in the web server's store: only the stream has it
        assert sid not in _get(server.url + "/api/sessions")
        page.goto(f"{server.url}/s/{sid}")
        # the words of a reply arrive one by one from the stream, before it is complete
        mid, partial = streaming_so_far(page)
        page.wait_for_function(
            "document.getElementById('status').textContent.startsWith('finished')",
            timeout=30_000,
        )
        page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")
        final = page.locator(f"#{mid} .body").inner_text().strip()
        assert final.startswith(partial) and len(final) > len(partial)
        assert page.locator("#m1 .body").inner_text().strip().endswith("sixteen")
        assert page.locator("#m2 a.reply").get_attribute("href") == "#m1"
    finally:
        out, err = run.communicate(timeout=60)
    assert run.returncode == 0, err
    # the page's events are the run's own, in order, each once
    ran = [json.loads(line) for line in out.splitlines()]
    shown = json.loads(_get(f"{server.url}/api/sessions/{sid}/events?after=0"))
    assert [(e["seq"], e["topic"], e["type"]) for e in shown] == [
        (e["seq"], e["topic"], e["type"]) for e in ran
    ]
    # read without JavaScript once it has ended: the whole thread, from the stream
    html = _get(f"{server.url}/s/{sid}")
    assert html.count('<article class="message') == 3 and "finished (" in html
    listed = _get(server.url + "/?status=finished")
    assert f'class="cluster-row" data-session="{sid}"' in listed
    assert 'class="cluster-row"' not in _get(server.url + "/?status=paused")
    # the page follows it; only the process that runs it drives it
    request = urllib.request.Request(
        f"{server.url}/api/sessions/{sid}/control",
        data=b'{"action": "pause"}',
        headers={"content-type": "application/json"},
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=10)
    assert refused.value.code == 409
    refused.value.close()


def test_an_unreachable_nats_server_is_a_clear_error(tmp_path: Path) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    started = time.monotonic()
    done = rolecall("web", "--port", "0", "--data-dir", str(tmp_path), "--nats", url, cwd=tmp_path)
    assert done.returncode == 1
    assert f"cannot reach the NATS server at {url}" in done.stderr
    assert "Traceback" not in done.stderr
    assert time.monotonic() - started < 30


DUO_WORLD = """\
name: duo
topic: t
model: scripted
settings: {agent_timeout: 3, retries: 1}
roles:
  - {id: a, script: ["a says {n} one two three"]}
  - {id: b, transport: nats, script: ["b says {n} four five six"]}
flow:
  steps: [{id: s1, speaker: a}, {id: s2, speaker: b}, {id: s3, speaker: a}, {id: s4, speaker: b}]
"""


def _stream(url: str) -> list[dict[str, Any]]:
    """The events of an SSE stream up to its `end` (a stream that never ends fails)."""
    events: list[dict[str, Any]] = []
    kind = "message"
    with httpx.stream("GET", url, timeout=httpx.Timeout(10, read=20)) as response:
        for line in response.iter_lines():
            if line.startswith("event:"):
                kind = line.split(":", 1)[1].strip()
            elif line.startswith("data:"):
                if kind == "end":
                    return events
                events.append(json.loads(line.split(":", 1)[1]))
            elif not line:
                kind = "message"
    raise AssertionError("the stream closed without its end event")


def test_a_session_started_in_the_page_runs_on_the_cluster_with_its_remote_agents(
    watcher: tuple[Server, Site], cluster: NatsServer
) -> None:
    server, site = watcher
    world = site.root / "worlds" / "duo"
    world.mkdir()
    (world / "world.yaml").write_text(DUO_WORLD)
    argv = ["agent", "b", "--world", str(world), "--nats", cluster.url]
    agent = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", *argv],
        cwd=site.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert agent.stderr is not None
        ready = agent.stderr.readline()
        assert ready.startswith("ready: agent for role b of world duo"), ready
        started = httpx.post(f"{server.url}/api/sessions", json={"world": "duo"}, timeout=10)
        assert started.status_code == 201, started.text
        sid = started.json()["session_id"]
        events = _stream(f"{server.url}/api/sessions/{sid}/stream")
    finally:
        agent.terminate()
        agent.communicate(timeout=20)
    said = [(e["sender"], e["content"]) for e in events if e["type"] == "message"]
    assert said == [
        ("a", "a says 1 one two three"),
        ("b", "b says 1 four five six"),
        ("a", "a says 2 one two three"),
        ("b", "b says 2 four five six"),
    ]
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "flow_end"
    assert not [e for e in events if e["type"] == "error"]
    # as with `run --nats`, its events are on the cluster's stream too
    assert _cluster_row(server) == sid
