"""docs/observability.md's sqlite-utils commands, run as written (by bash, with
``ROLECALL_HOME`` set) against a store real runs wrote: sqlite-utils is a tool nobody
here wrote, and a command it does not have (``tables --views``) once stood in the page."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
