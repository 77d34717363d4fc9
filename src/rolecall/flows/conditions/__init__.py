"""Flow conditions (flows.md, Conditions): one table of kinds, and their evaluation.

:data:`KINDS` is the only list of conditions. The YAML discriminator (:data:`Condition`),
the loader's field list and error texts (:func:`fields`), :func:`describe`, and every
walk of a condition tree (:func:`walk`, :func:`raw_walk`) derive from it. A new kind of
condition is one module defining its model, its check and its :class:`ConditionKind`,
plus one line in :data:`KINDS`.

Evaluation is pure: a condition and a :class:`ConditionContext` in, an
:class:`Evaluation` out. Mode conditions and judge scores are supplied by the context,
so modes plug in without touching this package.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Annotated, Any, Union

from pydantic import Tag, WrapValidator
from pydantic_core import PydanticCustomError

from rolecall.flows.conditions import budget, flag, judge, logic, mode, text
from rolecall.flows.conditions.base import (
    ConditionContext,
    ConditionKind,
    CondModel,
    Evaluation,
    ModeCheck,
    raw_children,
)
from rolecall.flows.conditions.budget import MaxSecondsCond, MaxTokensCond, MaxTurnsCond
from rolecall.flows.conditions.flag import FlagCond
from rolecall.flows.conditions.judge import JudgeCond
from rolecall.flows.conditions.logic import AllCond, AnyCond, NotCond
from rolecall.flows.conditions.mode import ModeCond
from rolecall.flows.conditions.text import ContainsCond, RegexCond

__all__ = [
    "KINDS",
    "AllCond",
    "AnyCond",
    "CondModel",
    "Condition",
    "ConditionContext",
    "ConditionKind",
    "ContainsCond",
    "Evaluation",
    "FlagCond",
    "JudgeCond",
    "MaxSecondsCond",
    "MaxTokensCond",
    "MaxTurnsCond",
    "ModeCheck",
    "ModeCond",
    "NotCond",
    "RegexCond",
    "describe",
    "evaluate",
    "fields",
    "raw_walk",
    "walk",
]

KINDS: tuple[ConditionKind[Any], ...] = (
    text.CONTAINS,
    text.REGEX,
    budget.MAX_TURNS,
    budget.MAX_TOKENS,
    budget.MAX_SECONDS,
    flag.FLAG,
    logic.ANY,
    logic.ALL,
    logic.NOT,
    judge.JUDGE,
    mode.MODE,
)

_BY_KEY: dict[str, ConditionKind[Any]] = {k.key: k for k in KINDS}
_BY_MODEL: dict[type[CondModel], ConditionKind[Any]] = {k.model: k for k in KINDS}


def _kind_of_raw(value: Any) -> ConditionKind[Any] | None:
    if isinstance(value, str):
        return next((k for k in KINDS if k.words is not None and value in k.words()), None)
    if isinstance(value, Mapping):
        return next((k for k in KINDS if k.key in value), None)
    if isinstance(value, CondModel):
        return _BY_MODEL.get(type(value))
    return None


def _tag(value: Any) -> str | None:
    kind = _kind_of_raw(value)
    return None if kind is None else f"cond:{kind.key}"


def _spellings() -> str:
    keys = [k.key for k in KINDS if k.words is None]
    words = [w for k in KINDS if k.words is not None for w in k.words()]
    return ", ".join([*keys, *words])


def _known(value: Any, handler: Any) -> Any:
    if _tag(value) is None:
        raise PydanticCustomError(
            "unknown_condition", "not a condition (use one of: {kinds})", {"kinds": _spellings()}
        )
    return handler(value)


if TYPE_CHECKING:
    Condition = CondModel
else:
    from pydantic import Discriminator

    Condition = Annotated[
        Annotated[
            Union[tuple(Annotated[k.model, Tag(f"cond:{k.key}")] for k in KINDS)],  # noqa: UP007
            Discriminator(_tag),
        ],
        WrapValidator(_known),
    ]

for _kind in KINDS:
    if _kind.nested:
        # a nested kind's fields name the union `Condition`: its module gets it, so the
        # model resolves it when first built (with the world's model, on first use)
        # instead of each building the whole union now
        vars(sys.modules[_kind.model.__module__])["Condition"] = Condition


def evaluate(cond: CondModel, ctx: ConditionContext) -> Evaluation:
    """Evaluate ``cond``; the Evaluation says what held and why."""
    holds, detail, reason = _BY_MODEL[type(cond)].check(cond, ctx, evaluate)
    return Evaluation(describe(cond), holds, detail, cond.name or reason)


def describe(cond: CondModel) -> str:
    """A compact one-line form of a condition, for events and traces."""
    if isinstance(cond, ModeCond):
        return cond.mode
    data = cond.model_dump(by_alias=True, exclude_none=True)
    parts = []
    for key, info in type(cond).model_fields.items():
        alias = info.alias or key
        if alias == "name" or alias not in data:
            continue
        value = getattr(cond, key)
        if isinstance(value, list):
            parts.append(f"{alias}: [{', '.join(describe(v) for v in value)}]")
        elif isinstance(value, CondModel):
            parts.append(f"{alias}: {describe(value)}")
        else:
            parts.append(f"{alias}: {data[alias]}")
    return "{" + ", ".join(parts) + "}"


def walk(cond: CondModel) -> Iterator[CondModel]:
    """``cond`` and every condition nested in it, depth first."""
    yield cond
    for inner in cond.children():
        yield from walk(inner)


def raw_walk(where: str, cond: Any) -> Iterator[tuple[str, ConditionKind[Any], Mapping[str, Any]]]:
    """``(path, kind, mapping)`` for a raw (YAML) condition and those nested in it.

    Bare words and mappings of no known kind are skipped (validation reports them).
    """
    kind = _kind_of_raw(cond)
    if kind is None or not isinstance(cond, Mapping):
        return
    yield where, kind, cond
    for suffix, inner in raw_children(cond, kind.nested):
        yield from raw_walk(where + suffix, inner)


def fields() -> tuple[str, ...]:
    """Every field any condition has: the kinds' keys, then the others (the loader's hints)."""
    out = dict.fromkeys(k.key for k in KINDS)
    for kind in KINDS:
        out.update(dict.fromkeys(kind.fields))
    return tuple(out)
