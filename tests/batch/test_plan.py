"""The batch plan (pure): --vary parsing, the cross product, varied worlds, result rows."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from rolecall.batch.plan import VaryError, build_plan, combinations, parse_vary, read_vary
from rolecall.batch.results import RunResult, Summary, percentile
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world

RAW: dict[str, Any] = {
    "name": "panel",
    "topic": "tea or coffee",
    "model": "scripted",
    "roles": [
        {"id": "alice", "script": ["alice {n}"]},
        {"id": "bob", "script": ["bob {n}"]},
    ],
    "flow": {"steps": [{"id": "a", "speaker": "alice"}, {"id": "b", "speaker": "bob"}]},
}


def plan_of(raw: dict[str, Any], *vary: str, runs: int = 1) -> Any:
    library = RoleLibrary()
    base = build_world(raw, source="world.yaml", library=library).world
    axes, problems = read_vary(vary)
    return build_plan(
        raw, axes, runs, base=base, source="world.yaml", library=library, problems=problems
    )


def test_the_cross_product_times_runs_numbers_every_run_once() -> None:
    plan = plan_of(RAW, "topic=tea,coffee,water", "role.bob.model=scripted,offline", runs=2)
    assert plan.total == 3 * 2 * 2
    assert [s.run for s in plan.runs] == list(range(1, 13))
    assert plan.runs[0].values == {"topic": "tea", "role.bob.model": "scripted"}
    assert plan.runs[1].values == plan.runs[0].values  # the second run of a combination
    assert plan.runs[2].values == {"topic": "tea", "role.bob.model": "offline"}
    assert plan.runs[-1].values == {"topic": "water", "role.bob.model": "offline"}
    worlds = [plan.worlds[s.combination] for s in plan.runs]
    assert [w.topic for w in worlds[::4]] == ["tea", "coffee", "water"]
    assert worlds[2].role("bob").model == "offline" and worlds[2].role("alice").model is None


def test_values_reach_the_world_as_if_written_in_the_file() -> None:
    plan = plan_of(
        RAW,
        "max_turns=3",
        "settings.memory_window=4",
        "settings.constraints=[one line]",
        "role.alice.persona=a retired sailor",
        "model=offline",
    )
    world = plan.worlds[0]
    assert world.settings.max_turns == 3 and world.settings.memory_window == 4
    assert world.settings.constraints == ["one line"]
    alice = world.role("alice")
    assert alice.description == "a retired sailor"
    assert alice.system_prompt == "You are a retired sailor."
    assert world.model == "offline"
    assert RAW["topic"] == "tea or coffee" and "settings" not in RAW  # the input is untouched


def test_a_preset_role_is_varied_by_id() -> None:
    raw = {"name": "d", "mode": "debate", "topic": "x", "debate": {"max_turns": 2}}
    plan = plan_of(raw, "role.con.persona=a tired judge", "role.pro.model=openai/gpt-4o-mini")
    world = plan.worlds[0]
    assert world.role("con").description == "a tired judge"
    assert world.role("pro").model == "openai/gpt-4o-mini"


def test_a_flow_yaml_value_or_a_quoted_one_is_one_value() -> None:
    """`settings.constraints=[a, b]` used to be split at its comma (batch.md: "the value is
    read as YAML (`4`, `0.5`, `null`, `[a, b]`)")."""
    axes = parse_vary(
        [
            "settings.constraints=[a, b],[don't, c], [d]",
            "settings.api_base={x: 1, y: [2, 3]},null",  # parsed here, checked by the world
            'topic="Cats, or dogs?",Don\'t panic,x [y, z]',
            "role.alice.persona='a sailor, retired',[an, odd]",
        ]
    )
    assert [a.values for a in axes] == [
        ("[a, b]", "[don't, c]", "[d]"),
        ("{x: 1, y: [2, 3]}", "null"),
        ('"Cats, or dogs?"', "Don't panic", "x [y", "z]"),
        ("'a sailor, retired'", "[an, odd]"),
    ]
    # a bracket never closed splits at every comma, as before: the world says what is wrong
    assert parse_vary(["settings.constraints=[a, b"])[0].values == ("[a", "b")
    plan = plan_of(
        RAW, "settings.constraints=[a, b],[c]", 'topic="Cats, or dogs?"', "max_turns=2,3"
    )
    worlds = [plan.worlds[s.combination] for s in plan.runs]
    assert [w.settings.constraints for w in worlds] == [["a", "b"]] * 2 + [["c"]] * 2
    assert {w.topic for w in worlds} == {"Cats, or dogs?"}  # a quoted text is the text


def test_a_result_records_the_values_as_written_into_the_world() -> None:
    """`max_turns: "6"` in --out used to be text; a list is a list."""
    from rolecall.batch.plan import recorded_values

    texts = {
        "max_turns": "6",
        "settings.constraints": "[a, b]",
        "settings.memory_window": "null",
        "topic": '"Cats, or dogs?"',
        "role.alice.model": "123",
    }
    assert recorded_values(texts) == {
        "max_turns": 6,
        "settings.constraints": ["a", "b"],
        "settings.memory_window": None,
        "topic": "Cats, or dogs?",
        "role.alice.model": "123",  # a model's name stays text
    }
    row = RunResult(batch="b", run=1, values=recorded_values(texts)).row()
    assert RunResult.from_row(row).values == recorded_values(texts)  # read back as written


def test_every_problem_is_listed_at_once() -> None:
    with pytest.raises(VaryError) as caught:
        plan_of(
            RAW,
            "topc=a",
            "settings.memory_windw=3",
            "max_turns=0,x,2",
            "role.carol.model=m",
            "topic=a,,b",
            "nothing",
            "model=a,a",
        )
    problems = caught.value.problems
    assert problems == [
        "topc: unknown key (keys: topic, model, max_turns, role.ID.model, role.ID.persona, settings.NAME)",
        "settings.memory_windw: no setting 'memory_windw' (did you mean memory_window?)",
        "topic: empty value in 'a,,b' (values are comma-separated)",
        "'nothing': expected KEY=V1,V2,... (keys: topic, model, max_turns, role.ID.model, role.ID.persona, settings.NAME)",
        "model: value 'a' given twice",
        "max_turns=0: settings.max_turns: input should be greater than or equal to 1 (got 0)",
        "max_turns=x: settings.max_turns: input should be a valid integer (got 'x')",
        "role.carol.model: no role 'carol' (known: alice, bob)",
    ]
    assert str(caught.value).startswith("--vary: 8 problems\n  topc: unknown key")


def test_a_key_given_twice_is_a_problem_and_runs_must_be_positive() -> None:
    with pytest.raises(VaryError, match="topic: given twice"):
        parse_vary(["topic=a", "topic=b"])
    with pytest.raises(Exception, match="--runs must be at least 1, got 0"):
        plan_of(RAW, runs=0)


def test_values_from_a_file_one_per_line(tmp_path: Path) -> None:
    topics = tmp_path / "topics.txt"
    topics.write_text("Cats, or dogs?\n\n  Tea before coffee  \n", encoding="utf-8")
    axes = parse_vary([f"topic=@{topics}"])
    assert axes[0].values == ("Cats, or dogs?", "Tea before coffee")
    with pytest.raises(VaryError, match=r"topic: cannot read .*missing.txt"):
        parse_vary([f"topic=@{tmp_path / 'missing.txt'}"])


def test_without_vary_a_batch_is_runs_of_the_world_itself() -> None:
    assert combinations([]) == [{}]
    plan = plan_of(RAW, runs=3)
    assert [(s.run, s.values) for s in plan.runs] == [(1, {}), (2, {}), (3, {})]


def test_a_result_row_is_flat_and_reads_back() -> None:
    result = RunResult(
        batch="b",
        run=4,
        session_id="s1",
        values={"topic": "tea", "role.bob.model": "m"},
        stop_reason="flow_end",
        turns=2,
        input_tokens=10,
        output_tokens=5,
        seconds=0.5,
    )
    row = result.row()
    assert list(row) == [
        "batch",
        "run",
        "session_id",
        "topic",
        "role.bob.model",
        "stop_reason",
        "turns",
        "input_tokens",
        "output_tokens",
        "cost_usd",
        "seconds",
        "error",
    ]
    assert row["cost_usd"] is None and row["error"] is None
    assert RunResult.from_row(yaml.safe_load(yaml.safe_dump(row))) == result


def test_the_summary_counts_stop_reasons_failures_and_percentiles() -> None:
    def r(run: int, reason: str | None, seconds: float, error: str | None = None) -> RunResult:
        return RunResult(
            batch="b", run=run, stop_reason=reason, seconds=seconds, error=error, input_tokens=3
        )

    results = [
        r(1, "flow_end", 1.0),
        r(2, "flow_end", 2.0),
        r(3, "max_turns", 3.0),
        r(4, None, 10.0, "model failed"),
    ]
    summary = Summary.of("b", 5, results, 12.0)
    assert (summary.finished, summary.failed, summary.pending) == (3, 1, 1)
    assert summary.stop_reasons == {"flow_end": 2, "max_turns": 1, "failed": 1}
    assert summary.failed_runs == [4] and summary.input_tokens == 12
    assert (summary.p50_seconds, summary.p95_seconds) == (2.0, 10.0)
    assert summary.cost_usd is None
    assert summary.record()["type"] == "batch" and summary.record()["topic"] == "world"
    table = summary.table()
    assert table.splitlines()[0] == "batch b: 3/5 runs finished, 1 failed (runs 4), 1 not run"
    assert "p50 2.00 · p95 10.00" in table
    assert percentile([], 50) is None and percentile([5.0], 95) == 5.0
