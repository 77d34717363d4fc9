"""`sessions import --batch NAME` records the cluster's batch here: `sessions list --batch
NAME` and the web view's batch filter find its sessions as they find a local batch's."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import anyio

from tests.cluster.conftest import scripted_world
from tests.cluster.test_agents import stop
from tests.cluster.test_workers import rows, start_worker
from tests.faults import Cli
from tests.nats_server import NatsServer


def batch_runs(home: Path, name: str) -> list[tuple[int, str | None, bool]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        found = db.execute(
            "SELECT run, session_id, result_json IS NOT NULL FROM batch_runs WHERE batch = ? "
            "ORDER BY run",
            (name,),
        ).fetchall()
    return [(run, sid, bool(ended)) for run, sid, ended in found]


def test_an_imported_cluster_batch_is_listed_by_its_name(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path)
    out = tmp_path / "sweep1.jsonl"
    worker = start_worker(cli, nats, tmp_path / "w1")
    try:
        done = cli.run(
            "batch", str(world), "--vary", "topic=x,y,z", "--nats", nats.url, "--name", "sweep1",
            "--out", str(out), "-q",
        )  # fmt: skip
    finally:
        stop(worker)
    assert done.returncode == 0, done.stderr
    sids = [r["session_id"] for r in rows(out)]

    gathered = Cli(home=tmp_path / "gathered", guard=cli.guard, cwd=tmp_path)
    one = gathered.run("sessions", "import", sids[1], "--nats", nats.url)
    assert one.returncode == 0, one.stderr
    assert batch_runs(gathered.home, "sweep1") == [  # one session here, the others' results
        (1, None, True),
        (2, sids[1], True),
        (3, None, True),
    ]
    imported = gathered.run("sessions", "import", "--batch", "sweep1", "--nats", nats.url)
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.splitlines() == [
        "imported 2 sessions, updated 0, 1 already up to date",
        "batch sweep1: `rolecall sessions list --batch sweep1` lists its sessions",
    ]
    expected = [(run, sid, True) for run, sid in enumerate(sids, start=1)]
    assert batch_runs(gathered.home, "sweep1") == expected
    # an import of one session again leaves the batch's other runs as they are
    again = gathered.run("sessions", "import", sids[0], "--nats", nats.url)
    assert again.returncode == 0, again.stderr
    assert batch_runs(gathered.home, "sweep1") == expected

    listed = gathered.run("sessions", "list", "--batch", "sweep1")  # "no batch named" before
    assert listed.returncode == 0, listed.stderr
    assert all(sid in listed.stdout for sid in sids), listed.stdout

    async def web_filter() -> set[str]:
        from rolecall.storage.browse import browse
        from rolecall.storage.sqlite import SqliteStore

        async with SqliteStore.in_data_dir(gathered.home, read_only=True) as store:
            page = await browse(store, batch="sweep1")
        return {row.id for row in page.rows}

    assert anyio.run(web_filter) == set(sids)

    # a local --resume of it says where it runs; a local batch of the same name is not mixed
    resumed = gathered.run("batch", "--resume", "sweep1")
    assert resumed.returncode == 2
    assert resumed.stderr == (
        f"rolecall: batch 'sweep1' ran on the NATS cluster at {nats.url} (its sessions were "
        f"imported here): `rolecall batch --resume sweep1 --nats {nats.url}` finishes it there\n"
    )
    local = Cli(home=tmp_path / "local", guard=cli.guard, cwd=tmp_path)
    assert local.run("batch", str(world), "--name", "sweep1", "-q").returncode == 0
    mixed = local.run("sessions", "import", "--batch", "sweep1", "--nats", nats.url)
    assert mixed.returncode == 0, mixed.stderr
    assert "this data directory has a batch named 'sweep1' of its own" in mixed.stderr
    assert [run for run, _, _ in batch_runs(local.home, "sweep1")] == [1]
