"""`scripts/bench.py` produces one well-formed JSON report.

Only the shape of the report is checked here: speed is measured by the script and
never asserted in tests (the machine may be busy with other work).
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "bench.py"
BENCHMARKS = {"turn_overhead", "chunk_overhead", "startup", "next_step_cost", "routing"}


def run_bench(*args: str, timeout: float = 50) -> tuple[dict[str, Any], str]:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)  # raises on anything but exactly one JSON document
    assert isinstance(doc, dict)
    return doc, proc.stdout


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


@pytest.fixture(scope="module")
def quick_report() -> dict[str, Any]:
    doc, _ = run_bench("--quick")
    return doc


def test_quick_report_is_marked_and_describes_the_machine(quick_report: dict[str, Any]) -> None:
    assert quick_report["quick"] is True
    machine = quick_report["machine"]
    assert isinstance(machine["python"], str) and machine["python"]
    assert isinstance(machine["platform"], str) and machine["platform"]
    assert isinstance(machine["cpu_count"], int) and machine["cpu_count"] >= 1


def test_every_benchmark_is_present_without_error(quick_report: dict[str, Any]) -> None:
    benches = quick_report["benchmarks"]
    assert set(benches) == BENCHMARKS
    for name, bench in benches.items():
        assert "error" not in bench, f"{name}: {bench.get('error')}"
        assert isinstance(bench["met"], bool), name


def test_figures_are_numbers_with_units(quick_report: dict[str, Any]) -> None:
    for name, bench in quick_report["benchmarks"].items():
        figures, units = bench["figures"], bench["units"]
        assert figures, name
        for key, value in figures.items():
            assert is_number(value), f"{name}.{key} = {value!r}"
            assert isinstance(units.get(key), str) and units[key], f"{name}.{key} has no unit"


def test_every_target_has_a_met_boolean(quick_report: dict[str, Any]) -> None:
    for name, bench in quick_report["benchmarks"].items():
        assert bench["targets"], f"{name} has no target"
        for target in bench["targets"]:
            assert target["figure"] in bench["figures"], name
            assert target["value"] == bench["figures"][target["figure"]], name
            assert is_number(target["limit"]), name
            assert isinstance(target["met"], bool), name
        for key, check in bench["checks"].items():
            assert isinstance(check["met"], bool), f"{name}.{key}"
        # the benchmark's verdict is its targets' and checks' verdicts together
        targets = [t["met"] for t in bench["targets"]]
        checks = [c["met"] for c in bench["checks"].values()]
        assert bench["met"] == all(targets + checks), name


def test_the_expected_targets_are_reported(quick_report: dict[str, Any]) -> None:
    benches = quick_report["benchmarks"]

    def targeted(name: str) -> set[str]:
        return {t["figure"] for t in benches[name]["targets"]}

    assert "ratio_10k_to_1k" in targeted("turn_overhead")
    assert any(f.endswith("_median_ms_per_turn") for f in targeted("turn_overhead"))
    assert "us_per_chunk" in targeted("chunk_overhead")
    assert "help_s" in targeted("startup")
    assert "litellm_not_imported" in benches["startup"]["checks"]
    assert "ratio_10000_to_10" in targeted("next_step_cost")
    assert "route_median_ms" in targeted("routing")


def test_only_and_out_select_and_save(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    doc, stdout = run_bench("--quick", "--only", "routing", "--out", str(out))
    assert set(doc["benchmarks"]) == {"routing"}
    assert json.loads(out.read_text("utf-8")) == json.loads(stdout)
