"""Evaluating flow conditions (flows.md, Conditions) over the session as it stands.

Pure: a condition and a :class:`ConditionContext` in, ``(holds, detail)`` out.
Mode conditions (concession, stalemate, consensus) and judge scores are supplied by
the context so that modes plug in without touching this module.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import BaseModel

from rolecall.flows.model import (
    AllCond,
    AnyCond,
    ContainsCond,
    FlagCond,
    JudgeCond,
    MaxSecondsCond,
    MaxTokensCond,
    MaxTurnsCond,
    ModeCond,
    NotCond,
    RegexCond,
    describe,
)
from rolecall.session.state import Transcript

ModeCheck = Callable[[], tuple[bool, str, str]]  # -> (holds, reason, detail)


@dataclass
class ConditionContext:
    transcript: Transcript
    flags: set[str] = field(default_factory=set)
    mode_checks: Mapping[str, ModeCheck] = field(default_factory=dict)
    judge_scores: Mapping[str, Mapping[str, float]] = field(
        default_factory=dict
    )  # judge -> name -> score


@dataclass(frozen=True, slots=True)
class Evaluation:
    condition: str
    result: bool
    detail: str
    reason: str  # the stop reason this condition gives when it holds


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def default_reason(cond: BaseModel) -> str:
    if isinstance(cond, ContainsCond | RegexCond):
        return "keyword"
    if isinstance(cond, FlagCond):
        return "flag"
    if isinstance(cond, MaxTurnsCond):
        return "max_turns"
    if isinstance(cond, MaxTokensCond):
        return "max_tokens"
    if isinstance(cond, MaxSecondsCond):
        return "max_seconds"
    if isinstance(cond, JudgeCond):
        return "judge"
    return "condition"


def evaluate(cond: BaseModel, ctx: ConditionContext) -> Evaluation:
    """Evaluate ``cond``; the Evaluation says what held and why."""
    holds, detail, reason = _eval(cond, ctx)
    name = getattr(cond, "name", None)
    return Evaluation(describe(cond), holds, detail, name or reason)


def _latest_text(cond: ContainsCond | RegexCond, ctx: ConditionContext) -> tuple[str | None, str]:
    msg = ctx.transcript.latest(cond.role)
    who = f"latest message by {cond.role}" if cond.role else "latest message"
    if msg is None:
        return None, f"no {who}"
    return msg.content, f"{who} ({msg.id})"


def _eval(cond: BaseModel, ctx: ConditionContext) -> tuple[bool, str, str]:
    t = ctx.transcript
    if isinstance(cond, ContainsCond):
        text, where = _latest_text(cond, ctx)
        if text is None:
            return False, where, "keyword"
        found = cond.contains.casefold() in text.casefold()
        return (
            found,
            f"{where} {'contains' if found else 'does not contain'} {cond.contains!r}",
            "keyword",
        )
    if isinstance(cond, RegexCond):
        text, where = _latest_text(cond, ctx)
        if text is None:
            return False, where, "keyword"
        found = _compiled(cond.regex).search(text) is not None
        return (
            found,
            f"{where} {'matches' if found else 'does not match'} /{cond.regex}/",
            "keyword",
        )
    if isinstance(cond, MaxTurnsCond):
        n = t.agent_turns
        return n >= cond.max_turns, f"{n} of {cond.max_turns} agent messages", "max_turns"
    if isinstance(cond, MaxTokensCond):
        n = t.tokens
        return n >= cond.max_tokens, f"{n} of {cond.max_tokens} tokens", "max_tokens"
    if isinstance(cond, MaxSecondsCond):
        s = t.seconds
        return s >= cond.max_seconds, f"{s:.2f} of {cond.max_seconds} s generating", "max_seconds"
    if isinstance(cond, FlagCond):
        on = cond.flag in ctx.flags
        return on, f"flag {cond.flag} is {'set' if on else 'not set'}", "flag"
    if isinstance(cond, AnyCond):
        for inner in cond.any:
            ev = evaluate(inner, ctx)
            if ev.result:
                return True, f"any: {ev.condition} holds ({ev.detail})", "condition"
        return False, "any: none holds", "condition"
    if isinstance(cond, AllCond):
        for inner in cond.all:
            ev = evaluate(inner, ctx)
            if not ev.result:
                return False, f"all: {ev.condition} does not hold ({ev.detail})", "condition"
        return True, "all: every condition holds", "condition"
    if isinstance(cond, NotCond):
        ev = evaluate(cond.not_, ctx)
        return (
            not ev.result,
            f"not: {ev.condition} {'holds' if ev.result else 'does not hold'}",
            "condition",
        )
    if isinstance(cond, JudgeCond):
        return _eval_judge(cond, ctx)
    if isinstance(cond, ModeCond):
        check = ctx.mode_checks.get(cond.mode)
        if check is None:
            return False, f"{cond.mode}: not available in this world", cond.mode
        holds, reason, detail = check()
        return holds, detail, reason
    raise TypeError(f"not a condition: {cond!r}")


def _eval_judge(cond: JudgeCond, ctx: ConditionContext) -> tuple[bool, str, str]:
    judges = [cond.role] if cond.role else list(ctx.judge_scores)
    for judge in judges:
        scores = ctx.judge_scores.get(judge or "", {})
        if cond.judge in scores:
            value = scores[cond.judge]
            ok = value >= cond.at_least
            return ok, f"{judge} {cond.judge} = {value:g} (needs {cond.at_least:g})", "judge"
    return False, f"no judge score {cond.judge!r} yet", "judge"
