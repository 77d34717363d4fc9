"""The ``scripted`` model: a role says exactly its ``script:`` lines (worlds.md)."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import anyio

from rolecall.errors import ProviderRefused
from rolecall.llm.types import (
    GenerationRequest,
    StreamItem,
    TextDelta,
    ToolCall,
    Usage,
    estimate_tokens,
    prompt_tokens,
)

_WORDS = re.compile(r"\s*\S+\s*")


def fill(template: str, request: GenerationRequest) -> str:
    """Fill ``{turn}``, ``{n}``, ``{speaker}``, ``{target}``, ``{topic}`` and ``{result}``
    (the last tool result's text, tools.md); other braces stay."""
    info = request.info
    values = {
        "{turn}": str(info.turn),
        "{n}": str(info.n),
        "{speaker}": info.speaker,
        "{target}": info.target or "",
        "{topic}": info.topic,
    }
    if "{result}" in template:
        values["{result}"] = last_result(request) or ""
    return re.sub(
        r"\{(turn|n|speaker|target|topic|result)\}", lambda m: values[m.group(0)], template
    )


def last_result(request: GenerationRequest) -> str | None:
    """The text of the last tool result of this turn's prompt, if it has one."""
    for message in reversed(request.messages):
        if message.role == "tool":
            return message.content
        if message.role != "assistant":
            return None
    return None


Unit = tuple[list[dict[str, Any]], str]


def units(script: tuple[str | dict[str, Any], ...]) -> list[Unit]:
    """The script as turns: the call entries before each text entry, and the text
    (calls at the end with no text after them say ``{result}``)."""
    out: list[Unit] = []
    calls: list[dict[str, Any]] = []
    for entry in script:
        if isinstance(entry, str):
            out.append((calls, entry))
            calls = []
        else:
            calls.append(entry)
    if calls:
        out.append((calls, "{result}"))
    return out


def scripted_unit(request: GenerationRequest) -> Unit:
    turns = units(request.script)
    if not turns:
        raise ProviderRefused(
            f"role '{request.info.speaker}' uses the scripted model but has no script: lines",
            model="scripted",
        )
    return turns[(request.info.n - 1) % len(turns)]


def scripted_text(request: GenerationRequest) -> str:
    return fill(scripted_unit(request)[1], request)


def scripted_calls(request: GenerationRequest) -> list[ToolCall]:
    """The calls this turn makes now: its unit's call entries, in the turn's first round
    (when the model is offered tools and has not seen a result yet)."""
    calls, _ = scripted_unit(request)
    if not calls or not request.tools or last_result(request) is not None:
        return []
    provider = {d.full_name: d.name for d in request.tools}
    return [
        ToolCall(
            f"call_{request.info.turn}_{i}",
            provider.get(str(c["call"]), str(c["call"])),
            json.dumps(c.get("arguments") or {}, ensure_ascii=False),
        )
        for i, c in enumerate(calls, start=1)
    ]


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
        calls = scripted_calls(request)
        if calls:
            for call in calls:
                yield call
            yield Usage(
                prompt_tokens(request.messages), 0, cost_usd=0.0, finish_reason="tool_calls"
            )
            return
        text = scripted_text(request)
        finish = "stop"
        cap = request.max_tokens
        if cap is not None and estimate_tokens(text) > cap:  # a provider's cap, as estimated
            text, finish = text[: cap * 4], "length"
        for i, piece in enumerate(words(text)):
            if self.delay > 0 and i:
                await anyio.sleep(self.delay)
            yield TextDelta(piece)
        yield Usage(
            prompt_tokens(request.messages),
            estimate_tokens(text),
            cost_usd=0.0,
            finish_reason=finish,
        )
