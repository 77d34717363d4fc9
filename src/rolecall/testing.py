"""Helpers for testing code that uses rolecall: a model from a function, captured events,
and a switch refusing real provider calls.

    from rolecall.testing import FunctionModel, capture_events, refuse_real_models

    def reply(request):
        return f"{request.persona.name} agrees"

    with refuse_real_models(), capture_events() as events:
        result = await rolecall.run(world, models={"offline": FunctionModel(reply)})
    assert events.of(rolecall.Message)[0].content.endswith("agrees")
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from rolecall.api.opening import ambient_sinks
from rolecall.bus import Bus, Envelope, Event
from rolecall.llm.registry import REFUSE_ENV, refusing
from rolecall.llm.scripted import words
from rolecall.llm.types import (
    GenerationRequest,
    StreamItem,
    TextDelta,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

__all__ = ["REFUSE_ENV", "CapturedEvents", "FunctionModel", "capture_events", "refuse_real_models"]

E = TypeVar("E")


class FunctionModel:
    """A chat model whose reply is ``fn(request)``: a plain or async function of the request.

    The reply is streamed word by word (so streaming events are real) and its usage is
    estimated like the built-in models'. It costs nothing.
    """

    def __init__(
        self, fn: Callable[[GenerationRequest], str | Awaitable[str]], *, name: str = "function"
    ) -> None:
        self.fn = fn
        self.name = name
        self.requests: list[GenerationRequest] = []  # every request, in order

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        reply = self.fn(request)
        text = await reply if inspect.isawaitable(reply) else reply
        if not isinstance(text, str):
            raise TypeError(f"FunctionModel's function returned {type(text).__name__}, not str")
        for piece in words(text):
            yield TextDelta(piece)
        yield Usage(
            prompt_tokens(request.messages),
            estimate_tokens(text),
            cost_usd=0.0,
            finish_reason="stop",
        )


class CapturedEvents:
    """Every envelope published by the sessions opened while capturing, in order."""

    def __init__(self) -> None:
        self.envelopes: list[Envelope] = []

    def attach(self, bus: Bus) -> None:
        bus.subscribe(self.envelopes.append, name="capture")

    @property
    def events(self) -> list[Event]:
        return [e.event for e in self.envelopes]

    def of(self, kind: type[E]) -> list[E]:
        """The events of one type (``events.of(rolecall.Message)``)."""
        return [e.event for e in self.envelopes if isinstance(e.event, kind)]

    def __len__(self) -> int:
        return len(self.envelopes)

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)


@contextmanager
def capture_events() -> Iterator[CapturedEvents]:
    """Capture the events of every session opened inside the block (this task and its
    children), as a sink attached before the session publishes anything."""
    captured = CapturedEvents()
    token = ambient_sinks.set((*ambient_sinks.get(), captured))
    try:
        yield captured
    finally:
        ambient_sinks.reset(token)


@contextmanager
def refuse_real_models() -> Iterator[None]:
    """Inside the block, a model that would call a real provider raises ProviderRefused.

    For a whole test suite, set the environment variable ``ROLECALL_REFUSE_REAL_MODELS=1``.
    Built-in ``offline``/``scripted`` models and models passed in ``models=`` still work.
    """
    token = refusing.set(True)
    try:
        yield
    finally:
        refusing.reset(token)
