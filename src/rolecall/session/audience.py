"""What a role sees (audiences.md): the one read of the transcript for a role. Pure.

A message's ``audience`` is ``None`` (everyone) or the role ids it is for. Its sender,
its audience and the human always see it; nobody else does. A role's ``sees:`` list
(``limit`` here) narrows that further: the role sees only its own messages, the human's,
system notices, messages addressed to it, and messages from or to one of the listed ids.

Every reader of the transcript on behalf of a role asks here: the prompt's memory
window (``prompt.memory_window``), the memory files (``MemoryFiles``), running summaries
(``knowledge/summary.fold``), the respond check's history (``floor/respond.py``), the
lore scan, fork, resume, replay and remote agents. The human (``HUMAN``) sees everything.

A world with no audiences and no ``sees:`` pays one attribute test per message read
(``message.audience is None``, ``limit is None``): the per-turn cost is unchanged.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Final, Protocol

from rolecall.session.state import TranscriptMessage

__all__ = [
    "HUMAN",
    "Addressed",
    "audience_label",
    "can_see",
    "latest_seen",
    "seen",
]

HUMAN: Final = "human"
_ALWAYS: Final = frozenset({HUMAN, "system"})


class Addressed(Protocol):
    """The fields of a message that decide who sees it (a stored message or its event)."""

    @property
    def sender(self) -> str: ...
    @property
    def audience(self) -> list[str] | None: ...
    @property
    def mentions(self) -> list[str]: ...
    @property
    def target(self) -> str | None: ...


def can_see(role_id: str, message: Addressed, limit: Collection[str] | None = None) -> bool:
    """Whether ``role_id`` sees ``message``; ``limit``: the role's ``sees:`` list."""
    audience = message.audience
    sender = message.sender
    if role_id == HUMAN or sender == role_id:
        return True
    if audience is not None and role_id not in audience:
        return False
    if limit is None:
        return True
    if sender in _ALWAYS or sender in limit:
        return True
    if message.target == role_id or role_id in message.mentions:
        return True
    if message.target is not None and message.target in limit:
        return True
    return any(m in limit for m in message.mentions) or (
        audience is not None and any(a in limit for a in audience)
    )


def seen(
    messages: Sequence[TranscriptMessage],
    role_id: str,
    *,
    start: int = 0,
    end: int | None = None,
    limit: Collection[str] | None = None,
) -> list[TranscriptMessage]:
    """The messages ``messages[start:end]`` that ``role_id`` sees, in order."""
    part = messages[start:end]
    if limit is None:
        return [m for m in part if m.audience is None or can_see(role_id, m)]
    return [m for m in part if can_see(role_id, m, limit)]


def latest_seen(
    messages: Sequence[TranscriptMessage],
    role_id: str,
    count: int,
    *,
    start: int = 0,
    end: int | None = None,
    exclude: str | None = None,
    limit: Collection[str] | None = None,
) -> list[TranscriptMessage]:
    """The last ``count`` messages of ``messages[start:end]`` that ``role_id`` sees,
    without message ``exclude``, oldest first. It reads back from the end and stops
    after ``count``: a prompt's cost does not grow with the session."""
    out: list[TranscriptMessage] = []
    i = (len(messages) if end is None else end) - 1
    while i >= start and len(out) < count:
        message = messages[i]
        if message.id != exclude and (
            (message.audience is None and limit is None) or can_see(role_id, message, limit)
        ):
            out.append(message)
        i -= 1
    out.reverse()
    return out


def audience_label(audience: Sequence[str] | None) -> str:
    """How a private message is marked wherever it is shown: ``to a, b only`` ("" when
    everyone sees it)."""
    if audience is None:
        return ""
    return "to " + ", ".join(audience) + " only"
