"""`scripts/tiers.py` chooses the fast tier from measured runs (docs/testing.md), and
tests/conftest.py orders the modules by the figures it writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, full_tier_costs

SCRIPT = ROOT / "scripts" / "tiers.py"


def junit(path: Path, cases: dict[str, list[float]]) -> Path:
    """A JUnit XML report as pytest writes it: ``cases`` maps a dotted module to its
    tests' seconds."""
    rows = [
        f'<testcase classname="{module}" name="test_{k}" time="{seconds}"/>'
        for module, times in cases.items()
        for k, seconds in enumerate(times)
    ]
    path.write_text(
        '<?xml version="1.0"?><testsuites><testsuite name="pytest">'
        + "".join(rows)
        + "</testsuite></testsuites>",
        "utf-8",
    )
    return path


def tiers(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args, "--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def listed(stdout: str) -> dict[str, float]:
    rows = [line.split("  # ") for line in stdout.splitlines() if not line.startswith("#")]
    return {module: float(seconds.removesuffix(" s")) for module, seconds in rows}


def test_a_later_report_replaces_the_modules_it_holds_and_a_gone_module_is_left_out(
    tmp_path: Path,
) -> None:
    """The whole run, then part of it measured again (a module moved or made cheaper):
    the later figures win, and a module no longer in the tree is not listed."""
    whole = junit(
        tmp_path / "whole.xml",
        {
            "tests.test_bench_script": [70.0],
            "tests.cli.test_run_cli": [20.0, 3.0],
            "tests.realmodel.test_gone_long_ago": [300.0],
            "tests.routing.test_decide": [0.5],
        },
    )
    again = junit(tmp_path / "again.xml", {"tests.test_bench_script": [30.0, 1.5]})
    done = tiers(str(whole), str(again), "--budget", "1")
    assert done.returncode == 0, done.stderr
    assert listed(done.stdout) == {
        "tests/test_bench_script.py": 31.5,
        "tests/cli/test_run_cli.py": 23.0,
    }
    assert "tests/realmodel/test_gone_long_ago.py" in done.stderr  # said, not listed
    # costliest first: the order tests/conftest.py hands the modules to the workers in
    assert list(listed(done.stdout)) == ["tests/test_bench_script.py", "tests/cli/test_run_cli.py"]


def test_a_report_without_tests_is_refused(tmp_path: Path) -> None:
    empty = junit(tmp_path / "empty.xml", {})
    done = tiers(str(empty))
    assert done.returncode == 2
    assert "empty.xml: no test cases in it" in done.stderr


def test_the_list_in_the_tree_gives_each_module_its_seconds() -> None:
    """tests/conftest.py reads the seconds back to order the run: every listed module has
    them, and each names a module of the tree."""
    costs = full_tier_costs()
    assert costs
    for module, seconds in costs.items():
        assert (ROOT / module).is_file(), module
        assert seconds > 0, module
