"""``judge``: a judge's latest score (modes.md, Judges) reaches a threshold."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate


class JudgeCond(CondModel):
    judge: Annotated[str, Field(min_length=1)]  # the score name, e.g. "score"
    at_least: float
    role: str | None = None  # which judge role; default any judge


def _judge(cond: JudgeCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    judges = [cond.role] if cond.role else list(ctx.judge_scores)
    for judge in judges:
        scores = ctx.judge_scores.get(judge or "", {})
        if cond.judge in scores:
            value = scores[cond.judge]
            ok = value >= cond.at_least
            return ok, f"{judge} {cond.judge} = {value:g} (needs {cond.at_least:g})", "judge"
    return False, f"no judge score {cond.judge!r} yet", "judge"


JUDGE = ConditionKind(
    "judge",
    JudgeCond,
    _judge,
    "a judge's latest score of that name is at least at_least",
    role_fields=("role",),
)
