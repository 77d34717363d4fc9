"""The one seam between rolecall and anything that generates text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from rolecall.llm.types import GenerationRequest, StreamItem


class ChatModel(Protocol):
    """A model streams text deltas and ends with exactly one ``Usage`` item.

    Implementations raise only :class:`rolecall.errors.ProviderError` subclasses for
    provider failures; cancellation (anyio) propagates untouched.

    A model may say ``repeatable = True`` (a class attribute) when asking it again for a
    turn costs nothing and gives the same reply, as with ``scripted`` and ``offline``
    (they generate in this process, deterministically): the runtime's request hooks, which
    guard requests that cost (a provider, a remote agent, a local model's GPU time), are
    not awaited before it. Without the attribute a request counts as costing.
    """

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        """Yield ``TextDelta`` items as text arrives, then one ``Usage``."""
        ...
