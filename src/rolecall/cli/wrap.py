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
