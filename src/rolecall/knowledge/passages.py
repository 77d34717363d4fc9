"""Cutting a document's lines into passages of a few hundred words (knowledge.md).

Paragraphs (lines between blank lines) are kept whole and gathered until a passage has
about :data:`TARGET` words; a Markdown heading starts a new passage (unless the one
being gathered has only headings) and names the passages under it. A paragraph longer
than :data:`LONGEST` words is cut at its lines, and a line longer than that at its
words. Each passage keeps the range of lines it came from. Pure.
"""

from __future__ import annotations

import re
from typing import Final

from rolecall.knowledge.documents import Lines
from rolecall.storage.knowledge_index import NewPassage

__all__ = ["LONGEST", "SPLITTER", "TARGET", "split"]

SPLITTER: Final = "paragraphs-180-300/2"  # changed whenever passages are cut another way
TARGET: Final = 180  # words a passage is gathered up to
LONGEST: Final = 300  # no passage is longer

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")


def split(lines: Lines) -> list[NewPassage]:
    """The passages of a document's ``lines``."""
    out: list[NewPassage] = []
    heading = ""
    current: list[Lines] = []  # its paragraphs (or pieces of one)
    count = 0
    body = False  # the passage being gathered has more than headings
    passage_heading = ""

    def flush() -> None:
        nonlocal current, count, body
        if current and count:
            text = "\n\n".join("\n".join(t for _, t in piece) for piece in current)
            out.append(NewPassage(current[0][0][0], current[-1][-1][0], passage_heading, text))
        current, count, body = [], 0, False

    for paragraph in _paragraphs(lines):
        first = paragraph[0][1]
        found = _HEADING.match(first)
        if found:
            if body:
                flush()
            heading = found.group(1)
            if not body:  # a title over a section: the passage is named by the section
                passage_heading = heading
        for piece in _pieces(paragraph):
            words = sum(len(t.split()) for _, t in piece)
            if count and count + words > LONGEST:
                flush()
            if not current:
                passage_heading = heading
            current.append(piece)
            count += words
            body = body or any(not _HEADING.match(t) for _, t in piece)
            if count >= TARGET:
                flush()
    flush()
    return out


def _paragraphs(lines: Lines) -> list[Lines]:
    """Runs of non-blank lines; a heading line is a paragraph of its own start."""
    paragraphs: list[Lines] = []
    run: Lines = []
    for number, text in lines:
        if not text.strip():
            if run:
                paragraphs.append(run)
            run = []
            continue
        if run and _HEADING.match(text):
            paragraphs.append(run)
            run = []
        run.append((number, text.rstrip()))
    if run:
        paragraphs.append(run)
    return paragraphs


def _pieces(paragraph: Lines) -> list[Lines]:
    """``paragraph`` whole, or cut into pieces of at most :data:`LONGEST` words."""
    if sum(len(t.split()) for _, t in paragraph) <= LONGEST:
        return [paragraph]
    pieces: list[Lines] = []
    piece: Lines = []
    count = 0
    for number, text in paragraph:
        words = text.split()
        if len(words) > LONGEST:  # one very long line (a PDF's, an HTML page's)
            if piece:
                pieces.append(piece)
                piece, count = [], 0
            for start in range(0, len(words), TARGET):
                pieces.append([(number, " ".join(words[start : start + TARGET]))])
            continue
        if count + len(words) > LONGEST and piece:
            pieces.append(piece)
            piece, count = [], 0
        piece.append((number, text))
        count += len(words)
    if piece:
        pieces.append(piece)
    return pieces
