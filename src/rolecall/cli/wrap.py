"""Text on a terminal: its width in columns and word-wrapping, for every display.

:func:`width_of` is the one measure of a text's terminal columns (wcwidth: a CJK
character or an emoji takes two); :func:`wrap_line` cuts a line to a width;
:class:`StreamWrap` is fed the text as it streams and returns what to write, with a
newline put before a word that would not fit; a word is held back until it ends (a
space or a newline), so it is placed whole. Widths are terminal columns (wcwidth: a CJK
character or an emoji takes two), so wrapped lines are as wide as the terminal, never
wider.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from wcwidth import wcswidth


def width_of(text: str) -> int:
    """The terminal columns ``text`` takes (wcwidth; its length if it has control chars)."""
    n = wcswidth(text)
    return n if n >= 0 else len(text)


def wrap_line(text: str, width: int) -> Iterator[str]:
    """Split one line into pieces of at most ``width`` terminal columns, at spaces when
    possible."""
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


_SGR = re.compile(r"\x1b\[[0-9;]*m")


def wrap_styled(line: str, width: int) -> list[str]:
    """``line`` (which may hold colour codes) in pieces of at most ``width`` columns,
    broken between words, never inside one (an id stays whole to be pasted; a word
    wider than the line is left to the terminal). A piece after the first keeps the
    line's indent, and a colour open at a break is closed there and opened again on the
    next piece."""
    plain = _SGR.sub("", line)
    if width_of(plain) <= width:
        return [line]
    indent = " " * min(len(plain) - len(plain.lstrip(" ")), width // 2)
    out: list[str] = []
    current, used, style, fresh = "", 0, "", True
    for word in line.split(" "):
        w = width_of(_SGR.sub("", word))
        if not fresh and used + 1 + w > width:
            out.append(current + ("\x1b[0m" if style else ""))
            current, used, fresh = indent + style, len(indent), True
        sep = "" if fresh else " "
        current += sep + word
        used += len(sep) + w
        fresh = False
        for code in _SGR.findall(word):
            style = "" if code in ("\x1b[0m", "\x1b[m") else style + code
    out.append(current)
    return out


class StreamWrap:
    def __init__(self, width: int) -> None:
        self.width = max(width, 20)
        self.col = 0
        self.word = ""

    def feed(self, text: str) -> str:
        """What to write for ``text`` (a word still open is kept for the next call)."""
        out: list[str] = []
        for ch in text:
            if ch == "\n":
                out.append(self._word())
                out.append("\n")
                self.col = 0
            elif ch == " ":
                out.append(self._word())
                if self.col >= self.width:
                    out.append("\n")
                    self.col = 0
                else:
                    out.append(" ")
                    self.col += 1
            elif width_of(ch) == 2 and not self.word:  # CJK: any character may break
                self.word = ch
                out.append(self._word())
            else:
                self.word += ch
        return "".join(out)

    def end(self) -> str:
        """The last word, at the end of the text; the column starts again."""
        rest = self._word()
        self.col = 0
        return rest

    def _word(self) -> str:
        word, self.word = self.word, ""
        if not word:
            return ""
        w = width_of(word)
        if self.col and self.col + w > self.width:
            self.col = w
            return "\n" + word
        self.col += w
        return word
