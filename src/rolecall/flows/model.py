"""Flow definitions as typed models (flows.md): steps, reply targets, loops, branches, conditions.

Conditions and reply targets are discriminated by their key (``contains``, ``regex``,
``role``, ``step``, ...) so that a mistake yields one precise error at its path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, StrictInt, Tag

ID_PATTERN = r"^[a-z][a-z0-9_-]*$"
Ident = Annotated[str, Field(pattern=ID_PATTERN)]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


# ----------------------------------------------------------------- conditions
class _Cond(_Model):
    name: str | None = None


class ContainsCond(_Cond):
    contains: Annotated[str, Field(min_length=1)]
    role: str | None = None


class RegexCond(_Cond):
    regex: Annotated[str, Field(min_length=1)]
    role: str | None = None


class MaxTurnsCond(_Cond):
    max_turns: Annotated[StrictInt, Field(ge=1)]


class MaxTokensCond(_Cond):
    max_tokens: Annotated[StrictInt, Field(ge=1)]


class MaxSecondsCond(_Cond):
    max_seconds: Annotated[float, Field(gt=0)]


class FlagCond(_Cond):
    flag: Annotated[str, Field(min_length=1)]


class AnyCond(_Cond):
    any: list[Condition] = Field(min_length=1)


class AllCond(_Cond):
    all: list[Condition] = Field(min_length=1)


class NotCond(_Cond):
    not_: Condition = Field(alias="not")


class JudgeCond(_Cond):
    judge: Annotated[str, Field(min_length=1)]  # the score name, e.g. "score"
    at_least: float
    role: str | None = None  # which judge role; default any judge


MODE_CONDITIONS = ("concession", "stalemate", "consensus")


class ModeCond(_Model):
    """A mode's own condition (modes.md), written as a bare word or ``{mode: word}``."""

    mode: Literal["concession", "stalemate", "consensus"]
    name: str | None = None


_COND_KEYS = (
    "contains",
    "regex",
    "max_turns",
    "max_tokens",
    "max_seconds",
    "flag",
    "any",
    "all",
    "not",
    "judge",
    "mode",
)


def _cond_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "cond:mode" if value in MODE_CONDITIONS else None
    if isinstance(value, dict):
        for key in _COND_KEYS:
            if key in value:
                return f"cond:{key}"
        return None
    if isinstance(value, BaseModel):
        return _cond_tag(value.model_dump(by_alias=True))
    return None


def _mode_from_str(value: Any) -> Any:
    return {"mode": value} if isinstance(value, str) else value


class _ModeCondInput(ModeCond):
    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        from pydantic_core import core_schema

        return core_schema.no_info_before_validator_function(_mode_from_str, handler(ModeCond))


Condition = Annotated[
    Annotated[ContainsCond, Tag("cond:contains")]
    | Annotated[RegexCond, Tag("cond:regex")]
    | Annotated[MaxTurnsCond, Tag("cond:max_turns")]
    | Annotated[MaxTokensCond, Tag("cond:max_tokens")]
    | Annotated[MaxSecondsCond, Tag("cond:max_seconds")]
    | Annotated[FlagCond, Tag("cond:flag")]
    | Annotated[AnyCond, Tag("cond:any")]
    | Annotated[AllCond, Tag("cond:all")]
    | Annotated[NotCond, Tag("cond:not")]
    | Annotated[JudgeCond, Tag("cond:judge")]
    | Annotated[_ModeCondInput, Tag("cond:mode")],
    Discriminator(
        _cond_tag,
        custom_error_type="unknown_condition",
        custom_error_message=(
            "not a condition (use one of: contains, regex, max_turns, max_tokens, "
            "max_seconds, flag, any, all, not, judge, concession, stalemate, consensus)"
        ),
    ),
]

AnyCond.model_rebuild()
AllCond.model_rebuild()
NotCond.model_rebuild()


# -------------------------------------------------------------- reply targets
class ReplyToRole(_Model):
    role: str


class ReplyToStep(_Model):
    step: str


class ReplyToMessage(_Model):
    message: Annotated[str, Field(pattern=r"^m[1-9][0-9]*$")]


def _reply_tag(value: Any) -> str | None:
    if isinstance(value, str):
        return "reply:keyword"
    if isinstance(value, dict):
        for key in ("role", "step", "message"):
            if key in value:
                return f"reply:{key}"
        return None
    if isinstance(value, ReplyToRole):
        return "reply:role"
    if isinstance(value, ReplyToStep):
        return "reply:step"
    if isinstance(value, ReplyToMessage):
        return "reply:message"
    return None


ReplyTo = Annotated[
    Annotated[Literal["previous", "none"], Tag("reply:keyword")]
    | Annotated[ReplyToRole, Tag("reply:role")]
    | Annotated[ReplyToStep, Tag("reply:step")]
    | Annotated[ReplyToMessage, Tag("reply:message")],
    Discriminator(
        _reply_tag,
        custom_error_type="bad_reply_to",
        custom_error_message=(
            "reply_to must be previous, none, {role: R}, {step: S} or {message: mN}"
        ),
    ),
]


# ---------------------------------------------------------------------- steps
class Loop(_Model):
    to: str
    max: Annotated[StrictInt, Field(ge=1, le=10000)]
    until: Condition | None = None


class Branch(_Model):
    when: Condition | None = None
    goto: str


class Step(_Model):
    id: Ident
    speaker: str
    instruction: str | None = None
    reply_to: ReplyTo = "previous"
    loop: Loop | None = None
    next: str | list[Branch] | None = None
    judge: str | None = None  # a judge role that scores this step's message (modes.md)


class FinalStep(_Model):
    """A closing turn run once when the flow stops for any reason but ``manual``.

    Used by presets for a neutral synthesis; budgets still apply to it.
    """

    id: Ident = "final"
    speaker: str
    instruction: str | None = None
    reply_to: ReplyTo = "previous"


class Flow(_Model):
    start: str | None = None
    steps: list[Step] = Field(min_length=1)
    stop: list[Condition] = Field(default_factory=list)
    final: FinalStep | None = None

    @property
    def start_id(self) -> str:
        return self.start or self.steps[0].id


def describe(cond: BaseModel) -> str:
    """A compact one-line form of a condition, for events and traces."""
    if isinstance(cond, ModeCond):
        return cond.mode
    data = cond.model_dump(by_alias=True, exclude_none=True)
    data.pop("name", None)
    parts = []
    for key, value in data.items():
        if isinstance(value, list):
            inner = ", ".join(describe(_cond_model(v)) for v in value)
            parts.append(f"{key}: [{inner}]")
        elif isinstance(value, dict):
            parts.append(f"{key}: {{{describe(_cond_model(value))}}}")
        else:
            parts.append(f"{key}: {value}")
    return "{" + ", ".join(parts) + "}"


def _cond_model(value: Any) -> BaseModel:
    from pydantic import TypeAdapter

    result: BaseModel = TypeAdapter(Condition).validate_python(value)
    return result
