"""A message's fields, defined once: what a transcript message keeps
(``rolecall.TranscriptMessage``, ``session/state.py``) and its ``messages/message`` event
publishes (``rolecall.bus.events.MessageEvent``). A module of its own, below the bus, so
that reading a world or a stored session does not import the event models and the bus.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["MESSAGE_FIELDS", "MessageFields"]


class MessageFields(BaseModel):
    """What a message says and what it cost: the fields a transcript message keeps
    (``rolecall.TranscriptMessage``) and its ``messages/message`` event publishes, defined
    here once. Each of the two puts its own fields first (pydantic orders a model's fields
    base first, so they come from a base listed after this one): the message its ``id``
    and ``kind``, the event its ``topic``, ``type`` and ``message_id``."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    sender: str
    content: str
    reply_to: str | None = None
    target: str | None = None
    mentions: list[str] = Field(default_factory=list)
    step_id: str | None = None
    loop_iteration: int | None = None
    turn: int = 0  # agent messages so far, this one included
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None  # an agent message's cost; None when unknown
    # tools.md: the ids of the calls made during this turn; left out when there were none
    tool_calls: Annotated[list[str], Field(exclude_if=lambda v: not v)] = Field(
        default_factory=list
    )
    # audiences.md: the role ids the message is for (with its sender and the human);
    # left out when everyone sees it (read as null)
    audience: Annotated[list[str] | None, Field(exclude_if=lambda v: v is None)] = None
    # selection.md: a role with `output:`: the reply's parsed JSON, or why it is not
    # valid (then data is null); both left out for other messages
    data: Annotated[Any, Field(exclude_if=lambda v: v is None)] = None
    data_error: Annotated[str | None, Field(exclude_if=lambda v: v is None)] = None
    # real-models.md: why the reply ended when it was cut (length, other_speaker,
    # repetition); left out for a reply that ended by itself
    finish_reason: Annotated[str | None, Field(exclude_if=lambda v: v is None)] = None


MESSAGE_FIELDS: tuple[str, ...] = tuple(MessageFields.model_fields)
