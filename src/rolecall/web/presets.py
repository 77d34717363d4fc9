"""The start page's debate and consensus forms: the world ``rolecall debate`` or
``rolecall consensus`` would run, from the form's fields, loaded as every world is."""

from __future__ import annotations

from typing import Any

from rolecall.errors import UsageError
from rolecall.modes import consensus, debate
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world
from rolecall.world.models import World

KINDS = ("debate", "consensus")


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


def preset_world(kind: str, form: dict[str, str]) -> World:
    """The ``kind`` preset's world from the form (UsageError/WorldError naming the field)."""
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
