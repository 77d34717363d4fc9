"""The NATS transport with a real ``nats-server -js``: run, watch, import, faults."""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import subprocess
import time
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

from rolecall.errors import UsageError
from rolecall.nats.transport import open_transport
from rolecall.storage.claims import FileClaims
from tests.cluster.conftest import scripted_world
from tests.faults import Cli
from tests.nats_server import NatsServer, free_port, server_binary


def lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def stored_messages(home: Path, sid: str) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        rows = db.execute(
            "SELECT body FROM messages WHERE session_id = ? ORDER BY idx", (sid,)
        ).fetchall()
    return [(m["id"], m["content"]) for m in (json.loads(b) for (b,) in rows)]


def test_an_unreachable_server_is_exit_1_naming_the_url_at_once(cli: Cli, tmp_path: Path) -> None:
    world = scripted_world(tmp_path)
    port = free_port()  # nothing listens there
    url = f"nats://127.0.0.1:{port}"
    started = time.monotonic()
    cli.run("worlds", "validate", str(world))  # starting rolecall and loading the world
    baseline = time.monotonic() - started
    started = time.monotonic()
    done = cli.run("run", str(world), "--nats", url)
    elapsed = time.monotonic() - started - baseline  # what the connection attempt took
    assert done.returncode == 1, done.stderr
    assert f"cannot reach the NATS server at {url}" in done.stderr
    assert "Traceback" not in done.stderr
    assert elapsed < 5.0, f"took {elapsed:.1f} s"
    assert not (cli.home / "rolecall.db").exists()  # nothing was started
    bad = cli.run("run", str(world), "--nats", "127.0.0.1:4222")
    assert bad.returncode == 2 and "--nats expects a URL like nats://" in bad.stderr


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("nats://127.0.0.1:99999", "the port '99999' is not a number from 1 to 65535"),
        ("nats://127.0.0.1:abc", "the port 'abc' is not a number from 1 to 65535"),
        ("nats://127.0.0.1:0", "the port 0 is not a number from 1 to 65535"),
        ("nats://a:1,", "an empty server in the list"),
        ("nats://a:1,b:2", "'b:2' has no scheme (nats://)"),
        ("http://a:1", "the scheme 'http://' is not one of nats://, tls://, ws://, wss://"),
        ("nats://:4222", "'nats://:4222' names no host"),
        ("nats://a:1/x", "'nats://a:1/x' has more than a host and port"),
        ("ws://a:1,nats://b:2", "cannot be mixed with nats:// or tls:// ones"),
    ],
)
def test_a_url_nats_py_cannot_use_is_a_usage_error(url: str, problem: str) -> None:
    """nats-py's ``invalid connect url option`` used to end every command in a traceback."""
    from rolecall.nats.link import nats_url

    with pytest.raises(UsageError, match="--nats expects a URL like nats://") as caught:
        nats_url(url)
    assert str(caught.value).endswith(problem)


def test_several_servers_are_one_comma_separated_url(nats: NatsServer) -> None:
    from rolecall.nats.link import connect, nats_url, servers

    down = f"nats://127.0.0.1:{free_port()}"
    url = f"{down}, {nats.url}"
    assert nats_url(url) == f"{down},{nats.url}"  # as the hints print it
    assert servers(url) == [down, nats.url]

    async def reach() -> str:
        async with connect(url) as link:
            return str(link.nc.connected_url.netloc if link.nc.connected_url else "")

    assert anyio.run(reach) == f"127.0.0.1:{nats.port}"


def test_bad_nats_urls_and_ack_waits_are_exit_2_on_every_command(cli: Cli, tmp_path: Path) -> None:
    world = str(scripted_world(tmp_path))
    bad = "nats://127.0.0.1:99999"
    for argv in (
        ["run", world],
        ["batch", world],
        ["worker"],
        ["watch", "--all"],
        ["sessions", "import"],
        ["web"],
    ):
        done = cli.run(*argv, "--nats", bad)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.startswith("rolecall: --nats expects a URL like nats://"), argv
        assert "Traceback" not in done.stderr
    from_env = cli.run("watch", "--all", ROLECALL_NATS_URL="nats://h:1,nats://h:abc")
    assert from_env.returncode == 2, from_env.stderr
    assert "rolecall: ROLECALL_NATS_URL expects a URL like nats://" in from_env.stderr
    assert from_env.stderr.rstrip().endswith("the port 'abc' is not a number from 1 to 65535")
    done = cli.run("worker", "--nats", "nats://127.0.0.1:4222", "--ack-wait", "nan")
    assert done.returncode == 2, done.stderr
    assert done.stderr == "rolecall: --ack-wait must be from 1 to 86400 seconds, got nan\n"

    from rolecall.cli.main import build_parser
    from rolecall.cli.nats_cmd import cmd_worker

    for wait in ("inf", "1e12", "-5", "0", "0.5"):
        args = build_parser().parse_args(["worker", "--nats", "nats://a:1", "--ack-wait", wait])
        with pytest.raises(UsageError, match=r"--ack-wait must be from 1 to 86400 seconds"):
            cmd_worker(args)


def test_a_server_without_jetstream_is_exit_1_saying_how_to_start_it(
    cli: Cli, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path)
    port = free_port()
    log = tmp_path / "plain.log"
    plain = subprocess.Popen(
        [server_binary(), "-a", "127.0.0.1", "-p", str(port), "-l", str(log)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 10
        while not (log.exists() and "Server is ready" in log.read_text("utf-8")):
            assert time.monotonic() < deadline, "nats-server did not start"
            time.sleep(0.02)
        url = f"nats://127.0.0.1:{port}"
        done = cli.run("run", str(world), "--nats", url)
    finally:
        plain.terminate()
        plain.wait(timeout=10)
    assert done.returncode == 1, done.stderr
    assert f"the NATS server at {url} has no usable JetStream" in done.stderr
    assert "start it with `nats-server -js`" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_stream_holds_the_run_watch_replays_it_and_import_stores_it(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path, steps=4)
    ran = cli.run("run", str(world), "--nats", nats.url, "--json")
    assert ran.returncode == 0, ran.stderr
    events = lines(ran.stdout)
    sid = events[0]["session_id"]
    watched = cli.run("watch", sid, "--from-start", "--json", "--nats", nats.url, timeout=20)
    assert watched.returncode == 0, watched.stderr
    assert lines(watched.stdout) == events  # the same events, in the same order

    elsewhere = Cli(home=tmp_path / "elsewhere", guard=cli.guard, cwd=tmp_path)
    imported = elsewhere.run("sessions", "import", sid, "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.strip() == "imported 1 session, updated 0, 0 already up to date"
    assert stored_messages(elsewhere.home, sid) == stored_messages(cli.home, sid)
    assert [c for _, c in stored_messages(elsewhere.home, sid)] == [
        "a says 1 one two three",
        "b says 1 four five",
        "a says 2 one two three",
        "b says 2 four five",
    ]
    local = cli.run("sessions", "show", sid)
    remote = elsewhere.run("sessions", "show", sid)
    assert remote.returncode == 0 and remote.stdout == local.stdout
    again = elsewhere.run("sessions", "import", sid, "--nats", nats.url)
    assert again.stdout.strip() == "imported 0 sessions, updated 0, 1 already up to date"
    resumed = elsewhere.run("resume", sid)
    assert resumed.returncode == 0 and "already finished (flow_end)" in resumed.stderr


def test_import_leaves_a_session_open_here_as_it_is_and_updates_it_once_let_go(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path, steps=4)
    ran = cli.run("run", str(world), "--nats", nats.url, "--mode", "step", "--json", stdin="\n")
    assert ran.returncode == 0, ran.stderr
    sid = lines(ran.stdout)[0]["session_id"]
    elsewhere = Cli(home=tmp_path / "elsewhere", guard=cli.guard, cwd=tmp_path)
    assert elsewhere.run("sessions", "import", sid, "--nats", nats.url).returncode == 0
    assert len(stored_messages(elsewhere.home, sid)) == 1
    resumed = cli.run("resume", sid, "--nats", nats.url, "--mode", "auto")  # on to the end
    assert resumed.returncode == 0, resumed.stderr

    # this test process holds the session in elsewhere's data dir, as a REPL there would
    held = FileClaims(elsewhere.home / "rolecall.db-claims").claim(sid)
    refused = elsewhere.run("sessions", "import", sid, "--nats", nats.url)
    assert refused.returncode == 1, refused.stderr
    assert refused.stdout.strip() == (
        "imported 0 sessions, updated 0, 0 already up to date, 1 left as stored (open here)"
    )
    assert f"not imported: session {sid} is open in another process (pid {os.getpid()}" in (
        refused.stderr
    )
    assert len(stored_messages(elsewhere.home, sid)) == 1  # not deleted to be replaced
    held.release()
    updated = elsewhere.run("sessions", "import", sid, "--nats", nats.url)
    assert updated.returncode == 0, updated.stderr
    assert updated.stdout.strip() == "imported 0 sessions, updated 1, 0 already up to date"
    assert stored_messages(elsewhere.home, sid) == stored_messages(cli.home, sid)


def test_a_server_restarted_during_a_run_loses_and_reorders_nothing(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path, steps=8)
    log = tmp_path / "run.log"
    proc = cli.popen(  # the URL from the environment this time
        "run", str(world), "--json", "--log-file", str(log),
        ROLECALL_NATS_URL=nats.url, ROLECALL_STREAM_DELAY="0.04",
    )  # fmt: skip
    assert proc.stdout is not None
    seen = [proc.stdout.readline() for _ in range(12)]  # the run is under way
    assert all(seen)
    nats.restart()
    out, err = cli.rest(proc, timeout=40)
    assert proc.returncode == 0, err
    events = lines("".join(seen) + out)
    logged = [json.loads(line)["event"] for line in log.read_text("utf-8").splitlines()]
    assert "nats_reconnected" in logged  # the connection was lost and came back mid-run
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "flow_end"
    sid = events[0]["session_id"]
    watched = cli.run("watch", sid, "--from-start", "--json", "--nats", nats.url, timeout=20)
    assert watched.returncode == 0, watched.stderr
    assert lines(watched.stdout) == events
    with closing(socket.create_connection(("127.0.0.1", nats.port), timeout=2)):
        pass  # the server is the restarted one, still up


def test_a_name_with_a_dot_is_refused_with_nats_before_anything_runs(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    """Safe ids may hold a '.', NATS subjects cannot: `batch --name exp.1 --nats` used to
    end in a traceback from the stream that never answered, and a session with such an id
    waited for its stream forever."""
    world = scripted_world(tmp_path)
    batch = cli.run("batch", str(world), "--runs", "2", "--name", "exp.1", "--nats", nats.url)
    assert batch.returncode == 2, batch.stderr
    assert "rolecall: batch name 'exp.1' cannot be used with --nats" in batch.stderr
    assert "Traceback" not in batch.stderr
    watched = cli.run("watch", "my.run", "--nats", nats.url, timeout=20)
    assert watched.returncode == 2, watched.stderr
    assert "rolecall: session id 'my.run' cannot be used with --nats" in watched.stderr

    async def open_bus() -> None:
        async with open_transport(nats.url) as transport:
            transport.bus("my.run")

    refused = pytest.RaisesExc(UsageError, match=r"session id 'my\.run' cannot be used with")
    with pytest.RaisesGroup(refused):  # raised in the transport's task group
        anyio.run(open_bus)
    # the same batch under a name without a dot is submitted
    fine = cli.run("batch", str(world), "--runs", "2", "--name", "exp-1", "--nats", nats.url,
                   "--no-wait")  # fmt: skip
    assert fine.returncode == 0, fine.stderr
    assert "batch exp-1: submitted 2 runs" in fine.stderr


def test_the_model_is_asked_only_once_the_stream_holds_every_turn_before(
    nats: NatsServer, tmp_path: Path
) -> None:
    """A worker killed while a model answers resumes from the stream: so each request
    comes only once the turns before it are stored there (the wait that guarantees it is
    right before the request; the turn's events are sent as soon as it ends)."""
    from nats.js.errors import NotFoundError

    from rolecall.api.entry import open_served
    from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
    from rolecall.nats.link import EVENTS_STREAM
    from rolecall.storage.sqlite import SqliteStore
    from tests.helpers import world_from

    sid = ""  # the session's, once it is opened
    # at each request: what the stream acknowledged of the events put to it so far, and
    # the last message it holds
    acked: list[tuple[int, int]] = []
    seen: list[str | None] = []

    async def main() -> None:
        nonlocal sid
        async with open_transport(nats.url) as transport, SqliteStore(tmp_path / "r.db") as store:
            js = transport.link.js

            class Watching:
                name = "watching"

                async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
                    acked.append((transport.publisher.acked, transport.publisher.queued))
                    try:
                        last = await js.get_last_msg(
                            EVENTS_STREAM, f"rolecall.{sid}.messages.message"
                        )
                        seen.append(json.loads(last.data or b"{}")["message_id"])
                    except NotFoundError:
                        seen.append(None)
                    yield TextDelta(f"turn {len(seen)}")
                    yield Usage(5, 2)

            world = world_from(
                {"name": "w", "topic": "t", "model": "watching", "roles": [{"id": "a"}, {"id": "b"}],
                 "settings": {"max_turns": 4},
                 "flow": {"steps": [{"id": "s1", "speaker": "a"},
                                    {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": 9}}]}}
            )  # fmt: skip
            models = {"watching": Watching()}
            async with open_served(world, store=store, models=models, transport=transport) as s:
                sid = s.session_id
                await s.run()

    anyio.run(main)
    # everything but the sse/start of the generation itself, published as it begins
    assert [put - done for done, put in acked] == [1] * 4, acked
    assert acked[-1][1] > acked[0][1]
    assert seen == [None, "m1", "m2", "m3"]


def test_a_scripted_turn_does_not_wait_for_the_stream_and_a_provider_request_still_does(
    nats: NatsServer, tmp_path: Path
) -> None:
    """A repeatable model (scripted: the same reply again, at no cost) does not wait: its
    turns go on while the stream acknowledges the ones before (the request hooks are not
    awaited for it). A provider's request in the same session still comes only once the
    stream holds every turn before it, the scripted ones included; and in the end the
    stream holds every event, in order."""
    from rolecall.api.entry import open_served
    from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
    from rolecall.nats.link import EVENTS_STREAM
    from rolecall.storage.sqlite import SqliteStore
    from tests.helpers import Recorder, world_from

    at_requests: list[tuple[int, int]] = []  # (acknowledged, put) at each provider request
    hooks_run: list[int] = []
    last_seq = 0

    async def main() -> None:
        nonlocal last_seq
        async with open_transport(nats.url) as transport, SqliteStore(tmp_path / "r.db") as store:
            publisher = transport.publisher

            class Provider:
                name = "provider"

                async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
                    at_requests.append((publisher.acked, publisher.queued))
                    yield TextDelta("from the provider")
                    yield Usage(5, 3)

            world = world_from(
                {"name": "w", "topic": "t", "model": "scripted",
                 "roles": [{"id": "a", "script": ["one two three four"]},
                           {"id": "c", "script": ["five six seven"]},
                           {"id": "b", "model": "provider"}],
                 "settings": {"max_turns": 9},
                 "flow": {"steps": [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "c"},
                                    {"id": "s3", "speaker": "b", "loop": {"to": "s1", "max": 9}}]}}
            )  # fmt: skip
            models = {"provider": Provider()}
            rec = Recorder()
            async with open_served(
                world, store=store, models=models, transport=transport, sinks=[rec]
            ) as session:
                sid = session.session_id
                flush = publisher.flush

                async def counted(session_id: str | None = None) -> None:
                    # the wait before a model is asked: until the stream holds every turn
                    if session_id == sid:
                        hooks_run.append(len(session.transcript))
                    await flush(session_id)

                publisher.flush = counted  # type: ignore[method-assign]
                await session.run()
                publisher.flush = flush  # type: ignore[method-assign]
            await publisher.flush()
            last_seq = rec.events[-1].seq
            seqs: list[int] = []
            sub = await transport.link.js.subscribe(
                f"rolecall.{sid}.>", stream=EVENTS_STREAM, ordered_consumer=True
            )
            while len(seqs) < last_seq:
                msg = await sub.next_msg(timeout=5)
                seqs.append(json.loads(msg.data)["seq"])
            await sub.unsubscribe()
            assert seqs == list(range(1, last_seq + 1))

    anyio.run(main)
    # the request hooks ran before the provider's 3 turns only (after 2, 5 and 8 messages)
    assert hooks_run == [2, 5, 8]
    # at each: everything put before was acknowledged, but its own sse/start
    assert [put - done for done, put in at_requests] == [1, 1, 1], at_requests
