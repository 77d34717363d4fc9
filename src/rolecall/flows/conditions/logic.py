"""``any``, ``all``, ``not``: conditions made of conditions."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate

if TYPE_CHECKING:
    Condition = CondModel  # the registry's discriminated union, resolved when it is built


class AnyCond(CondModel):
    any: list[Condition] = Field(min_length=1)


class AllCond(CondModel):
    all: list[Condition] = Field(min_length=1)


class NotCond(CondModel):
    not_: Condition = Field(alias="not")


def _any(cond: AnyCond, ctx: ConditionContext, evaluate: Evaluate) -> tuple[bool, str, str]:
    for inner in cond.any:
        ev = evaluate(inner, ctx)
        if ev.result:
            return True, f"any: {ev.condition} holds ({ev.detail})", "condition"
    return False, "any: none holds", "condition"


def _all(cond: AllCond, ctx: ConditionContext, evaluate: Evaluate) -> tuple[bool, str, str]:
    for inner in cond.all:
        ev = evaluate(inner, ctx)
        if not ev.result:
            return False, f"all: {ev.condition} does not hold ({ev.detail})", "condition"
    return True, "all: every condition holds", "condition"


def _not(cond: NotCond, ctx: ConditionContext, evaluate: Evaluate) -> tuple[bool, str, str]:
    ev = evaluate(cond.not_, ctx)
    verb = "holds" if ev.result else "does not hold"
    return not ev.result, f"not: {ev.condition} {verb}", "condition"


ANY = ConditionKind("any", AnyCond, _any, "at least one of the conditions holds", nested=("any",))
ALL = ConditionKind("all", AllCond, _all, "every one of the conditions holds", nested=("all",))
NOT = ConditionKind("not", NotCond, _not, "the condition does not hold", nested=("not",))
