"""``contains`` and ``regex``: the latest message (optionally a role's) has a text."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Annotated

from pydantic import Field

from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate


class ContainsCond(CondModel):
    contains: Annotated[str, Field(min_length=1)]
    role: str | None = None


class RegexCond(CondModel):
    regex: Annotated[str, Field(min_length=1)]
    role: str | None = None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _latest_text(role: str | None, ctx: ConditionContext) -> tuple[str | None, str]:
    msg = ctx.transcript.latest(role)
    who = f"latest message by {role}" if role else "latest message"
    if msg is None:
        return None, f"no {who}"
    return msg.content, f"{who} ({msg.id})"


def _contains(cond: ContainsCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    text, where = _latest_text(cond.role, ctx)
    if text is None:
        return False, where, "keyword"
    found = cond.contains.casefold() in text.casefold()
    verb = "contains" if found else "does not contain"
    return found, f"{where} {verb} {cond.contains!r}", "keyword"


def _regex(cond: RegexCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    text, where = _latest_text(cond.role, ctx)
    if text is None:
        return False, where, "keyword"
    found = _compiled(cond.regex).search(text) is not None
    verb = "matches" if found else "does not match"
    return found, f"{where} {verb} /{cond.regex}/", "keyword"


CONTAINS = ConditionKind(
    "contains",
    ContainsCond,
    _contains,
    "the latest message (by role, or role: human, when given) contains the text, ignoring case",
    role_fields=("role",),
    human_role=True,
)
REGEX = ConditionKind(
    "regex",
    RegexCond,
    _regex,
    "the latest message (by role, or role: human, when given) matches the regular expression",
    role_fields=("role",),
    human_role=True,
)
