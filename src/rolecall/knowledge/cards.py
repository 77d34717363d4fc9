"""Character cards (knowledge.md, Roles from elsewhere): SillyTavern's V2 and V3 cards
(and the flat V1 fields they grew from) read into a role of the library, and a role
written back as a V2 card.

A card is JSON, or a PNG whose ``ccv3`` (V3, preferred) or ``chara`` text chunk holds
the card's JSON in base64; the PNG's chunks are read here with the standard library.
Fields: ``name``; ``description`` and ``personality`` make the persona; ``scenario`` and
``first_mes`` go into the system prompt; ``mes_example`` (example dialogue) becomes the
style; the card's own ``system_prompt`` comes first. ``{{char}}`` and ``{{user}}`` are
replaced by the character's name and "the user".
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import zlib
from pathlib import Path
from typing import Any, Final

from rolecall.errors import UsageError

__all__ = ["CardError", "card_of_role", "read_card", "role_of_card"]

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_KEYS: Final = ("ccv3", "chara")  # the chunk keywords, preferred first
_V1_FIELDS: Final = ("name", "description", "personality", "scenario", "first_mes", "mes_example")


class CardError(UsageError):
    """A file that is not a character card (exit 2)."""


def read_card(path: Path) -> dict[str, Any]:
    """The card's fields (its ``data``, or a V1 card's top level) from a JSON or PNG file."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise CardError(f"{path}: cannot read it ({exc.strerror})") from None
    if raw.startswith(PNG_SIGNATURE):
        text = _png_card(path, raw)
    else:
        try:
            text = raw.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise CardError(
                f"{path}: not a character card: neither JSON text nor a PNG image"
            ) from None
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardError(
            f"{path}: not a character card: not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    return _fields(path, card)


def _fields(path: Path, card: Any) -> dict[str, Any]:
    if not isinstance(card, dict):
        raise CardError(f"{path}: not a character card: the JSON is not an object")
    spec = card.get("spec")
    if spec in ("chara_card_v2", "chara_card_v3"):
        data = card.get("data")
        if not isinstance(data, dict):
            raise CardError(f"{path}: not a character card: {spec} without a data object")
    elif spec is not None:
        raise CardError(
            f"{path}: not a character card: spec {spec!r} (rolecall reads chara_card_v2 "
            "and chara_card_v3)"
        )
    elif "name" in card and any(k in card for k in _V1_FIELDS[1:]):
        data = card  # a V1 card: its fields at the top level
    else:
        raise CardError(
            f"{path}: not a character card: no spec (chara_card_v2 or chara_card_v3) and "
            "no card fields (name, description, first_mes, ...)"
        )
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CardError(f"{path}: not a character card: it has no name")
    for key, value in data.items():
        if key in (*_V1_FIELDS, "system_prompt", "creator_notes") and not isinstance(
            value, str | None
        ):
            raise CardError(f"{path}: card field {key} is not text")
    return data


def _png_card(path: Path, raw: bytes) -> str:
    """The card JSON of a PNG's ``ccv3`` or ``chara`` text chunk (tEXt, zTXt or iTXt)."""
    found: dict[str, bytes] = {}
    at = len(PNG_SIGNATURE)
    while at + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[at : at + 8])
        data = raw[at + 8 : at + 8 + length]
        if len(data) < length:
            raise CardError(f"{path}: a damaged PNG: chunk {kind!r} is cut short")
        at += 12 + length
        if kind == b"IEND":
            break
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            continue
        keyword, _, rest = data.partition(b"\x00")
        key = keyword.decode("latin-1").lower()
        if key not in _KEYS:
            continue
        try:
            if kind == b"zTXt":
                rest = zlib.decompress(rest[1:])
            elif kind == b"iTXt":
                compressed, rest = rest[0], rest[2:]
                _lang, _, rest = rest.partition(b"\x00")
                _translated, _, rest = rest.partition(b"\x00")
                if compressed:
                    rest = zlib.decompress(rest)
        except (zlib.error, IndexError):
            raise CardError(f"{path}: the PNG's {key} chunk cannot be decompressed") from None
        found.setdefault(key, rest)
    for key in _KEYS:
        if key in found:
            try:
                return base64.b64decode(found[key], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise CardError(
                    f"{path}: the PNG's {key} chunk is not a base64 character card"
                ) from None
    raise CardError(f"{path}: not a character card: a PNG without a chara or ccv3 text chunk")


def _text(data: dict[str, Any], key: str, name: str) -> str:
    value = data.get(key) or ""
    value = str(value).replace("{{char}}", name).replace("{{user}}", "the user")
    value = re.sub(r"(?i)<\s*(bot|char)\s*>", name, value)
    return re.sub(r"(?i)<\s*user\s*>", "the user", value).strip()


def role_id_for(name: str) -> str:
    """A role id made of a character's name (``Captain Mira Vale`` → ``captain-mira-vale``)."""
    slug = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:60].strip("-")
    if not slug or not slug[0].isalpha():
        slug = f"card-{slug}".strip("-")
    return slug


def role_of_card(data: dict[str, Any], role_id: str) -> dict[str, Any]:
    """A role of the library (worlds.md fields) made of a card's fields."""
    name = str(data["name"]).strip()
    description = _text(data, "description", name)
    personality = _text(data, "personality", name)
    scenario = _text(data, "scenario", name)
    first = _text(data, "first_mes", name)
    examples = _text(data, "mes_example", name)
    own = _text(data, "system_prompt", name)
    persona = " ".join(p for p in (description, personality and f"Personality: {personality}") if p)
    prompt = [own] if own else []
    prompt.append(f"You are {name}. Stay in character." + (f" {persona}" if persona else ""))
    if scenario:
        prompt.append(f"Scenario: {scenario}")
    if first:
        prompt.append(f"Your first message in this story was:\n{first}")
    role: dict[str, Any] = {
        "id": role_id,
        "name": name,
        "description": _one_line(description or personality or f"{name}, from a character card"),
        "system_prompt": "\n\n".join(prompt),
    }
    if examples:
        role["style"] = "as in these example exchanges:\n" + examples.replace("<START>", "").strip()
    return role


def _one_line(text: str, most: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= most else line[: most - 1].rstrip() + "…"


def card_of_role(role: dict[str, Any]) -> dict[str, Any]:
    """A V2 character card (``chara_card_v2``) of a role of the library."""
    rid = str(role.get("id", ""))
    name = str(role.get("name") or rid.replace("_", " ").title())
    constraints = [str(c) for c in role.get("constraints") or []]
    system = str(role.get("system_prompt") or "")
    if constraints:
        system += "\n\nConstraints:\n" + "\n".join(f"- {c}" for c in constraints)
    return {
        "spec": "chara_card_v2",
        "spec_version": "2.0",
        "data": {
            "name": name,
            "description": str(role.get("description") or ""),
            "personality": "",
            "scenario": "",
            "first_mes": "",
            "mes_example": "",
            "creator_notes": f"Exported from the rolecall role '{rid}'.",
            "system_prompt": system.strip(),
            "post_history_instructions": str(role.get("style") or "")
            and f"Style: {role.get('style')}",
            "alternate_greetings": [],
            "tags": ["rolecall"],
            "creator": "",
            "character_version": "",
            "extensions": {
                "rolecall": {
                    "id": rid,
                    "style": str(role.get("style") or ""),
                    "constraints": constraints,
                }
            },
        },
    }
