"""``max_turns``, ``max_tokens``, ``max_seconds``: the session's running totals."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rolecall.flows.conditions.base import (
    ConditionContext,
    ConditionKind,
    CondModel,
    Evaluate,
    Number,
    Whole,
)


class MaxTurnsCond(CondModel):
    max_turns: Annotated[Whole, Field(ge=1)]


class MaxTokensCond(CondModel):
    max_tokens: Annotated[Whole, Field(ge=1)]


class MaxSecondsCond(CondModel):
    max_seconds: Annotated[Number, Field(gt=0)]


def _turns(cond: MaxTurnsCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    n = ctx.transcript.agent_turns
    return n >= cond.max_turns, f"{n} of {cond.max_turns} agent messages", "max_turns"


def _tokens(cond: MaxTokensCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    n = ctx.transcript.tokens
    return n >= cond.max_tokens, f"{n} of {cond.max_tokens} tokens", "max_tokens"


def _seconds(cond: MaxSecondsCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    s = ctx.transcript.seconds
    return s >= cond.max_seconds, f"{s:.2f} of {cond.max_seconds} s generating", "max_seconds"


MAX_TURNS = ConditionKind(
    "max_turns", MaxTurnsCond, _turns, "at least N agent messages in the session"
)
MAX_TOKENS = ConditionKind(
    "max_tokens", MaxTokensCond, _tokens, "at least N tokens used (input and output)"
)
MAX_SECONDS = ConditionKind(
    "max_seconds", MaxSecondsCond, _seconds, "at least N seconds spent generating"
)
