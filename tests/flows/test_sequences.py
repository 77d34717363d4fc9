"""The flow semantics of flows.md, pinned sequence by sequence with scripted roles."""

from __future__ import annotations

from typing import Any

import pytest

from tests.helpers import Recorder, opened, run_flow, scripted_world

pytestmark = pytest.mark.anyio


def four(**loops: dict[str, Any]) -> list[dict[str, Any]]:
    steps = [{"id": f"s{i}", "speaker": "a"} for i in range(1, 5)]
    for sid, loop in loops.items():
        steps[int(sid[1:]) - 1]["loop"] = loop
    return steps


def numbers(rec: Recorder) -> list[int]:
    return [int(s[1:]) for s in rec.steps()]


async def test_loop_back_twice() -> None:
    _, rec = await run_flow(scripted_world(four(s3={"to": "s2", "max": 2})))
    assert numbers(rec) == [1, 2, 3, 2, 3, 4]
    assert rec.stop().reason == "flow_end"


async def test_max_one_never_jumps_back() -> None:
    _, rec = await run_flow(scripted_world(four(s3={"to": "s2", "max": 1})))
    assert numbers(rec) == [1, 2, 3, 4]


async def test_self_loop() -> None:
    steps = [{"id": f"s{i}", "speaker": "a"} for i in range(1, 4)]
    steps[1]["loop"] = {"to": "s2", "max": 3}
    _, rec = await run_flow(scripted_world(steps))
    assert numbers(rec) == [1, 2, 2, 2, 3]


async def test_two_loops_in_one_flow() -> None:
    steps = [{"id": f"s{i}", "speaker": "a"} for i in range(1, 6)]
    steps[1]["loop"] = {"to": "s1", "max": 2}
    steps[3]["loop"] = {"to": "s3", "max": 3}
    _, rec = await run_flow(scripted_world(steps))
    assert numbers(rec) == [1, 2, 1, 2, 3, 4, 3, 4, 3, 4, 5]


async def test_counters_are_per_step_and_never_reset() -> None:
    # s2 loops back to s1 twice; s1 has its own loop that re-enters s2's region
    steps = [{"id": f"s{i}", "speaker": "a"} for i in range(1, 4)]
    steps[1]["loop"] = {"to": "s1", "max": 3}
    _, rec = await run_flow(scripted_world(steps))
    assert numbers(rec) == [1, 2, 1, 2, 1, 2, 3]


async def test_loop_iteration_matches_earlier_executions() -> None:
    _, rec = await run_flow(scripted_world(four(s3={"to": "s2", "max": 3})))
    counts: dict[str, int] = {}
    log = rec.of("system", "step")  # the execution log, a record a step
    for record in log:
        assert record.loop_iteration == counts.get(record.step_id, 0)
        counts[record.step_id] = counts.get(record.step_id, 0) + 1
    assert [r.execution_order for r in log] == list(range(1, 9))
    assert [e.loop_iteration for e in rec.of("system", "step")] == [0, 0, 0, 1, 1, 2, 2, 0]
    messages = rec.of("messages", "message")
    assert [m.loop_iteration for m in messages] == [0, 0, 0, 1, 1, 2, 2, 0]


async def test_step_results_in_the_log() -> None:
    _, rec = await run_flow(scripted_world(four(s3={"to": "s2", "max": 2})))
    results = [(e.step_id, e.result) for e in rec.of("system", "step")]
    assert results == [
        ("s1", "success"),
        ("s2", "success"),
        ("s3", "loop_continue"),
        ("s2", "success"),
        ("s3", "loop_break"),
        ("s4", "success"),
    ]


async def test_until_fires_on_the_second_pass() -> None:
    world = scripted_world(
        [
            {"id": "ask", "speaker": "student"},
            {
                "id": "answer",
                "speaker": "teacher",
                "loop": {
                    "to": "ask",
                    "max": 5,
                    "until": {"contains": "understood", "role": "teacher"},
                },
            },
            {"id": "close", "speaker": "student"},
        ],
        roles=["teacher", "student"],
    )
    world = world.model_copy(
        update={
            "roles": [
                world.role("teacher").model_copy(update={"script": ["not yet", "UNDERSTOOD now"]}),
                world.role("student"),
            ]
        }
    )
    _, rec = await run_flow(world)
    assert rec.steps() == ["ask", "answer", "ask", "answer", "close"]
    until = [c for c in rec.of("system", "condition") if c.context == "until:answer"]
    assert [c.result for c in until] == [False, True]


@pytest.mark.parametrize(
    ("said", "expected"), [("it is feasible", "approve"), ("no way", "revise")]
)
async def test_branch_each_way(said: str, expected: str) -> None:
    world = scripted_world(
        [
            {
                "id": "review",
                "speaker": "prof",
                "next": [
                    {"when": {"contains": "FEASIBLE"}, "goto": "approve"},
                    {"goto": "revise"},
                ],
            },
            {"id": "approve", "speaker": "official", "next": "end"},
            {"id": "revise", "speaker": "lawyer"},
        ],
        roles=["prof", "official", "lawyer"],
    )
    world = world.model_copy(
        update={
            "roles": [world.role("prof").model_copy(update={"script": [said]}), *world.roles[1:]]
        }
    )
    _, rec = await run_flow(world)
    assert rec.steps() == ["review", expected]
    assert rec.of("system", "step")[0].result == f"branch:{expected}"
    assert rec.stop().reason == "flow_end"


async def test_max_turns_cuts_a_loop_short() -> None:
    world = scripted_world(four(s3={"to": "s2", "max": 100}), settings={"max_turns": 5})
    session, rec = await run_flow(world)
    assert numbers(rec) == [1, 2, 3, 2, 3]
    stop = rec.stop()
    assert stop.reason == "max_turns"
    assert session.result.turns == 5


async def test_keyword_stop_inside_a_loop() -> None:
    steps = four(s3={"to": "s2", "max": 10})
    world = scripted_world(steps, stop=[{"contains": "a says 5"}])
    _, rec = await run_flow(world)
    assert numbers(rec) == [1, 2, 3, 2, 3]
    assert rec.stop().reason == "keyword"


async def test_named_condition_gives_its_name_as_the_reason() -> None:
    world = scripted_world(
        four(), stop=[{"any": [{"regex": "says [3]"}, {"flag": "x"}], "name": "third"}]
    )
    _, rec = await run_flow(world)
    assert numbers(rec) == [1, 2, 3]
    assert rec.stop().reason == "third"


async def test_max_turns_condition_and_flag_stop() -> None:
    world = scripted_world(four(s3={"to": "s2", "max": 50}), stop=[{"max_turns": 4}])
    _, rec = await run_flow(world)
    assert len(rec.steps()) == 4 and rec.stop().reason == "max_turns"

    world = scripted_world(four(s3={"to": "s2", "max": 50}), stop=[{"flag": "done"}])
    async with opened(world) as (session, rec):
        for _ in range(3):
            await session.step()
        session.set_flag("done")
        await session.run()
    assert len(rec.steps()) == 4
    assert rec.stop().reason == "flag"


async def test_max_tokens_budget_is_checked_before_the_call() -> None:
    world = scripted_world(four(s3={"to": "s2", "max": 50}), settings={"max_tokens": 400})
    session, rec = await run_flow(world)
    assert rec.stop().reason == "max_tokens"
    # no turn started that could not fit: the total stays within the budget
    assert session.result.tokens <= 400
    assert len(rec.of("sse", "start")) == len(rec.of("messages", "message"))


async def test_step_mode_and_auto_mode_give_the_same_sequence() -> None:
    world = scripted_world(four(s3={"to": "s2", "max": 3}, s4={"to": "s1", "max": 2}))
    _, auto = await run_flow(world)
    async with opened(world) as (session, stepped):
        while await session.step():
            pass
    assert stepped.steps() == auto.steps()
    assert [m.content for m in stepped.of("messages", "message")] == [
        m.content for m in auto.of("messages", "message")
    ]
    assert stepped.stop().reason == auto.stop().reason == "flow_end"


async def test_next_end_and_explicit_start() -> None:
    steps = [
        {"id": "a1", "speaker": "a", "next": "a3"},
        {"id": "a2", "speaker": "a", "next": "end"},
        {"id": "a3", "speaker": "a", "next": "a2"},
    ]
    _, rec = await run_flow(scripted_world(steps))
    assert rec.steps() == ["a1", "a3", "a2"]
    _, rec = await run_flow(scripted_world(steps, start="a3"))
    assert rec.steps() == ["a3", "a2"]


async def test_final_step_runs_once_after_the_stop_and_before_world_stop() -> None:
    world = scripted_world(
        four(s3={"to": "s2", "max": 10}),
        roles=["a", "mod"],
        stop=[{"contains": "a says 4"}],
    )
    flow = world.flow
    assert flow is not None
    from rolecall.flows.model import FinalStep

    world = world.model_copy(
        update={"flow": flow.model_copy(update={"final": FinalStep(speaker="mod", id="synthesis")})}
    )
    _, rec = await run_flow(world)
    assert rec.steps() == ["s1", "s2", "s3", "s2", "synthesis"]
    messages = rec.of("messages", "message")
    assert messages[-1].sender == "mod" and messages[-1].step_id == "synthesis"
    assert rec.events[-1].event.type == "stop"
    assert rec.stop().reason == "keyword"  # the termination reason, not the synthesis


async def test_final_step_is_skipped_on_manual_stop_and_when_the_budget_is_spent() -> None:
    world = scripted_world(
        four(s3={"to": "s2", "max": 10}), roles=["a", "mod"], settings={"max_turns": 3}
    )
    flow = world.flow
    assert flow is not None
    from rolecall.flows.model import FinalStep

    world = world.model_copy(
        update={"flow": flow.model_copy(update={"final": FinalStep(speaker="mod")})}
    )
    _, rec = await run_flow(world)
    assert rec.stop().reason == "max_turns"
    assert all(m.sender == "a" for m in rec.of("messages", "message"))
