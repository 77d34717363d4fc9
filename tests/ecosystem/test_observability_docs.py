"""docs/observability.md's sqlite-utils commands, run as written (by bash, with
``ROLECALL_HOME`` set) against a store real runs wrote: sqlite-utils is a tool nobody
here wrote, and a command it does not have (``tables --views``) once stood in the page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT

SQLITE_UTILS = shutil.which("sqlite-utils", path=str(Path(sys.executable).parent))


@pytest.mark.skipif(SQLITE_UTILS is None, reason="sqlite-utils is not installed (dev group)")
def test_the_sqlite_utils_commands_of_observability_md_run_as_written(tmp_path: Path) -> None:
    page = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    found = re.search(r"With \[sqlite-utils\].*?\n```\n(.*?)```", page, re.S)
    assert found is not None, "observability.md has its sqlite-utils block"
    script = found.group(1)
    home = tmp_path / "home"
    env = {**os.environ, "ROLECALL_HOME": str(home)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    for world in ("classroom", "debate"):
        ran = subprocess.run(
            [sys.executable, "-m", "rolecall.cli.main", "run", world, "--max-turns", "3"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=tmp_path,
        )
        assert ran.returncode == 0, ran.stderr
    shell = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert shell.returncode == 0, shell.stderr
    out = shell.stdout
    assert '"table": "messages"' in out  # tables --counts
    assert '"view": "events"' in out  # views
    assert '"sender": "teacher"' in out  # the messages query
    assert '"reason": "max_turns", "count(*)": 2' in out  # the stop reasons


DATASETTE = shutil.which("datasette", path=str(Path(sys.executable).parent))


def _run(world: str, env: dict[str, str], cwd: Path) -> None:
    ran = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", "run", world, "--max-turns", "3"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
    )
    assert ran.returncode == 0, ran.stderr


@pytest.mark.skipif(DATASETTE is None, reason="datasette is not installed (dev group)")
def test_datasette_as_observability_md_opens_it_follows_a_store_being_written(
    tmp_path: Path,
) -> None:
    """The page's `datasette "$DB"` on a store that runs go on writing shows their rows as
    they commit (with `-i`, once in the page, it read stale rows, then a malformed file)."""
    import httpx

    from tests.nats_server import free_port

    page = (ROOT / "docs" / "observability.md").read_text(encoding="utf-8")
    found = re.search(r"With \[Datasette\].*?\n```\n(datasette .*?)\n```", page, re.S)
    assert found is not None, "observability.md has its datasette command"
    home = tmp_path / "home"
    env = {**os.environ, "ROLECALL_HOME": str(home)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["DB"] = str(home / "rolecall.db")
    _run("classroom", env, tmp_path)
    port = free_port()
    server = subprocess.Popen(
        ["bash", "-c", f"exec {found.group(1)} --port {port}"],
        env=env,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/rolecall.json"
    sql = "select count(*) as n from messages"

    def count() -> int:
        answer = httpx.get(url, params={"sql": sql, "_shape": "array"}, timeout=10)
        assert answer.status_code == 200, answer.text
        return int(answer.json()[0]["n"])

    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                first = count()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "datasette did not start"
                time.sleep(0.2)
        assert first > 0
        _run("debate", env, tmp_path)
        assert count() > first  # the second run's messages, read while the store is live
    finally:
        server.terminate()
        server.wait(timeout=10)
