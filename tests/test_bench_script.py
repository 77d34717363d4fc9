"""`scripts/bench.py` produces one well-formed JSON report.

Only the shape of the report is checked here: speed is measured by the script and
never asserted in tests (the machine may be busy with other work).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from tests.conftest import ROOT

SCRIPT = ROOT / "scripts" / "bench.py"
# the quick report runs every benchmark (about a minute on a busy 2-CPU machine, MCP
# servers started by `tools` among them): its fixture's setup needs more than 60 s
pytestmark = pytest.mark.timeout(240)
BENCHMARKS = {
    "turn_overhead",
    "chunk_overhead",
    "startup",
    "next_step_cost",
    "routing",
    "save_restore",
    "memory_rss",
    "many_worlds",
    "worlds_check",
    "replay_overhead",
    "fork",
    "long_reply",
    "shared_store",
    "knowledge",
    "tools",
    "audiences",
}


def run_bench(*args: str, timeout: float = 220) -> tuple[dict[str, Any], str]:
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
            assert target["op"] in ("<=", ">="), name
            holds = (
                target["value"] <= target["limit"]
                if target["op"] == "<="
                else target["value"] >= target["limit"]
            )
            assert target["met"] == holds, f"{name}.{target['figure']}"
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
    assert any(f.endswith("_ratio_to_floor") for f in targeted("turn_overhead"))
    assert "us_per_chunk" in targeted("chunk_overhead")
    assert "help_s" in targeted("startup")
    assert "litellm_not_imported" in benches["startup"]["checks"]
    assert "ratio_10000_to_10" in targeted("next_step_cost")
    assert "route_median_ms" in targeted("routing")
    assert {"save_s", "export_s", "read_file_s", "restore_db_s"} <= targeted("save_restore")
    assert "peak_rss_mb" in targeted("memory_rss")
    assert "ms_per_turn" in targeted("many_worlds")
    assert "ms_check_200_steps" in targeted("worlds_check")
    assert "us_per_chunk_replayed" in targeted("replay_overhead")
    assert "fork_s" in targeted("fork")
    assert "ratio_with_to_without" in targeted("audiences")


def test_turn_overhead_is_persisted_with_in_memory_figures_beside(
    quick_report: dict[str, Any],
) -> None:
    bench = quick_report["benchmarks"]["turn_overhead"]
    figures = bench["figures"]
    # the persisted figures have no suffix, the in-memory ones _no_store; the guard of the
    # targets is the persisted median's (and CPU's) ratio to the floor of the same run
    persisted = [
        f
        for f in figures
        if f.startswith("n") and f.endswith("_median_ms_per_turn") and "floor" not in f
    ]
    assert persisted
    guarded = {t["figure"] for t in bench["targets"]}
    assert any(f.endswith("_ratio_to_floor") for f in guarded)
    assert any(f.endswith("_cpu_ratio_to_floor") for f in guarded)
    for figure in persisted:
        assert is_number(figures[figure + "_no_store"]), figure
        assert is_number(figures[figure.replace("median", "cpu_mean")]), figure
    assert is_number(figures["ratio_10k_to_1k_no_store"])
    assert any(f.endswith("_sqlite_write_thread_cpu_ms_per_turn") for f in figures)
    assert any(f.endswith("_memory_write_thread_cpu_ms_per_turn") for f in figures)
    assert bench["checks"]["every_turn_stored"]["met"] is True


def test_save_restore_round_trips_a_realistic_session(quick_report: dict[str, Any]) -> None:
    bench = quick_report["benchmarks"]["save_restore"]
    figures, checks = bench["figures"], bench["checks"]
    assert figures["messages"] > 0
    assert figures["stored_events"] > figures["messages"]  # events are in the document too
    assert figures["events_in_saved_file"] > 0
    for key in ("read_file_same_messages", "restore_db_same_messages", "saved_file_has_events"):
        assert checks[key]["met"] is True, checks[key]["detail"]


def test_memory_rss_reports_baseline_and_peak(quick_report: dict[str, Any]) -> None:
    figures = quick_report["benchmarks"]["memory_rss"]["figures"]
    assert 0 < figures["baseline_rss_mb"] <= figures["rss_mb"] <= figures["peak_rss_mb"]
    assert figures["events"] > figures["messages"] > 0


def test_many_worlds_stores_every_session(quick_report: dict[str, Any]) -> None:
    bench = quick_report["benchmarks"]["many_worlds"]
    figures = bench["figures"]
    assert figures["total_turns"] == figures["worlds"] * figures["turns_per_world"]
    for key in ("total_s", "turns_per_s", "median_turn_latency_ms", "cpu_ms_per_turn"):
        assert is_number(figures[key]), key
    check = bench["checks"]["every_session_stored_its_messages"]
    assert check["met"] is True, check["detail"]


def test_no_comparison_without_compare(quick_report: dict[str, Any]) -> None:
    assert not any(name.startswith("compare_") for name in quick_report["benchmarks"])
    assert quick_report["summary"]["unavailable"] == []


def load_bench_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rolecall_bench_script", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    spec.loader.exec_module(module)
    return module


def test_autogen_is_given_exactly_the_texts_rolecall_says() -> None:
    """The comparison's fairness without running AutoGen: same texts, same order."""
    bench = load_bench_module()
    turns = 10
    texts = bench.scripted_texts(turns)
    order = [texts[rid][k] for k in range(turns) for rid in bench.ROLES if k < len(texts[rid])]
    run = bench.run_turns(turns, sink=False)
    assert run.digest == bench.texts_digest(order)
    assert bench.is_pinned({"autogen-agentchat": "0.7.5", "autogen-ext": "0.7.5"})
    assert not bench.is_pinned(None)


def test_only_and_out_select_and_save(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    doc, stdout = run_bench("--quick", "--only", "routing", "--out", str(out))
    assert set(doc["benchmarks"]) == {"routing"}
    assert json.loads(out.read_text("utf-8")) == json.loads(stdout)


def test_scale_runs_only_the_sessions_part_asked_for() -> None:
    """`--scale sessions --sizes N --where inproc`: one benchmark, one size, one part (a
    round of the 2-worker figure takes minutes, not the whole scale suite)."""
    doc, _ = run_bench("--quick", "--scale", "sessions", "--sizes", "4", "--where", "inproc")
    assert set(doc["benchmarks"]) == {"sessions"}
    bench = doc["benchmarks"]["sessions"]
    assert "error" not in bench, bench.get("error")
    assert set(bench["figures"]) == {
        "s4_inproc_replies_per_s",
        "s4_inproc_fraction_of_ideal",
        "s4_inproc_cpu_ms_per_reply",
    }
    assert bench["checks"]["s4_inproc_every_reply"]["met"] is True
    (run,) = bench["details"]["runs"]
    assert run["sessions"] == 4 and run["where"] == "inproc" and run["replies"] == 20


def test_sessions_options_need_the_sessions_benchmark() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--scale", "nats", "--sizes", "200"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2
    assert "--sizes" in proc.stderr and "--scale sessions" in proc.stderr


def test_cpu_per_reply_is_asked_for_by_name_or_peers_never_by_default() -> None:
    """`cpu_per_reply` installs AutoGen and AG2 in venvs of their own and imports litellm
    (seconds of CPU) in several processes: chosen with `--peers` or `--only`, never part
    of the default or `--quick` run (the quick report above has exactly BENCHMARKS)."""
    bench = load_bench_module()
    assert bench.parse_args(["--only", "cpu_per_reply"]).only == ["cpu_per_reply"]
    assert bench.parse_args(["--peers"]).peers is True
    assert "cpu_per_reply" in bench.PEERS and "cpu_per_reply" not in bench.BENCHMARKS
    # AutoGen's pins name the extra its OpenAI client needs, and still compare by name
    assert "autogen-ext[openai]==0.7.5" in bench.AUTOGEN_PINS
    assert bench.is_pinned({"autogen-agentchat": "0.7.5", "autogen-ext": "0.7.5"})
    assert not bench.is_pinned({"autogen-agentchat": "0.7.5", "autogen-ext": "0.7.4"})
