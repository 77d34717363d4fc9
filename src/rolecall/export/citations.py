"""Citations ``[kN]`` in messages, and the passages they name (knowledge.md).

A role with knowledge is given passages ``[k1]``, ``[k2]``... for a turn; the
``system/knowledge`` event of that turn (its ``message_id``) says where each is. These
pure helpers pair a message's citations with those sources, for the terminal display,
the exports and the web view.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["CITATION", "Cited", "cited", "sources_by_message"]

CITATION: Final = re.compile(r"\[(k[1-9][0-9]{0,2})\]")


@dataclass(frozen=True, slots=True)
class Cited:
    """A passage a message cites: its id and where it is."""

    id: str
    path: str
    line_start: int
    line_end: int

    @property
    def source(self) -> str:
        """``path:12-30`` (``path:12`` for one line)."""
        lines = (
            str(self.line_start)
            if self.line_start == self.line_end
            else f"{self.line_start}-{self.line_end}"
        )
        return f"{self.path}:{lines}"

    @property
    def label(self) -> str:
        return f"[{self.id}] {self.source}"


Sources = Mapping[str, Mapping[str, Any]]
"""A turn's passages by id (``k1``: its ``path``, ``line_start``, ``line_end``, ...)."""


def sources_by_message(events: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each message's passages by id, from a session's event records."""
    out: dict[str, dict[str, Any]] = {}
    for record in events:
        if record.get("type") != "knowledge" or record.get("topic") != "system":
            continue
        message_id = record.get("message_id")
        passages = record.get("passages")
        if isinstance(message_id, str) and isinstance(passages, list):
            out[message_id] = {
                p["id"]: p for p in passages if isinstance(p, dict) and isinstance(p.get("id"), str)
            }
    return out


def cited(content: str, sources: Sources | None) -> list[Cited]:
    """The passages ``content`` cites, in the order first cited (ids it was not given
    are left out)."""
    if not sources or "[k" not in content:
        return []
    out: list[Cited] = []
    seen: set[str] = set()
    for found in CITATION.finditer(content):
        kid = found.group(1)
        passage = sources.get(kid)
        if kid in seen or passage is None:
            continue
        seen.add(kid)
        out.append(
            Cited(
                kid,
                str(passage.get("path", "?")),
                int(passage.get("line_start", 0)),
                int(passage.get("line_end", 0)),
            )
        )
    return out
