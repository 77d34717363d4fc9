"""A search's match in a message, as the sessions list shows it (a line around it)."""

from __future__ import annotations

from html import escape

from markupsafe import Markup

from rolecall.web.render import short

__all__ = ["marked"]


def marked(text: str, found: str, width: int = 160) -> Markup:
    """One line of ``text`` around the first place it contains ``found`` (any case), at
    most about ``width`` characters, that place in ``<mark>``; everything else escaped."""
    line = " ".join(text.split())
    needle = " ".join(found.split())
    lower = line.lower()
    # (a letter whose lower case is longer would shift every place after it: exact case)
    at = -1
    if needle:
        at = lower.find(needle.lower()) if len(lower) == len(line) else line.find(needle)
    if at < 0:
        return Markup(escape(short(line, width)))
    end = at + len(needle)
    room = max(0, width - len(needle))
    start = max(0, at - room // 2)
    stop = min(len(line), end + room - (at - start))
    head = ("…" if start > 0 else "") + line[start:at]
    tail = line[end:stop] + ("…" if stop < len(line) else "")
    return Markup(f"{escape(head)}<mark>{escape(line[at:end])}</mark>{escape(tail)}")
