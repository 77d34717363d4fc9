"""`worlds check`: a flow's worst case, computed by hand and against real scripted runs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rolecall.check import Report
from rolecall.cli.check_cmd import worst_case
from tests.cli.test_run_cli import rolecall
from tests.helpers import run_flow, scripted_world, world_from

pytestmark = pytest.mark.anyio


def steps(n: int, speakers: str = "ab", **loops: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"id": f"s{i}", "speaker": speakers[(i - 1) % len(speakers)]} for i in range(1, n + 1)
    ]
    for sid, loop in loops.items():
        out[int(sid[1:]) - 1]["loop"] = loop
    return out


def report(steps_: list[dict[str, Any]], **extra: Any) -> Report:
    return worst_case(scripted_world(steps_, **extra))


@pytest.mark.parametrize(
    ("flow", "turns"),
    [
        (steps(4, s3={"to": "s2", "max": 2}), 6),  # 1 2 3 2 3 4
        (steps(4, s3={"to": "s2", "max": 1}), 4),  # max 1 never jumps back
        (steps(3, s2={"to": "s2", "max": 3}), 5),  # 1 2 2 2 3
        (steps(3, s2={"to": "s1", "max": 3}), 7),  # 1 2 1 2 1 2 3
        (steps(5, s2={"to": "s1", "max": 2}, s4={"to": "s3", "max": 3}), 11),
        # counters never reset: 1 2 3 2 3 4 1 2 3 4, not 2 x (1 + 2 x 2 + 1)
        (steps(4, s3={"to": "s2", "max": 2}, s4={"to": "s1", "max": 2}), 10),
        # until-loops bounded by their max: 1 + 4 x 2 + 1
        (steps(4, s3={"to": "s2", "max": 4, "until": {"contains": "DONE"}}), 10),
    ],
)
def test_loops_by_their_max(flow: list[dict[str, Any]], turns: int) -> None:
    r = report(flow)
    assert r.worst_case_turns == turns
    assert r.flow_turns == turns
    assert r.cut is None
    assert sum(c.turns for c in r.per_role.values()) == turns


def test_branches_take_the_longest_path_and_unreachable_steps_are_named() -> None:
    flow = [
        {"id": "open", "speaker": "a", "next": [{"when": {"contains": "x"}, "goto": "long"}]},
        {"id": "short", "speaker": "b", "next": "end"},
        {"id": "long", "speaker": "a"},
        {"id": "longer", "speaker": "b", "next": [{"goto": "last"}, {"goto": "never"}]},
        {"id": "never", "speaker": "a"},
        {"id": "last", "speaker": "a"},
    ]
    r = report(flow)
    assert r.worst_case_turns == 4  # open long longer last (not open short)
    assert r.unreachable == ["never"]  # only an unconditional branch's sibling leads there
    assert r.per_role["a"].turns == 3 and r.per_role["b"].turns == 1


def test_per_role_worst_case_follows_each_roles_own_longest_path() -> None:
    flow = [
        {"id": "open", "speaker": "a", "next": [{"when": {"contains": "x"}, "goto": "bb"}]},
        {"id": "aa", "speaker": "a", "loop": {"to": "aa", "max": 3}, "next": "end"},
        {"id": "bb", "speaker": "b", "loop": {"to": "bb", "max": 2}},
    ]
    r = report(flow)
    assert r.worst_case_turns == 4  # open aa aa aa
    assert r.per_role["a"].turns == 4
    assert r.per_role["b"].turns == 2  # open bb bb: the other path


def test_a_cycle_without_a_loop_max_is_cut_by_max_turns() -> None:
    flow = [
        {"id": "s1", "speaker": "a"},
        {
            "id": "s2",
            "speaker": "b",
            "next": [
                {"when": {"contains": "again"}, "goto": "s1"},
                {"when": {"contains": "bye"}, "goto": "end"},
            ],
        },
        {"id": "s3", "speaker": "a", "next": "s3"},
    ]
    r = report(flow, settings={"max_turns": 7})
    assert r.flow_turns is None
    assert r.worst_case_turns == 7
    assert r.cut is not None and (r.cut.cap, r.cut.turn) == ("max_turns", 8)
    assert r.cycle is not None and r.cycle[0] == r.cycle[-1]
    assert r.cap_only == ["s3"]  # after s3 only a stop condition or a cap ends the flow


def test_max_turns_cuts_where_the_worst_case_passes_it() -> None:
    r = report(steps(3, s2={"to": "s1", "max": 3}), settings={"max_turns": 5})
    assert r.flow_turns == 7
    assert r.worst_case_turns == 5
    assert r.cut is not None and (r.cut.cap, r.cut.turn, r.cut.step) == ("max_turns", 6, "s2")


def test_a_max_turns_stop_condition_ends_the_walk() -> None:
    r = report(steps(3, s2={"to": "s1", "max": 3}), stop=[{"max_turns": 4}])
    assert r.worst_case_turns == 4
    assert r.cut is None


def test_tokens_by_hand_and_max_tokens_cut() -> None:
    world = world_from(
        {
            "name": "t",
            "model": "scripted",
            "roles": [{"id": "a", "system_prompt": "S" * 36, "script": ["x" * 40]}],
            "flow": {"steps": [{"id": "s1", "speaker": "a", "reply_to": "none"}]},
        }
    )
    r = worst_case(world)
    case = r.per_role["a"]
    assert case.output_tokens == 10  # 40 characters
    # system text and the turn text, by the same estimate the budgets use
    from rolecall.llm.types import ChatMessage, prompt_tokens
    from rolecall.prompt import system_text, turn_text

    role = world.role("a")
    exact = prompt_tokens(
        (
            ChatMessage("system", system_text(world, role)),
            ChatMessage("user", turn_text(world, role, None, None)),
        )
    )
    assert exact <= (case.input_tokens or 0) <= exact + 4
    capped = world.model_copy(
        update={"settings": world.settings.model_copy(update={"max_tokens": 10})}
    )
    cut = worst_case(capped)
    assert cut.worst_case_turns == 0 and cut.cut is not None and cut.cut.cap == "max_tokens"


def test_prices_give_a_cost_and_an_unpriced_model_gives_null() -> None:
    priced = scripted_world(steps(2), roles=["a", "b"])
    from rolecall.world.models import Price

    roles = [
        r.model_copy(update={"price": Price(input_per_mtok=1.0, output_per_mtok=2.0)})
        for r in priced.roles
    ]
    r = worst_case(priced.model_copy(update={"roles": roles}))
    by_hand = sum(
        (c.input_tokens or 0) * 1e-6 + (c.output_tokens or 0) * 2e-6 for c in r.per_role.values()
    )
    assert r.cost_usd == pytest.approx(by_hand) and r.cost_usd > 0
    free = worst_case(priced)
    assert free.cost_usd == 0.0  # scripted: free


async def test_a_real_run_never_exceeds_the_check() -> None:
    flows = [
        steps(4, "abc", s3={"to": "s2", "max": 2}, s4={"to": "s1", "max": 2}),
        steps(5, "ab", s2={"to": "s1", "max": 2}, s4={"to": "s3", "max": 3}),
        [
            {"id": "s1", "speaker": "a", "reply_to": "none"},
            {"id": "s2", "speaker": "b", "reply_to": {"role": "a"}, "loop": {"to": "s1", "max": 6}},
            {"id": "s3", "speaker": "c", "reply_to": {"message": "m2"}},
        ],
    ]
    for flow in flows:
        world = scripted_world(flow, settings={"memory_window": 3})
        r = worst_case(world)
        session, _ = await run_flow(world)
        messages = session.transcript
        assert len(messages) == r.worst_case_turns  # no choices: the worst case is the run
        for role, case in r.per_role.items():
            mine = [m for m in messages if m.sender == role]
            assert len(mine) == case.turns
            assert sum(m.input_tokens for m in mine) <= (case.input_tokens or 0)
            assert sum(m.output_tokens for m in mine) <= (case.output_tokens or 0)


async def test_shipped_scripted_worlds_stay_within_their_check() -> None:
    from rolecall.world.loader import load_world

    for name in ("tutoring", "review", "courtroom", "classroom", "moderated"):
        world = load_world(name).world
        r = worst_case(world)
        session, _ = await run_flow(world)
        messages = [m for m in session.transcript if m.kind == "agent"]
        assert r.worst_case_turns is not None and len(messages) <= r.worst_case_turns, name
        for role, case in r.per_role.items():
            mine = [m for m in messages if m.sender == role]
            assert len(mine) <= case.turns, (name, role)
            assert sum(m.input_tokens for m in mine) <= (case.input_tokens or 0), (name, role)
            assert sum(m.output_tokens for m in mine) <= (case.output_tokens or 0), (name, role)


def test_cli_json_and_the_validate_line(tmp_path: Any) -> None:
    out = rolecall("worlds", "check", "worlds/tutoring", "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert set(data) >= {"worst_case_turns", "per_role", "unreachable", "cost_usd", "cut_by"}
    assert data["worst_case_turns"] == 10 and data["cost_usd"] == 0 and data["cut_by"] is None
    assert data["per_role"]["learner"]["turns"] == 4
    table = rolecall("worlds", "check", "worlds/tutoring")
    assert "worst case: 10 turns" in table.stdout and "learner" in table.stdout
    valid = rolecall("worlds", "validate", "worlds/debate")
    assert "worst case: 9 turns" in valid.stdout and "cut by max_turns 9" in valid.stdout


def test_an_unpriced_role_makes_the_cost_null() -> None:
    from rolecall.check import check

    world = scripted_world(steps(2), roles=["a", "b"])
    r = check(world, lambda role: None if role.id == "b" else (1e-6, 2e-6), lambda role: None)
    assert r.cost_usd is None
    assert r.per_role["b"].cost_usd is None and (r.per_role["a"].cost_usd or 0) > 0
    assert r.as_json()["cost_usd"] is None
