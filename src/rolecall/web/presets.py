"""The start page's debate, consensus and study forms: the world ``rolecall debate``,
``rolecall consensus`` or ``rolecall study DOC`` would run, from the form's fields (and
the uploaded document), loaded as every world is."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from rolecall.errors import UsageError
from rolecall.modes import consensus, debate
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world
from rolecall.world.models import World

KINDS = ("debate", "consensus", "study")
MAX_DOCUMENT = 10 * 1024 * 1024  # bytes of an uploaded document


def choices() -> dict[str, Any]:
    """What the forms offer: each preset's profiles."""
    return {"debate": list(debate.PROFILES), "consensus": list(consensus.PROFILES)}


def _number(form: dict[str, str], field: str, label: str) -> int | None:
    raw = form.get(field, "").strip()
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"{label} is a whole number, got {raw!r}") from None


def preset_world(
    kind: str, form: dict[str, str], document: tuple[str, bytes] | None = None
) -> World:
    """The ``kind`` preset's world from the form (UsageError/WorldError naming the field);
    a study's ``document`` is the uploaded file's name and bytes."""
    if kind == "study":
        return _study(form, document)
    topic = form.get("topic", "").strip()
    if not topic:
        raise UsageError(
            f"a {kind} needs a topic: what to {'debate' if kind == 'debate' else 'decide'}"
        )
    options: dict[str, Any] = {}
    if form.get("profile"):
        options["profile"] = form["profile"]
    if kind == "debate":
        for side in ("pro", "con"):
            if form.get(side, "").strip():
                options[side] = form[side].strip()
        turns = _number(form, "max_turns", "debater turns")
        if turns is not None:
            options["max_turns"] = turns
        if form.get("no_dynamic"):
            options["dynamic_termination"] = False
        if form.get("judge"):
            options["judge"] = "judge"
    elif kind == "consensus":
        rounds = _number(form, "max_rounds", "rounds")
        if rounds is not None:
            options["max_rounds"] = rounds
    else:
        raise UsageError(f"no preset {kind!r} (one of {', '.join(KINDS)})")
    raw = {"name": kind, "mode": kind, "topic": topic, kind: options}
    return build_world(raw, source=f"the {kind} form", library=RoleLibrary()).world


def _study(form: dict[str, str], document: tuple[str, bytes] | None) -> World:
    """``rolecall study DOC``'s world: the document read as the command reads it."""
    from rolecall.study.document import DocumentError, read_document

    if document is None or not document[0]:
        raise UsageError("a study needs a document: pick a .txt, .md or .pdf file")
    name = Path(document[0]).name or "document"
    if len(document[1]) > MAX_DOCUMENT:
        raise UsageError(f"{name}: {len(document[1]):,} bytes, more than the 10 MB a study takes")
    with tempfile.TemporaryDirectory(prefix="rolecall-study-") as scratch:
        path = Path(scratch) / name
        path.write_bytes(document[1])
        try:
            text = read_document(path, name=name).text
        except DocumentError as exc:
            raise UsageError(str(exc)) from None
    study: dict[str, Any] = {"document": name, "text": text}
    for field, label in (("delay", "delay"), ("lock", "lock")):
        value = _number(form, field, label)
        if value is not None:
            study[field] = value
    raw = {
        "name": "study",
        "title": f"Study: {name}",
        "mode": "study",
        "model": "offline",
        "study": study,
    }
    return build_world(raw, source="the study form", library=RoleLibrary()).world
