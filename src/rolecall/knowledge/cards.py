"""Character cards (knowledge.md, Roles from elsewhere): SillyTavern's V2 and V3 cards
(and the flat V1 fields they grew from) read into a role of the library, and a role
written back as a V2 card.

A card is JSON, or a PNG whose ``ccv3`` (V3, preferred) or ``chara`` text chunk holds
the card's JSON in base64; the PNG's chunks are read here with the standard library,
one at a time (the image data is skipped, never read). Fields: ``name``;
``description`` and ``personality`` make the persona; ``scenario`` and ``first_mes`` go
into the system prompt; ``mes_example`` (example dialogue) becomes the style; the card's
own ``system_prompt`` comes first. ``{{char}}`` and ``{{user}}`` are replaced by the
character's name and "the user".

A card rolecall wrote (:func:`card_of_role`) carries the role's persona fields as they
are under ``extensions.rolecall.role``; while the card's own fields are still the ones
written from them, importing it gives those fields back unchanged (a lossless round
trip). A card edited elsewhere since is read as any other card.

What a file may hold is bounded: a card's JSON (a JSON file, or a PNG's card chunk as
stored or once inflated) is at most :data:`MAX_CARD_BYTES`; inflating stops there, so a
small PNG holding a gigabyte of zlib data is refused after 8 MiB, not after a gigabyte.
JSON nested deeper than Python parses, and text that is not Unicode (a lone surrogate
from a ``\\udc80`` escape), are refused with the file named.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
import zlib
from pathlib import Path
from typing import IO, Any, Final

from rolecall.errors import UsageError

__all__ = ["MAX_CARD_BYTES", "CardError", "card_of_role", "read_card", "role_of_card"]

PNG_SIGNATURE: Final = b"\x89PNG\r\n\x1a\n"
_KEYS: Final = ("ccv3", "chara")  # the chunk keywords, preferred first
_V1_FIELDS: Final = ("name", "description", "personality", "scenario", "first_mes", "mes_example")
MAX_CARD_BYTES: Final = 8 * 1024 * 1024
"""The most a card's JSON may take (8 MiB): a JSON card file, a PNG's card chunk, and
what such a chunk inflates to. Cards are kilobytes; one with a large embedded lorebook
is a few hundred."""
# the role fields a card carries (worlds.md): its persona, never a model, key or tool
PERSONA: Final = ("name", "description", "system_prompt", "style", "constraints")


class CardError(UsageError):
    """A file that is not a character card (exit 2)."""


def read_card(path: Path) -> dict[str, Any]:
    """The card's fields (its ``data``, or a V1 card's top level) from a JSON or PNG file."""
    try:
        with path.open("rb") as handle:
            head = handle.read(len(PNG_SIGNATURE))
            if head == PNG_SIGNATURE:
                text = _png_card(path, handle)
            else:
                raw = head + handle.read(MAX_CARD_BYTES + 1 - len(head))
                if len(raw) > MAX_CARD_BYTES:
                    raise CardError(f"{path}: not a character card: {_too_big('the file')}")
                try:
                    text = raw.decode("utf-8-sig")
                except UnicodeDecodeError:
                    raise CardError(
                        f"{path}: not a character card: neither JSON text nor a PNG image"
                    ) from None
    except OSError as exc:
        raise CardError(f"{path}: cannot read it ({exc.strerror})") from None
    try:
        card = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CardError(
            f"{path}: not a character card: not JSON ({exc.msg}, line {exc.lineno})"
        ) from None
    except RecursionError:
        raise CardError(
            f"{path}: not a character card: its JSON is nested too deeply to read"
        ) from None
    return _fields(path, card)


def _too_big(what: str) -> str:
    return f"{what} is over {MAX_CARD_BYTES // (1024 * 1024)} MiB (a card is kilobytes)"


def _not_text(value: str) -> str | None:
    """Where ``value`` is not Unicode text (a lone surrogate, as a JSON ``\\udc80``
    escape makes), or None."""
    for at, ch in enumerate(value):
        if "\ud800" <= ch <= "\udfff":
            return f"a lone surrogate U+{ord(ch):04X} at character {at + 1}"
    return None


def _check_text(path: Path, field: str, value: object) -> None:
    """A CardError when a string in ``value`` (walked without recursion) is not text."""
    stack: list[tuple[str, object]] = [(field, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, str):
            problem = _not_text(item)
            if problem is not None:
                raise CardError(
                    f"{path}: card field {where} is not text: {problem} (a \\u escape "
                    "of half a character); fix it in the card"
                )
        elif isinstance(item, dict):
            stack.extend((f"{where}.{k}", v) for k, v in item.items())
        elif isinstance(item, list):
            stack.extend((f"{where}[{i}]", v) for i, v in enumerate(item))


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
    for key in (*_V1_FIELDS, "system_prompt", "post_history_instructions"):
        _check_text(path, key, data.get(key))
    _check_text(path, "extensions.rolecall.role", _rolecall_role(data))
    return data


def _png_card(path: Path, handle: IO[bytes]) -> str:
    """The card JSON of a PNG's ``ccv3`` or ``chara`` text chunk (tEXt, zTXt or iTXt),
    reading the chunks from ``handle`` (just past the signature) one at a time: other
    chunks are skipped unread, a card chunk or what it inflates to is at most
    :data:`MAX_CARD_BYTES`."""
    found: dict[str, bytes] = {}
    while True:
        head = handle.read(8)
        if len(head) < 8:
            break
        length, kind = struct.unpack(">I4s", head)
        if kind == b"IEND":
            break
        if kind not in (b"tEXt", b"zTXt", b"iTXt"):
            handle.seek(length + 4, 1)  # its data and CRC
            continue
        # a keyword is 1-79 bytes: read enough to know whether this is a card chunk
        start = handle.read(min(length, 80))
        keyword, nul, _ = start.partition(b"\x00")
        key = keyword.decode("latin-1").lower()
        if not nul or key not in _KEYS or key in found:
            handle.seek(length - len(start) + 4, 1)
            continue
        if length > MAX_CARD_BYTES:
            raise CardError(f"{path}: the PNG's {key} chunk: {_too_big('its data')}")
        data = start + handle.read(length - len(start))
        if len(data) < length:
            raise CardError(f"{path}: a damaged PNG: chunk {kind!r} is cut short")
        handle.seek(4, 1)  # the CRC
        found[key] = _chunk_text(path, key, kind, data.partition(b"\x00")[2])
    for key in _KEYS:
        if key in found:
            try:
                return base64.b64decode(found[key], validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise CardError(
                    f"{path}: the PNG's {key} chunk is not a base64 character card"
                ) from None
    raise CardError(f"{path}: not a character card: a PNG without a chara or ccv3 text chunk")


def _chunk_text(path: Path, key: str, kind: bytes, rest: bytes) -> bytes:
    """The text of a card chunk after its keyword: as stored (tEXt), or inflated
    (zTXt; iTXt when flagged) up to :data:`MAX_CARD_BYTES` at most."""
    try:
        if kind == b"zTXt":
            return _inflate(path, key, rest[1:])
        if kind == b"iTXt":
            compressed, rest = rest[0], rest[2:]
            _lang, _, rest = rest.partition(b"\x00")
            _translated, _, rest = rest.partition(b"\x00")
            if compressed:
                return _inflate(path, key, rest)
    except (zlib.error, IndexError):
        raise CardError(f"{path}: the PNG's {key} chunk cannot be decompressed") from None
    return rest


def _inflate(path: Path, key: str, data: bytes) -> bytes:
    """``data`` inflated, stopping (CardError) once it passes :data:`MAX_CARD_BYTES`."""
    inflater = zlib.decompressobj()
    out = inflater.decompress(data, MAX_CARD_BYTES + 1)
    if len(out) > MAX_CARD_BYTES:
        raise CardError(f"{path}: the PNG's {key} chunk: {_too_big('its inflated text')}")
    return out


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


def _rolecall(data: dict[str, Any]) -> dict[str, Any]:
    """What rolecall wrote into the card (``extensions.rolecall``), else nothing."""
    extensions = data.get("extensions")
    ours = extensions.get("rolecall") if isinstance(extensions, dict) else None
    return ours if isinstance(ours, dict) else {}


def _rolecall_role(data: dict[str, Any]) -> dict[str, Any] | None:
    """The role fields rolecall wrote into the card (``extensions.rolecall.role``)."""
    role = _rolecall(data).get("role")
    return role if isinstance(role, dict) else None


def _as_written(data: dict[str, Any]) -> dict[str, Any] | None:
    """The persona fields of a card rolecall wrote, when the card's own fields are
    still the ones written from them (not edited elsewhere since); else None."""
    role = _rolecall_role(data)
    if role is None or set(role) - set(PERSONA):
        return None
    written = card_of_role({**role, "id": str(_rolecall(data).get("id") or "")})["data"]
    for key in ("name", "description", "system_prompt", "post_history_instructions"):
        if (data.get(key) or "") != written[key]:
            return None
    return dict(role)


def role_of_card(data: dict[str, Any], role_id: str) -> dict[str, Any]:
    """A role of the library (worlds.md fields) made of a card's fields; the role's
    own fields as they were when the card is one rolecall wrote and nobody edited."""
    kept = _as_written(data)
    if kept is not None:
        return {"id": role_id, **kept}
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
    """A V2 character card (``chara_card_v2``) of a role of the library: its persona as
    card fields (the constraints listed in the system prompt, the style as
    post-history instructions, for other card readers) and, under
    ``extensions.rolecall.role``, its persona fields as they are, which an import of
    the card gives back. A role's model, tools and other settings stay out of it."""
    rid = str(role.get("id", ""))
    name = str(role.get("name") or rid.replace("_", " ").title())
    constraints = [str(c) for c in role.get("constraints") or []]
    system = str(role.get("system_prompt") or "")
    if constraints:
        system += "\n\nConstraints:\n" + "\n".join(f"- {c}" for c in constraints)
    style = str(role.get("style") or "")
    persona = {k: role[k] for k in PERSONA if role.get(k) not in (None, "", [])}
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
            "post_history_instructions": style and f"Style: {style}",
            "alternate_greetings": [],
            "tags": ["rolecall"],
            "creator": "",
            "character_version": "",
            "extensions": {"rolecall": {"id": rid, "role": persona}},
        },
    }
