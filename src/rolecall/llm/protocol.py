"""The one seam between rolecall and anything that generates text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from rolecall.llm.types import GenerationRequest, StreamItem


class ChatModel(Protocol):
    """A model streams text deltas and ends with exactly one ``Usage`` item.

    Implementations raise only :class:`rolecall.errors.ProviderError` subclasses for
    provider failures; cancellation (anyio) propagates untouched.

    A model may say ``in_process = True`` (a class attribute) when it generates in this
    process without asking anyone, as ``scripted`` and ``offline`` do: no request leaves
    the process, so asking it again costs nothing, and ``Session.request_hooks`` (which
    guard requests to providers) are not awaited before it. Without the attribute a
    model counts as asking someone.
    """

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        """Yield ``TextDelta`` items as text arrives, then one ``Usage``."""
        ...
