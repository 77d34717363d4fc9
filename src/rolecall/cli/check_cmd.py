"""``rolecall worlds check W``: a world's worst case before it runs (worlds.md)."""

from __future__ import annotations

import json

from rolecall.check import Report, check
from rolecall.llm.pricing import rates
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import Price
from rolecall.money import money
from rolecall.world.models import Role, World


def worst_case(world: World) -> Report:
    """The check with prices and maximum outputs from the models' own maps (no call)."""
    registry = ModelRegistry()

    def price(role: Role) -> tuple[float, float] | None:
        name = world.model_for(role)
        own = role.price
        price = Price(own.input_per_mtok, own.output_per_mtok) if own is not None else None
        return rates(registry.get(name), name, price)

    def max_output(role: Role) -> int | None:
        name = world.model_for(role)
        if name == "scripted":
            return None
        found = getattr(registry.get(name), "max_output_tokens", None)
        value = found(name) if callable(found) else None
        return value if isinstance(value, int) else None

    return check(world, price, max_output)


def summary(report: Report) -> str:
    """One line for ``worlds validate``."""
    if not report.has_flow:
        return "worst case: no flow (turns follow the human's messages)"
    parts = [f"worst case: {report.worst_case_turns} turns"]
    if report.flow_turns is None:
        parts.append("the flow may cycle without end")
    parts.append(f"cost {money(report.cost_usd)}")
    if report.cut is not None:
        parts.append(f"cut by {report.cut.describe()}")
    if report.unreachable:
        parts.append("unreachable: " + ", ".join(report.unreachable))
    return "; ".join(parts)


def _n(value: int | None) -> str:
    return "?" if value is None else f"{value:,}"


def table(report: Report) -> str:
    if not report.has_flow:
        return f"{report.world}: no flow; turns follow the human's messages (turn_limit each)"
    lines = [f"{'ROLE':16} {'TURNS':>6} {'INPUT TOK':>11} {'OUTPUT TOK':>11} {'COST':>11}"]
    for role, case in report.per_role.items():
        lines.append(
            f"{role:16} {case.turns:>6} {_n(case.input_tokens):>11} "
            f"{_n(case.output_tokens):>11} {money(case.cost_usd):>11}"
        )
    total = "unbounded" if report.flow_turns is None else str(report.flow_turns)
    lines.append(f"worst case: {report.worst_case_turns} turns (the flow alone: {total})")
    lines.append(f"cost: {money(report.cost_usd)}")
    if report.cycle:
        lines.append("cycle without a loop max: " + " → ".join(report.cycle))
    lines.append("cut by: " + (report.cut.describe() if report.cut else "nothing"))
    if report.unreachable:
        lines.append("unreachable steps: " + ", ".join(report.unreachable))
    if report.cap_only:
        lines.append(
            "only a stop condition or a cap ends the flow after: " + ", ".join(report.cap_only)
        )
    return "\n".join(lines)


def cmd_check(world: World, *, json_out: bool) -> int:
    """``rolecall worlds check``: the worst case of ``world``, as a table or JSON."""
    report = worst_case(world)
    print(json.dumps(report.as_json()) if json_out else table(report))
    return 0
