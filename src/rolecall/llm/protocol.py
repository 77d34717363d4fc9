"""The one seam between rolecall and anything that generates text."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from rolecall.llm.types import GenerationRequest, StreamItem


class ChatModel(Protocol):
    """A model streams text deltas and ends with exactly one ``Usage`` item.

    Implementations raise only :class:`rolecall.errors.ProviderError` subclasses for
    provider failures; cancellation (anyio) propagates untouched.
    """

    name: str

    def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        """Yield ``TextDelta`` items as text arrives, then one ``Usage``."""
        ...
