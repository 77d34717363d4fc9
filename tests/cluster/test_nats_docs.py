"""docs/nats.md's table of streams against what a real nats-server holds after a real
`rolecall run --nats`: the number it says, the names and the subjects; and its account of
a batch's results stream against a real `batch --nats` run by a real worker."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio

from rolecall.nats.link import RESULTS_STREAM as RESULTS
from tests.cluster.conftest import scripted_world
from tests.cluster.test_agents import stop
from tests.cluster.test_workers import rows, start_worker
from tests.conftest import ROOT
from tests.faults import Cli
from tests.nats_server import NatsServer

NUMBERS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5}


async def _streams(url: str) -> dict[str, list[str]]:
    import nats

    client = await nats.connect(url)
    try:
        infos = await client.jetstream().streams_info()
        return {i.config.name: list(i.config.subjects or []) for i in infos if i.config.name}
    finally:
        await client.close()


def test_the_streams_nats_md_lists_are_the_servers(nats: NatsServer, tmp_path: Path) -> None:
    argv = ["run", "classroom", "--max-turns", "2", "--nats", nats.url]
    ran = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *argv],
        env={**os.environ, "ROLECALL_HOME": str(tmp_path / "home")},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert ran.returncode == 0, ran.stderr
    held = anyio.run(_streams, nats.url)
    page = (ROOT / "docs" / "nats.md").read_text(encoding="utf-8")
    said = re.search(r"rolecall creates the (\w+) streams it uses", page)
    assert said is not None
    rows = dict(re.findall(r"^\| `(ROLECALL_\w+)` \| (.*?) \|", page, re.M))
    assert NUMBERS[said.group(1)] == len(rows) == len(held), (said.group(1), rows, held)
    assert set(rows) == set(held)
    for name, subjects in held.items():
        for subject in subjects:  # rolecall.*.*.* as `rolecall.<session_id>.<topic>.<type>`
            prefix = subject.split(".")[0]
            documented = re.findall(r"`([^`]+)`", rows[name])
            assert any(d.split(".")[0] == prefix for d in documented), (name, subject)
            if not subject.endswith(">"):
                shapes = {re.sub(r"<[^>]+>", "*", d) for d in documented}
                assert subject in shapes, (name, subject, documented)


async def _results(url: str) -> list[tuple[str, dict[str, Any]]]:
    """Every message of the results stream: its subject and its JSON body, in order."""
    import nats

    client = await nats.connect(url)
    try:
        js = client.jetstream()
        info = await js.stream_info(RESULTS)
        out = []
        for seq in range(info.state.first_seq, info.state.last_seq + 1):
            msg = await js.get_msg(RESULTS, seq)
            out.append((msg.subject, json.loads(msg.data or b"{}")))
        return out
    finally:
        await client.close()


def test_the_results_stream_holds_the_subjects_and_rows_nats_md_describes(
    cli: Cli, nats: NatsServer, tmp_path: Path
) -> None:
    # issue 35: the page omitted `.job` and described a result message as an --out row
    world = scripted_world(tmp_path)
    out = tmp_path / "rows.jsonl"
    worker = start_worker(cli, nats, tmp_path / "w1")
    try:
        done = cli.run(
            "batch", str(world), "--vary", "topic=x,y", "--nats", nats.url, "--name", "docs1",
            "--out", str(out), "-q",
        )  # fmt: skip
    finally:
        stop(worker)
    assert done.returncode == 0, done.stderr
    held = anyio.run(_results, nats.url)
    kinds = {subject.removeprefix("rolecall_results.docs1.") for subject, _ in held}

    page = (ROOT / "docs" / "nats.md").read_text(encoding="utf-8")
    row = re.search(rf"^\| `{RESULTS}` \| (.*?) \|", page, re.M)
    assert row is not None
    # `rolecall_results.<batch>.plan`, `.job`, `.run`: the kinds of message it names
    named = {d.rsplit(".", 1)[-1] for d in re.findall(r"`([^`]+)`", row.group(1))}
    assert named == kinds == {"plan", "job", "run"}, (named, kinds)

    # "the varied values stay in one object, `values` (...), where an --out row puts
    # each one after `session_id`": the page's sample against a real result and row
    sample = re.search(r"\(`(\{\"batch\".*?\})`\)", page.replace("\n", " "), re.S)
    assert sample is not None
    documented = json.loads(re.sub(r",\s*\.\.\.", "", sample.group(1)))
    results = [body for subject, body in held if subject.endswith(".run")]
    assert len(results) == 2
    for result in results:
        assert set(documented) <= set(result), (documented, result)
        assert isinstance(result["values"], dict) and set(result["values"]) == {"topic"}
    for written in rows(out):
        keys = list(written)
        assert "values" not in written
        assert keys[keys.index("session_id") + 1] == "topic", keys
