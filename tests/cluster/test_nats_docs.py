"""docs/nats.md's table of streams against what a real nats-server holds after a real
`rolecall run --nats`: the number it says, the names and the subjects."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import anyio

from tests.conftest import ROOT
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
