"""`sessions import --nats` meets a session id in the stream that is not safe here: that
session is skipped and named, every other one is imported."""

from __future__ import annotations

import json
from pathlib import Path

import anyio

from tests.cluster.conftest import scripted_world
from tests.cluster.test_workers import messages_of
from tests.faults import Cli
from tests.nats_server import NatsServer


def copy_session(url: str, sid: str, to: str) -> None:
    """Publish every event of session ``sid`` again as session ``to`` (as a stream written
    by another program, or damaged, could hold it)."""
    from rolecall.nats.link import connect, session_filter
    from rolecall.nats.readback import read_stream

    async def copy() -> None:
        async with connect(url) as link:
            events = [e async for e in read_stream(link, session_filter(sid))]
            for event in events:
                _, _, topic, kind = event.subject.split(".")
                headers = {k: v.replace(sid, to) for k, v in event.headers.items()}
                await link.js.publish(
                    f"rolecall.{to}.{topic}.{kind}",
                    event.line.replace(sid, to).encode(),
                    headers=headers,
                )

    anyio.run(copy)


def test_an_unsafe_session_id_in_the_stream_is_skipped_and_named(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path)
    sids = []
    for topic in ("x", "y"):
        ran = cli.run("run", str(world), "--nats", nats.url, "--topic", topic, "--json")
        assert ran.returncode == 0, ran.stderr
        sids.append(json.loads(ran.stdout.splitlines()[0])["session_id"])
    copy_session(nats.url, sids[0], "-rf")  # an option, were it passed to a command
    copy_session(nats.url, sids[1], "a/b")  # a path
    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    imported = gathered.run("sessions", "import", "--nats", nats.url)
    assert imported.returncode == 1, imported.stderr
    assert imported.stdout.startswith("imported 2 sessions, updated 0, 0 already up to date")
    assert "2 skipped (named below)" in imported.stdout
    assert sorted(messages_of(gathered.home)) == sorted(sids)
    said = imported.stderr.splitlines()
    assert "rolecall: not imported: session id '-rf' is not safe in a file name" in said[0]
    assert "rolecall: not imported: session id 'a/b' is not safe in a file name" in said[1]
