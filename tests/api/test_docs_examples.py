"""The Python examples of docs/api.md and docs/study.md run as written, in a fresh process."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOC = ROOT / "docs" / "api.md"
EXAMPLES = {
    f"{page.name}#{i + 1}": block
    for page in (ROOT / "docs" / "api.md", ROOT / "docs" / "study.md")
    for i, block in enumerate(re.findall(r"```python\n(.*?)```", page.read_text("utf-8"), re.S))
}
BLOCKS = [b for name, b in EXAMPLES.items() if name.startswith("api.md#")]


def test_the_page_has_the_spec_example_first() -> None:
    assert len(BLOCKS) >= 5
    assert 'rolecall.open_session(world, data_dir="data", model="offline")' in BLOCKS[0]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_runs_as_written(name: str, tmp_path: Path) -> None:
    shutil.copytree(ROOT / "worlds", tmp_path / "worlds")
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLECALL_")}
    env["ROLECALL_HOME"] = str(tmp_path / "home")
    result = subprocess.run(
        [sys.executable, "-c", EXAMPLES[name]],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout.strip(), "every example shows something"
    assert not (tmp_path / "home").exists(), "the library writes only where it is told"
