"""`scripts/bench.py --only tools` (scripts/bench_tools.py) reports an MCP round trip
against its peer and floor, and the per-turn overhead of tools declared but unused.

Only the report's shape is checked: speed is measured by the script, never asserted here.
"""

from __future__ import annotations

import pytest

from tests.test_bench_script import is_number, run_bench


@pytest.mark.timeout(240)  # MCP servers started several times, on a busy machine
def test_the_tools_benchmark_reports_round_trips_and_the_per_turn_ratio() -> None:
    doc, _ = run_bench("--quick", "--only", "tools", timeout=230)
    assert set(doc["benchmarks"]) == {"tools"}
    bench = doc["benchmarks"]["tools"]
    assert "error" not in bench, bench.get("error")
    figures = bench["figures"]
    for name in ("mcp_call", "mcp_sdk_call", "function_call", "python_tool_call"):
        for stat in ("p50", "p99"):
            assert is_number(figures[f"{name}_ms_{stat}"]), name
            assert bench["units"][f"{name}_ms_{stat}"] == "ms"
    # the ratio is the two per-turn figures of the same run, divided
    ratio = figures["turn_ms_tools_unused"] / figures["turn_ms_no_tools"]
    assert figures["turn_ratio_tools_unused"] == pytest.approx(ratio, rel=1e-3)
    (target,) = bench["targets"]
    assert (target["figure"], target["op"], target["limit"]) == (
        "turn_ratio_tools_unused",
        "<=",
        1.05,
    )
    assert set(bench["method"]) >= {"mcp_call", "mcp_sdk_call", "function_call", "turns"}
