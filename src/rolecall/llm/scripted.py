"""The ``scripted`` model: a role says exactly its ``script:`` lines (worlds.md)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import anyio

from rolecall.errors import ProviderRefused
from rolecall.llm.types import (
    GenerationRequest,
    StreamItem,
    TextDelta,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

_WORDS = re.compile(r"\s*\S+\s*")


def fill(template: str, request: GenerationRequest) -> str:
    """Fill ``{turn}``, ``{n}``, ``{speaker}``, ``{target}``, ``{topic}``; other braces stay."""
    info = request.info
    values = {
        "{turn}": str(info.turn),
        "{n}": str(info.n),
        "{speaker}": info.speaker,
        "{target}": info.target or "",
        "{topic}": info.topic,
    }
    return re.sub(r"\{(turn|n|speaker|target|topic)\}", lambda m: values[m.group(0)], template)


def scripted_text(request: GenerationRequest) -> str:
    script = request.script
    if not script:
        raise ProviderRefused(
            f"role '{request.info.speaker}' uses the scripted model but has no script: lines",
            model="scripted",
        )
    return fill(script[(request.info.n - 1) % len(script)], request)


def words(text: str) -> list[str]:
    """Split into word pieces that join back to ``text`` exactly."""
    pieces = _WORDS.findall(text)
    return pieces if "".join(pieces) == text else [text]


class ScriptedModel:
    name = "scripted"
    repeatable = True  # the same reply again, at no cost (see ChatModel)

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay  # seconds between words (pacing for demos and tests)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        text = scripted_text(request)
        for i, piece in enumerate(words(text)):
            if self.delay > 0 and i:
                await anyio.sleep(self.delay)
            yield TextDelta(piece)
        yield Usage(prompt_tokens(request.messages), estimate_tokens(text), cost_usd=0.0)
