"""Replies with a shape (selection.md, structured output): pure helpers.

A role with ``output: {schema: S}`` (or ``output: json``, any JSON object) asks its
provider for JSON (:func:`response_format`, the OpenAI-compatible ``response_format``)
and is told so in its prompt (:func:`instruction`); its reply is read as JSON and
checked against the schema (:func:`read`). The offline model answers such a role with
data made from the schema (:func:`example`): objects of strings, numbers, integers,
booleans, enums and arrays of those.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

__all__ = [
    "ANY_OBJECT",
    "check_schema",
    "example",
    "instruction",
    "read",
    "response_format",
    "response_formats",
]

ANY_OBJECT: Final[dict[str, Any]] = {"type": "object"}  # `output: json`
_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL | re.IGNORECASE)


def check_schema(schema: dict[str, Any]) -> str | None:
    """Why ``schema`` is not a JSON Schema (the first problem), or None."""
    import jsonschema  # type: ignore[import-untyped]

    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(schema)"
        return f"{where}: {exc.message}"
    return None


def response_format(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAI-compatible ``response_format`` asking for JSON of ``schema``."""
    if schema == ANY_OBJECT:
        return {"type": "json_object"}
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}


def response_formats(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``response_format`` values to try in order: the OpenAI-compatible one, then,
    for a schema, llama.cpp's (``json_object`` with the ``schema``), then plain
    ``json_object``; a server that refuses one is asked with the next."""
    first = response_format(schema)
    if schema == ANY_OBJECT:
        return [first]
    return [first, {"type": "json_object", "schema": schema}, {"type": "json_object"}]


def instruction(schema: dict[str, Any]) -> str:
    """What the prompt says about the reply's shape."""
    if schema == ANY_OBJECT:
        return "Reply with one JSON object only: no prose, no code fence."
    shown = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    return (
        "Reply with one JSON object only (no prose, no code fence) that is valid against "
        f"this JSON Schema: {shown}"
    )


def read(text: str, schema: dict[str, Any]) -> tuple[Any, str | None]:
    """``(data, None)`` when ``text`` is JSON valid against ``schema`` (a fenced block is
    accepted), else ``(None, why)``: not JSON, or the first validation error with its
    path."""
    import jsonschema

    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced is not None:
        body = fenced.group(1).strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as exc:
        return None, f"the reply is not JSON ({exc})"
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        first = errors[0]
        where = "/".join(str(p) for p in first.absolute_path) or "(reply)"
        return None, f"{where}: {first.message}"
    return data, None


def example(schema: dict[str, Any], words: list[str], depth: int = 0) -> Any:
    """Data valid against a simple ``schema``, worded from ``words`` (the offline model):
    objects of strings, numbers, integers, booleans, enums, consts and arrays of those.
    Anything else gives null (or an empty object at the top: ``output: json``)."""
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][len(words) % len(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        if depth > 5:
            return {}
        return {
            name: example(sub if isinstance(sub, dict) else {}, [name, *words], depth + 1)
            for name, sub in props.items()
        }
    if kind == "array":
        found = schema.get("items")
        items: dict[str, Any] = found if isinstance(found, dict) else {}
        count = max(int(schema.get("minItems", 1)), 1)
        count = min(count, int(schema.get("maxItems", count)))
        return [example(items, words[i:] + words[:i], depth + 1) for i in range(count)]
    if kind in ("number", "integer"):
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        high = schema.get("maximum", schema.get("exclusiveMaximum", low + 10))
        value = low + (high - low) * 0.7
        if kind == "integer" or (isinstance(low, int) and isinstance(high, int)):
            value = int(value)
            if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
                value += 1
            if "exclusiveMaximum" in schema and value >= schema["exclusiveMaximum"]:
                value -= 1
        return value
    if kind == "boolean":
        return len(words) % 2 == 0
    if kind == "string":
        text = " ".join(words[:6]) or "none"
        least, most = int(schema.get("minLength", 0)), schema.get("maxLength")
        text = text.ljust(least, ".")
        return text[:most] if isinstance(most, int) else text
    return {} if depth == 0 else None


async def repair(
    model: Any, request: Any, reply: str, error: str
) -> tuple[str | None, int, int, float | None]:
    """One repair round: the model is shown its reply and the validation error, and asked
    again (not streamed). ``(text, input_tokens, output_tokens, cost)``; text None when
    the call failed."""
    from dataclasses import replace

    from rolecall.errors import ProviderError
    from rolecall.llm.types import ChatMessage, TextDelta, Usage

    asked = replace(
        request,
        messages=(
            *request.messages,
            ChatMessage("assistant", reply),
            ChatMessage(
                "user",
                f"That reply is not valid: {error}. Reply again with only the corrected "
                "JSON object.",
            ),
        ),
        tools=(),
    )
    parts: list[str] = []
    usage: Usage | None = None
    try:
        async for item in model.stream(asked):
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, Usage):
                usage = item
    except ProviderError:
        return None, 0, 0, 0.0
    if usage is None:
        return "".join(parts), 0, 0, None
    return "".join(parts), usage.input_tokens, usage.output_tokens, usage.cost_usd
