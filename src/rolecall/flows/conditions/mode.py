"""A mode's own condition (modes.md), written as a bare word or ``{mode: word}``.

The words come from the mode registry (each :class:`~rolecall.mode_registry.ModeSpec`
declares its conditions); the mode installed on a session answers them through
:attr:`ConditionContext.mode_checks`.
"""

from __future__ import annotations

from typing import Any

from pydantic import field_validator, model_validator
from pydantic_core import PydanticCustomError

from rolecall.flows.conditions.base import ConditionContext, ConditionKind, CondModel, Evaluate
from rolecall.mode_registry import condition_words


class ModeCond(CondModel):
    mode: str

    @model_validator(mode="before")
    @classmethod
    def _bare_word(cls, value: Any) -> Any:
        return {"mode": value} if isinstance(value, str) else value

    @field_validator("mode")
    @classmethod
    def _known(cls, value: str) -> str:
        words = condition_words()
        if value not in words:
            raise PydanticCustomError(
                "unknown_mode_condition",
                "no mode condition {word} (mode conditions: {words})",
                {"word": repr(value), "words": ", ".join(words)},
            )
        return value


def _mode(cond: ModeCond, ctx: ConditionContext, _: Evaluate) -> tuple[bool, str, str]:
    check = ctx.mode_checks.get(cond.mode)
    if check is None:
        return False, f"{cond.mode}: not available in this world", cond.mode
    holds, reason, detail = check()
    return holds, detail, reason


MODE = ConditionKind(
    "mode",
    ModeCond,
    _mode,
    "a mode's own condition (concession, stalemate, consensus), answered by the mode",
    words=condition_words,
)
