"""Lore entries (knowledge.md): world info put into a role's prompt when one of its
keys is in the last few messages, SillyTavern's world info. Each insertion is a
``system/lore`` event naming the entry and the key found."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

from rolecall.bus import LoreEvent
from rolecall.session.audience import latest_seen
from rolecall.session.state import Transcript, TranscriptMessage
from rolecall.world.models import LoreEntry, Role, World

__all__ = ["LORE_WINDOW", "Lore", "lore_for"]

LORE_WINDOW: Final = 4  # the last messages searched for keys (and the one answered)

INTRO: Final = "World info (background facts for this turn; use them where they help):"


@dataclass(frozen=True, slots=True)
class Lore:
    events: list[LoreEvent]
    block: str | None  # the prompt's block (None: no entry triggered)


@lru_cache(maxsize=256)
def _pattern(keys: tuple[str, ...]) -> re.Pattern[str]:
    """A key anywhere as a whole word (or phrase), any case."""
    alternatives = "|".join(re.escape(k.strip()) for k in sorted(keys, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)", re.IGNORECASE)


def _applies(entry: LoreEntry, role: Role) -> bool:
    return entry.roles is None or role.id in entry.roles


def lore_for(
    world: World,
    role: Role,
    transcript: Transcript,
    target: TranscriptMessage | None,
    message_id: str,
    window: int = LORE_WINDOW,
) -> Lore:
    """The entries of ``world.lore`` for ``role``'s turn: those with a key in the last
    ``window`` messages or in the message answered, in the world's order."""
    entries = [e for e in world.lore if _applies(e, role)]
    if not entries:
        return Lore([], None)
    # the one read (audiences.md): a key only this role's private audience heard
    # brings it nothing
    recent = latest_seen(transcript.messages, role.id, window, limit=role.sees) if window else []
    texts = [m.content for m in recent]
    if target is not None and target not in recent:
        texts.append(target.content)
    text = "\n".join(texts)
    events: list[LoreEvent] = []
    found: list[LoreEntry] = []
    for entry in entries:
        hit = _pattern(tuple(entry.keys)).search(text)
        if hit is None:
            continue
        found.append(entry)
        key = next(k for k in entry.keys if k.strip().lower() == hit.group(0).lower())
        events.append(
            LoreEvent.trusted(role=role.id, entry=entry.label, key=key, message_id=message_id)
        )
    if not found:
        return Lore([], None)
    block = "\n".join([INTRO, *(f"- {e.text.strip()}" for e in found)])
    return Lore(events, block)
