"""The small text helpers of the REPL display (its colours: :mod:`rolecall.cli.palette`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

from rolecall.cli.palette import Palette, tokens

__all__ = ["Palette", "header", "tokens"]

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"


def header(
    palette: Palette,
    sender: str,
    target: str | None,
    step: str | None,
    it: int | None,
    answering: str | None = None,
) -> str:
    """``speaker → target  step S · loop n  ↩ m7 "…"`` (``answering``: the answered
    message, as :func:`rolecall.export.common.answered` says it; the loop iteration when
    it is not the first)."""
    head = palette.role(sender)
    if target:
        head += " → " + palette.role(target)
    if step:
        where = "interjection" if step == "interjection" else f"step {step}"
        if it:
            where += f" · loop {it}"
        head += "  " + palette.dim(where)
    if answering:
        head += "  " + palette.dim(answering)
    return head


def _wrap(text: str, width: int) -> Iterator[str]:
    """Split one line into pieces of at most ``width`` terminal columns, at spaces when
    possible (columns measured with wcwidth: a CJK character or an emoji takes two)."""
    from rolecall.cli.repl.toolbar import width_of

    width = max(width, 10)
    while width_of(text) > width:
        used, fit = 0, 0  # fit: how many characters take at most `width` columns
        for ch in text:
            used += max(width_of(ch), 0)
            if used > width:
                break
            fit += 1
        cut = text.rfind(" ", 0, fit + 1)
        if cut <= 0:
            cut = max(fit, 1)
        yield text[:cut].rstrip(" ")
        text = text[cut:].lstrip(" ")
    yield text


def _terminal_width() -> int:
    """The terminal's columns: asked of the terminal itself (stdin, then the real
    stdout: ``sys.stdout`` may be the prompt's proxy), else ``$COLUMNS``, else 100."""
    import os
    import sys

    for stream in (sys.__stdin__, sys.__stdout__):
        try:
            return os.get_terminal_size(stream.fileno()).columns  # type: ignore[union-attr]
        except (AttributeError, OSError, ValueError):
            continue
    return shutil.get_terminal_size((100, 40)).columns
