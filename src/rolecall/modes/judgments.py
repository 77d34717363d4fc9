"""A judge's JSON answer: finding the object in a reply, parsing scores (pure).

A reply is model text, so anything: :func:`json_object` reads it within bounds (its
length, the nesting of the object, how many embedded ``{`` it tries) and says why a
reply has no usable object instead of raising whatever the decoder raised.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Final

from pydantic import BeforeValidator

MAX_REPLY_CHARS: Final = 100_000
"""A longer reply breaks the contract unread (a verdict is a few hundred characters)."""
MAX_DEPTH: Final = 32
"""The deepest an object may nest (``{"a": {"b": 1}}`` is 2 deep); deeper breaks the contract."""
MAX_STARTS: Final = 200
"""How many ``{`` in the reply are tried as the start of an embedded object."""


class Invalid(ValueError):
    """A judge's answer that does not follow the JSON contract (says why)."""


def _depth_ok(value: Any) -> bool:
    """``value`` nests at most :data:`MAX_DEPTH` objects and lists deep (no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if not isinstance(item, dict | list):
            continue
        if depth > MAX_DEPTH:
            return False
        children = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in children)
    return True


def json_object(text: str) -> dict[str, Any]:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded.

    Raises :class:`Invalid` saying why there is none: the reply is too long, an object
    nests too deep, or no object is found. Never raises anything else, whatever the text.
    """
    if len(text) > MAX_REPLY_CHARS:
        raise Invalid(
            f"the reply is {len(text)} characters long; a verdict must be at most "
            f"{MAX_REPLY_CHARS} (only the JSON object is needed)"
        )
    too_deep = False

    def usable(value: Any) -> bool:
        nonlocal too_deep
        if not isinstance(value, dict):
            return False
        if not _depth_ok(value):
            too_deep = True
            return False
        return True

    stripped = text.strip()
    candidates = [stripped]
    if "```" in stripped:
        for chunk in stripped.split("```")[1::2]:
            body = chunk.split("\n", 1)[1] if chunk.lstrip().startswith("json") else chunk
            candidates.append(body.strip())
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except RecursionError:
            too_deep = True
            continue
        except ValueError:  # not JSON, or an integer too long to convert
            continue
        if usable(value):
            return dict(value)
    decoder = json.JSONDecoder()
    start = text.find("{")
    tries = 0
    while start != -1 and tries < MAX_STARTS:
        tries += 1
        try:
            value, _ = decoder.raw_decode(text, start)
        except RecursionError:
            too_deep = True
            value = None
        except ValueError:
            value = None
        if usable(value):
            return dict(value)
        start = text.find("{", start + 1)
    if too_deep:
        raise Invalid(f"the JSON nests deeper than {MAX_DEPTH} levels")
    raise Invalid("no JSON object found")


def score(name: str, value: Any, scale: tuple[float, float]) -> float:
    """A score of a verdict: a finite number (not a boolean or a string) within ``scale``.

    Shared by every judge (scores of a ``judge:`` block, a debate's or a consensus's
    ``agreement``); raises :class:`Invalid` saying what is wrong.
    """
    lo, hi = scale
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise Invalid(f"score {name!r} missing or not a number (not a boolean or a string)")
    try:
        number = float(value)
    except OverflowError:  # an integer beyond any float
        number = math.inf if value > 0 else -math.inf
    if math.isnan(number) or not lo <= number <= hi:
        raise Invalid(f"score {name!r} = {value!r:.40} is outside {lo:g}..{hi:g}")
    return number


def _agreement(value: Any) -> float:
    return score("agreement", value, (0.0, 1.0))


Agreement = Annotated[float, BeforeValidator(_agreement)]
"""The ``agreement`` of a debate's or a consensus's verdict: a score on 0..1."""


@dataclass(frozen=True)
class Parsed:
    """A judge's valid answer: the scores (for conditions) and the whole verdict."""

    scores: dict[str, float]
    verdict: dict[str, Any] = field(default_factory=dict)


Parser = Callable[[str], Parsed]


def score_parser(names: list[str], scale: tuple[float, float]) -> Parser:
    """Parses ``{"scores": {name: n, ...}, ...}`` (or the names at the top level)."""

    def parse(text: str) -> Parsed:
        obj = json_object(text)
        inner = obj.get("scores")
        source = inner if isinstance(inner, dict) else obj
        scores = {name: score(name, source.get(name), scale) for name in names}
        return Parsed(scores, obj)

    return parse


def score_format(names: list[str], scale: tuple[float, float]) -> str:
    lo, hi = scale
    inner = ", ".join(f'"{n}": <number {lo:g}-{hi:g}>' for n in names)
    return '{"scores": {' + inner + '}, "comment": "<one sentence>"}'
