"""Messages larger than the NATS server accepts (its max_payload, 1 MB by default), on a
real ``nats-server -js``: a clear error before anything is sent, never a retry loop."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.faults import Cli, stored
from tests.llm.openai_server import OpenAITestServer, Reply
from tests.nats_server import NatsServer

LIMIT = "over the 1,048,576 bytes the NATS server at"


def big_world(folder: Path, prompt: str, *, model: str = "scripted", settings: str = "") -> Path:
    world = folder / "big"
    world.mkdir(exist_ok=True)
    (world / "world.yaml").write_text(
        f"""\
name: big
topic: t
model: {model}
{settings}
roles: [{{id: a, system_prompt: "{prompt}", script: ["a says {{n}}"]}}, {{id: b, script: ["b {{n}}"]}}]
flow:
  steps: [{{id: s1, speaker: a}}, {{id: s2, speaker: b}}]
""",
        encoding="utf-8",
    )
    return world


def test_a_world_over_the_servers_max_payload_is_a_clear_error_not_a_hang(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = big_world(tmp_path, "wörd " * 220_000)  # 1.3 MB in UTF-8
    ran = cli.run("run", str(world), "--nats", nats.url, "-q", timeout=30)
    assert ran.returncode == 1, ran.stderr
    assert ran.stderr.startswith("rolecall: the world 'big' (sent with the session's first")
    assert LIMIT in ran.stderr and "max_payload" in ran.stderr
    assert "Traceback" not in ran.stderr


def test_a_batch_job_over_the_max_payload_is_refused_before_its_name_is_taken(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = big_world(tmp_path, "wörd " * 220_000)  # 1.3 MB
    refused = cli.run("batch", str(world), "--nats", nats.url, "--name", "b1", "--no-wait")
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.startswith("rolecall: the job of run 1 of batch b1 (its world) is ")
    assert LIMIT in refused.stderr and refused.stderr.rstrip().endswith("nothing was submitted")
    assert "Traceback" not in refused.stderr
    small = big_world(tmp_path, "short")
    again = cli.run("batch", str(small), "--nats", nats.url, "--name", "b1", "--no-wait", "-q")
    assert again.returncode == 0, again.stderr  # the name b1 is still free


def test_a_reply_over_the_max_payload_pauses_the_session_with_a_clear_error(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    with OpenAITestServer() as provider:
        provider.queue(Reply(text=" ".join(["x" * 100_000] * 11)))  # one 1.1 MB message
        world = big_world(
            tmp_path,
            "short",
            model="openai/test-model",
            settings=f'settings: {{retries: 0, client: http, api_base: "{provider.base_url}", '
            "api_key_env: BIG_KEY}",
        )
        # a hang (the old behaviour) never ends: the bound is for a loaded machine
        ran = cli.run("run", str(world), "--nats", nats.url, "-q", timeout=90, BIG_KEY="sk-b")
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "event " in ran.stderr and LIMIT in ran.stderr
    session = stored(cli.home)
    assert (session.state, session.ids) == ("paused", ["m1"])  # kept here, not left running


def test_a_tool_result_over_the_max_payload_pauses_the_clusters_copy_too(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "bigtools.py").write_text(
        'def fetch() -> str:\n    """A 2 MB page."""\n    return "x" * 2_000_000\n',
        encoding="utf-8",
    )
    world = tmp_path / "fetcher"
    world.mkdir()
    (world / "world.yaml").write_text(
        """\
name: fetcher
topic: t
model: scripted
settings: {max_tool_result_chars: 3000000}
tools: {python: {fetch: "bigtools:fetch"}}
roles: [{id: a, tools: [fetch], script: [{call: fetch}, "fetched it"]}]
flow:
  steps: [{id: s1, speaker: a}, {id: s2, speaker: a}]
""",
        encoding="utf-8",
    )
    path = os.pathsep.join((str(cli.guard), str(tools)))
    ran = cli.run("run", str(world), "--nats", nats.url, "-q", timeout=90, PYTHONPATH=path)
    assert ran.returncode == 1, ran.stderr
    assert "Traceback" not in ran.stderr
    assert "(messages/tool_result, " in ran.stderr and LIMIT in ran.stderr
    local = stored(cli.home)
    assert local.state == "paused"
    sid = local.id

    # the cluster's copy: paused too, saying why, and readers following it see it end
    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    copy = stored(gathered.home, sid)
    assert (copy.state, copy.pause_reason) == ("paused", "error")
    watched = cli.run("watch", sid, "--nats", nats.url, "--from-start", "--json", timeout=30)
    assert watched.returncode == 0, watched.stderr
    events = [json.loads(line) for line in watched.stdout.splitlines()]
    errors = [e["error"] for e in events if (e["topic"], e["type"]) == ("system", "error")]
    assert any(e.startswith("not published on NATS: event ") and LIMIT in e for e in errors)
    assert (events[-1]["type"], events[-1].get("state")) == ("session", "paused")
