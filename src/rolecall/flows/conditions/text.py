"""``contains`` and ``regex``: the latest message (optionally a role's) has a text."""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, Field

from rolecall.errors import ConditionTimeout
from rolecall.flows import patterns
from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate


class ContainsCond(CondModel):
    contains: Annotated[str, Field(min_length=1)]
    role: str | None = None


class RegexCond(CondModel):
    # compiled at load time, so a bad pattern is a world error at its path
    regex: Annotated[str, Field(min_length=1), AfterValidator(patterns.check)]
    role: str | None = None


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
    try:
        found = patterns.search(cond.regex, text)
    except patterns.PatternTimeout as exc:
        role = f", role: {cond.role}" if cond.role else ""
        raise ConditionTimeout(f"{{regex: {cond.regex}{role}}} on the {where}: {exc}") from None
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
