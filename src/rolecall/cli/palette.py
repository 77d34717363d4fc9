"""One terminal palette for every display (the plain one of `run` and the REPL's): a
colour per role, the few styles they use, plain when colour is off."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TextIO

_PALETTE = ("36", "33", "35", "32", "34", "91", "96", "93", "95", "92")


def _ansi(code: str, text: str, on: bool) -> str:
    return f"\033[{code}m{text}\033[0m" if on and text else text


class Palette:
    """One colour per role, and the few styles the displays use; plain when ``color`` is
    off."""

    def __init__(self, role_order: Iterable[str], *, color: bool) -> None:
        self.color = color
        self.colors = {rid: _PALETTE[i % len(_PALETTE)] for i, rid in enumerate(role_order)}

    def paint(self, who: str, text: str) -> str:
        """``text`` in ``who``'s colour (plain for someone without one)."""
        code = self.colors.get(who)
        return _ansi(code, text, self.color) if code else text

    def role(self, who: str, text: str | None = None) -> str:
        code = self.colors.get(who)
        shown = who if text is None else text
        return _ansi(f"1;{code}", shown, self.color) if code else shown

    def bar(self, who: str) -> str:
        code = self.colors.get(who, "2")
        return _ansi(code, "│ ", self.color)

    def dim(self, text: str) -> str:
        return _ansi("2", text, self.color)

    def bold(self, text: str) -> str:
        return _ansi("1", text, self.color)

    def red(self, text: str) -> str:
        return _ansi("1;31", text, self.color)

    def yellow(self, text: str) -> str:
        return _ansi("33", text, self.color)

    def green(self, text: str) -> str:
        return _ansi("32", text, self.color)


def tokens(n_in: int, n_out: int) -> str:
    return f"↑{n_in:,} ↓{n_out:,}"


def use_color(stream: TextIO) -> bool:
    """Colour on a terminal, unless ``NO_COLOR`` is set."""
    if os.environ.get("NO_COLOR"):
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())
