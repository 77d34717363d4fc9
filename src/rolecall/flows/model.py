"""Flow definitions as typed models (flows.md): steps, reply targets, loops, branches.

Reply targets are discriminated by their key (``role``, ``step``, ``message``) and
conditions by theirs (:mod:`rolecall.flows.conditions`), so that a mistake yields one
precise error at its path.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag

from rolecall.flows.conditions import Condition
from rolecall.flows.conditions.base import Whole

ID_PATTERN = r"^[a-z][a-z0-9_-]*$"
Ident = Annotated[str, Field(pattern=ID_PATTERN)]


class _Model(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, populate_by_name=True)


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
    max: Annotated[Whole, Field(ge=1, le=10000)]
    until: Condition | None = None


class Branch(_Model):
    when: Condition | None = None
    goto: str


class Step(_Model):
    id: Ident
    speaker: str  # a role id, or `select` (selection.md): chosen when the step runs
    candidates: list[str] | None = None  # speaker: select: whom it may choose (None: all)
    instruction: str | None = None
    reply_to: ReplyTo = "previous"
    loop: Loop | None = None
    next: str | list[Branch] | None = None
    judge: str | None = None  # a judge role that scores this step's message (modes.md)
    # audiences.md: the step's messages are seen only by these roles (and the human)
    audience: list[Ident] | None = Field(default=None, min_length=1)


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

    @property
    def flags(self) -> list[str]:
        """The flag names its conditions look at (``{flag: NAME}``), sorted: what the
        REPL's ``/flag`` completes and the web page's flag box suggests."""
        from rolecall.flows.conditions import FlagCond, walk

        roots = [*self.stop]
        for step in self.steps:
            if step.loop is not None and step.loop.until is not None:
                roots.append(step.loop.until)
            if isinstance(step.next, list):
                roots.extend(b.when for b in step.next if b.when is not None)
        return sorted({c.flag for root in roots for c in walk(root) if isinstance(c, FlagCond)})
