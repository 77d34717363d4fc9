"""What every flow condition shares: its model base, the context it reads, its result.

A kind of condition is one :class:`ConditionKind` (its YAML key, model, check, stop
reason and description) in :data:`rolecall.flows.conditions.KINDS`; the YAML
discriminator, the loader's field list and error texts, the descriptions and every
walk of a condition tree derive from that table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict

from rolecall.session.state import Transcript


def _whole(value: Any) -> Any:
    """3.0 is 3 (to JSON, and so to `worlds schema`, they are one number); 3.5 is not."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


# The one rule for numbers in a world file, which `worlds validate` and `worlds schema`
# share: written as numbers (never "10" or "1.5" in quotes, never yes/no); a whole
# number where a count is meant (3 or 3.0, not 3.5).
Whole = Annotated[int, BeforeValidator(_whole), Strict()]
Number = Annotated[float, Strict()]

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


class CondModel(BaseModel):
    """The base of every condition model: strict fields and an optional ``name``.

    ``name`` replaces the kind's stop reason when the condition stops the flow.
    """

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)

    name: str | None = None

    def children(self) -> Iterator[CondModel]:
        """The conditions nested directly in this one (``any``, ``all``, ``not``)."""
        for key in type(self).model_fields:
            value = getattr(self, key)
            if isinstance(value, CondModel):
                yield value
            elif isinstance(value, list):
                yield from (v for v in value if isinstance(v, CondModel))


C = TypeVar("C", bound=CondModel)
Evaluate = Callable[[CondModel, ConditionContext], Evaluation]
Check = Callable[[C, ConditionContext, Evaluate], tuple[bool, str, str]]
"""A kind's check: the condition, the context, and ``evaluate`` for nested conditions;
returns ``(holds, detail, reason)``."""


@dataclass(frozen=True)
class ConditionKind(Generic[C]):
    """One kind of condition, as registered in :data:`rolecall.flows.conditions.KINDS`."""

    key: str  # the YAML key that selects the kind ({contains: ...})
    model: type[C]
    check: Check[C]
    description: str  # one line for docs and completion
    role_fields: tuple[str, ...] = ()  # fields that name a role (checked by the loader)
    human_role: bool = False  # ``role: human`` is allowed: what the human said
    nested: tuple[str, ...] = ()  # YAML keys whose values are conditions (the tree's edges)
    words: Callable[[], list[str]] | None = None  # bare-word spellings (mode conditions)

    @property
    def fields(self) -> tuple[str, ...]:
        """The YAML spelling of the model's fields, the key first, ``name`` last."""
        names = [f.alias or n for n, f in self.model.model_fields.items()]
        return (self.key, *(n for n in names if n not in (self.key, "name")), "name")


def raw_children(cond: Mapping[str, Any], nested: tuple[str, ...]) -> Iterator[tuple[str, Any]]:
    """``(path suffix, raw condition)`` for the raw conditions nested under ``nested`` keys."""
    for key in nested:
        value = cond.get(key)
        if isinstance(value, list):
            for j, inner in enumerate(value):
                yield f".{key}[{j}]", inner
        elif isinstance(value, dict):
            yield f".{key}", value
