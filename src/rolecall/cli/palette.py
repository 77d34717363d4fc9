"""One terminal palette for every display (the plain one of `run` and the REPL's): a
colour per role, the few styles they use, plain when colour is off; the one message
header both print and the one probe of the terminal's width."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Sequence
from typing import TextIO

from rolecall.session.audience import audience_label

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


def header(
    palette: Palette,
    sender: str,
    target: str | None,
    step: str | None,
    iteration: int | None,
    answering: str | None = None,
    *,
    label: str | None = None,
    audience: Sequence[str] | None = None,
) -> str:
    """``speaker → target [step S · loop n] ↩ m7 "…" (to a, b only)``, the header of a
    message in every display. ``answering``: the answered message, as
    :func:`rolecall.export.common.answered` says it; ``label``: the speaker's chat-style
    label (a debate's ``#3 PRO · Name``) shown instead of its id; ``audience``: a
    private message's (audiences.md)."""
    from rolecall.export.common import step_label  # loaded by then: the displays use it

    head = palette.role(sender, label)
    if target:
        head += " → " + palette.role(target)
    where = step_label(step, iteration)
    if where:
        head += " " + palette.dim(f"[{where}]")
    if answering:
        head += " " + palette.dim(answering)
    if audience is not None:
        head += " " + palette.yellow(f"({audience_label(audience)})")
    return head


def terminal_width(*streams: TextIO | None) -> int:
    """The columns of the terminal: asked of ``streams`` in turn (by default stdin, then
    the real stdout: ``sys.stdout`` may be the REPL prompt's proxy), else ``$COLUMNS``,
    else 100."""
    for stream in streams or (sys.__stdin__, sys.__stdout__):
        try:
            return os.get_terminal_size(stream.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            continue
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    return columns if columns > 0 else 100
