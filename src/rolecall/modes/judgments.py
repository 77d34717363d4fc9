"""A judge's JSON answer: finding the object in a reply, parsing scores (pure)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    candidates = [stripped]
    if "```" in stripped:
        for chunk in stripped.split("```")[1::2]:
            body = chunk.split("\n", 1)[1] if chunk.lstrip().startswith("json") else chunk
            candidates.append(body.strip())
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


@dataclass(frozen=True)
class Parsed:
    """A judge's valid answer: the scores (for conditions) and the whole verdict."""

    scores: dict[str, float]
    verdict: dict[str, Any] = field(default_factory=dict)


class Invalid(ValueError):
    """A judge's answer that does not follow the JSON contract (says why)."""


Parser = Callable[[str], Parsed]


def score_parser(names: list[str], scale: tuple[float, float]) -> Parser:
    """Parses ``{"scores": {name: n, ...}, ...}`` (or the names at the top level)."""
    lo, hi = scale

    def parse(text: str) -> Parsed:
        obj = find_json_object(text)
        if obj is None:
            raise Invalid("no JSON object found")
        inner = obj.get("scores")
        source = inner if isinstance(inner, dict) else obj
        scores: dict[str, float] = {}
        for name in names:
            value = source.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise Invalid(f"score {name!r} missing or not a number")
            if not lo <= value <= hi:
                raise Invalid(f"score {name!r} = {value} is outside {lo:g}..{hi:g}")
            scores[name] = float(value)
        return Parsed(scores, obj)

    return parse


def score_format(names: list[str], scale: tuple[float, float]) -> str:
    lo, hi = scale
    inner = ", ".join(f'"{n}": <number {lo:g}-{hi:g}>' for n in names)
    return '{"scores": {' + inner + '}, "comment": "<one sentence>"}'
