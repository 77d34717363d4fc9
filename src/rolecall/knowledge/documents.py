"""Reading a knowledge document as numbered lines of text (.md, .txt, .pdf, .html).

Each format gives ``(line, text)`` pairs: the line of the file a piece of text is on
(Markdown, text, HTML) or of the PDF's extracted text layer (its pages one after
another). Lines are counted as ``grep -n`` and editors count them (:func:`text_lines`):
only a line feed ends a line, so a form feed, a vertical tab, U+0085 or U+2028 inside a
line never shifts a citation. A file that cannot be used is a :class:`KnowledgeError`
naming it.
"""

from __future__ import annotations

import io
from html.parser import HTMLParser
from pathlib import Path
from typing import Final

from rolecall.errors import NotTextError, UsageError
from rolecall.paths import decode_text

__all__ = ["FORMATS", "KnowledgeError", "Lines", "read_document", "text_lines"]

FORMATS: Final = (".md", ".markdown", ".txt", ".text", ".pdf", ".html", ".htm")

Lines = list[tuple[int, str]]
"""A document's text: (line number in the file, 1-based; the text of that line)."""


class KnowledgeError(UsageError):
    """A knowledge collection or document that cannot be used (exit 2)."""


def read_document(path: Path, data: bytes) -> Lines:
    """The text of ``path`` (whose bytes are ``data``), by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".pdf":
        return _pdf(path, data)
    if b"\x00" in data:
        raise KnowledgeError(f"{path}: a binary file, not text (knowledge reads {_formats()})")
    try:
        text = decode_text(data, str(path), "utf-8-sig")
    except NotTextError as exc:
        raise KnowledgeError(f"{path}: {exc.problem} (save it as UTF-8)") from None
    if suffix in (".html", ".htm"):
        return _html(_line_feeds(text))
    return list(enumerate(text_lines(text), start=1))


def _line_feeds(text: str) -> str:
    """``text`` with a classic Mac OS file's line ends (a carriage return alone, and no
    line feed anywhere) made line feeds; any other text as it is."""
    if "\r" in text and "\n" not in text:
        return text.replace("\r", "\n")
    return text


def text_lines(text: str) -> list[str]:
    """The lines of ``text`` as ``grep -n``, ``sed -n`` and editors number them, not as
    :meth:`str.splitlines` does: a line ends at a line feed (a ``\\r\\n`` is one line
    end, its carriage return dropped); a form feed, a vertical tab, U+001C..U+001E,
    U+0085, U+2028 and U+2029 are characters of their line. A carriage return alone ends
    lines only in a file with no line feed at all (a classic Mac OS file, which editors
    show so); elsewhere it is a character of its line, as ``grep -n`` counts it. A final
    line end starts no further line."""
    lines = _line_feeds(text).split("\n")
    if lines[-1] == "":
        lines.pop()  # the text ends with a line end (or is empty)
    return [line.removesuffix("\r") for line in lines]


def _formats() -> str:
    return ", ".join(FORMATS)


def _pdf(path: Path, data: bytes) -> Lines:
    import pypdf
    from pypdf.errors import PyPdfError

    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        pages = [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise KnowledgeError(f"{path}: not a readable PDF ({exc})") from None
    if not any(page.strip() for page in pages):
        raise KnowledgeError(
            f"{path}: the PDF has no text layer (a scan?): run OCR on it first, "
            "or give its text as a .txt file"
        )
    lines: Lines = []
    number = 0
    for page in pages:
        for line in text_lines(page):
            number += 1
            lines.append((number, line))
    return lines


_BLOCKS_WORDS: Final = (
    "p div br li ul ol h1 h2 h3 h4 h5 h6 tr table section article header footer "
    "blockquote pre dt dd title"
)
_BLOCKS: Final = frozenset(_BLOCKS_WORDS.split())
_SKIP: Final = frozenset(("script", "style", "template", "noscript"))


class _Text(HTMLParser):
    """The visible text of an HTML page, each piece on the source line it starts on;
    a heading's text starts with ``#`` as in Markdown (passages split on them)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.lines: dict[int, list[str]] = {}
        self._skip = 0
        self._heading = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skip += 1
        elif tag in _BLOCKS:
            self._new_line()
            if len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
                self._heading = True

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in _BLOCKS:
            self._heading = False
            self._new_line()

    def _new_line(self) -> None:
        line = self.getpos()[0]
        parts = self.lines.get(line)
        if parts and parts[-1] != "\n":
            parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        start = self.getpos()[0]
        for offset, piece in enumerate(data.split("\n")):
            words = " ".join(piece.split())
            if not words:
                continue
            parts = self.lines.setdefault(start + offset, [])
            if self._heading and (not parts or parts[-1] == "\n"):
                words = "# " + words
            parts.append(words)


def _html(text: str) -> Lines:
    parser = _Text()
    parser.feed(text)
    parser.close()
    out: Lines = []
    for number in sorted(parser.lines):
        pieces = "".join(p if p == "\n" else p + " " for p in parser.lines[number])
        out.extend((number, part.strip()) for part in pieces.split("\n") if part.strip())
    return out
