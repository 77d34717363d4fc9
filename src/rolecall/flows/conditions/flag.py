"""``flag``: a flag set by ``/flag NAME`` (or the API's ``set_flag``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate


class FlagCond(CondModel):
    flag: Annotated[str, Field(min_length=1)]


def _flag(cond: FlagCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    on = cond.flag in ctx.flags
    return on, f"flag {cond.flag} is {'set' if on else 'not set'}", "flag"


FLAG = ConditionKind("flag", FlagCond, _flag, "the flag has been set")
