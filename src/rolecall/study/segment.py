"""Segmentation of a study document into sections and units (pure; no I/O).

The same rules apply to TXT, Markdown and the text layer of a PDF:

Headings (each starts a new section; the line itself is not a paragraph)
    * Markdown ``#`` .. ``######`` followed by a space (level = number of ``#``).
    * Numbered: ``1. Title``, ``1.1. Title`` or ``1.1 Title`` (level = number of
      components). To keep numbered list items out, the title must start with a capital
      letter or a digit, have at most 12 words and 100 characters, and must not end with
      ``.``, ``,``, ``;`` or ``:``.
    * ALL-CAPS lines of 3-10 words: at least one letter and no lowercase letter (level 1).
    * Underlined: a title line directly followed by a line of at least three ``=``
      (level 1) or ``-`` (level 2). The title is the last line above the underline; it must
      have at most 12 words and not end with ``.``, ``,`` or ``;``, otherwise the underline
      is a thematic break.
    Nothing inside a fenced code block (`````/``~~~``) is a heading.

A leading YAML front matter block (``---`` ... ``---``) is not part of the text.
Paragraphs are runs of non-blank lines, joined with single spaces; thematic breaks
(``---``, ``***``, ``___``) and form feeds end a paragraph. Paragraphs under
:data:`MIN_PARAGRAPH` (20) characters are dropped. Text before the first heading is its
own section (without a heading). Sections left without paragraphs are dropped.

Units: a section of more than :data:`MAX_PARAGRAPHS` (5) paragraphs is split into
``ceil(n / 5)`` consecutive units of 1 to 5 paragraphs, cut where adjacent paragraphs
are least cohesive lexically (:mod:`rolecall.study.cohesion`); evenly cohesive
paragraphs give balanced units (12 paragraphs: 4 + 4 + 4; 6: 3 + 3), earlier units
taking the extra paragraph. Each unit reports its cohesion: the mean cohesion of its
adjacent paragraphs (1.0 for a single paragraph).

Kinds (``introduction``, ``body``, ``methodology``, ``conclusion``), per section, first
rule that applies:
    1. Cue words in the section's heading, then in its ancestors' headings (nearest first;
       in one heading the first cue in reading order wins): see :data:`KIND_CUES`.
    2. Text before the first heading, in a document that has headings: ``introduction``.
    3. Position: the document's first unit is ``introduction``; its last unit, when the
       document has at least 3 units, is ``conclusion``.
    4. Otherwise ``body``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from rolecall.study.cohesion import MAX_PARAGRAPHS, adjacent_cohesion, cut_points, unit_cohesion
from rolecall.study.cohesion import words_of as words_of

__all__ = [
    "KINDS",
    "KIND_CUES",
    "MAX_PARAGRAPHS",
    "MIN_PARAGRAPH",
    "Heading",
    "Kind",
    "Segment",
    "Unit",
    "detect_heading",
    "segment",
    "segment_document",
    "split_units",
    "title",
    "words_of",
]

Kind = Literal["introduction", "body", "methodology", "conclusion"]
KINDS: Final[tuple[Kind, ...]] = ("introduction", "body", "methodology", "conclusion")
HeadingStyle = Literal["markdown", "numbered", "caps", "underline"]

MIN_PARAGRAPH: Final = 20
_MAX_TITLE_WORDS: Final = 12
_MAX_TITLE_CHARS: Final = 100

KIND_CUES: Final[dict[Kind, tuple[str, ...]]] = {
    "introduction": (
        "introduction",
        "introductory",
        "intro",
        "overview",
        "background",
        "preface",
        "abstract",
        "motivation",
        "preliminaries",
        "prologue",
        "foreword",
        "getting started",
    ),
    "methodology": (
        "methodology",
        "methodologies",
        "methods",
        "method",
        "procedure",
        "procedures",
        "protocol",
        "protocols",
        "materials",
        "approach",
        "setup",
        "experimental design",
        "study design",
        "data collection",
        "measurement",
        "measurements",
    ),
    "conclusion": (
        "conclusion",
        "conclusions",
        "concluding",
        "summary",
        "takeaways",
        "takeaway",
        "recap",
        "epilogue",
        "outlook",
        "final thoughts",
        "final remarks",
        "closing remarks",
        "wrap up",
        "lessons learned",
    ),
}

_MD = re.compile(r"^ {0,3}(#{1,6})\s+(.*?)(?:\s+#+)?\s*$")
_NUMBERED = re.compile(r"^(\d{1,3}(?:\.\d{1,3})*)\.\s+(\S.*)$|^(\d{1,3}(?:\.\d{1,3})+)\s+(\S.*)$")
_UNDERLINE = re.compile(r"^(={3,}|-{3,})$")
_BREAK = re.compile(r"^([-*_])(?:\s*\1){2,}$")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")


@dataclass(frozen=True)
class Heading:
    text: str
    level: int
    style: HeadingStyle


@dataclass(frozen=True)
class Segment:
    """A section: its heading (None for text before the first heading) and paragraphs."""

    index: int
    heading: Heading | None
    path: tuple[str, ...]  # heading texts from the outermost ancestor to this one
    paragraphs: tuple[str, ...]


@dataclass(frozen=True)
class Unit:
    """What one round of the five roles discusses: at most 5 paragraphs of a section."""

    index: int  # 0-based, document order
    segment: int
    part: int  # 1-based part of its section
    parts: int
    heading: str | None
    path: tuple[str, ...]
    kind: Kind
    paragraphs: tuple[str, ...]
    cohesion: float = 1.0  # mean lexical cohesion of adjacent paragraphs

    @property
    def id(self) -> str:
        return f"u{self.index + 1}"

    @property
    def text(self) -> str:
        return "\n\n".join(self.paragraphs)

    def to_dict(self) -> dict[str, object]:
        return {
            "id": self.id,
            "segment": self.segment,
            "part": self.part,
            "parts": self.parts,
            "heading": self.heading,
            "kind": self.kind,
            "paragraphs": len(self.paragraphs),
            "cohesion": self.cohesion,
        }


def _plausible_title(text: str) -> bool:
    words = text.split()
    return (
        0 < len(words) <= _MAX_TITLE_WORDS
        and len(text) <= _MAX_TITLE_CHARS
        and not text.endswith((".", ",", ";"))
    )


def detect_heading(line: str) -> Heading | None:
    """The heading a single line is (Markdown, numbered or ALL-CAPS), or None."""
    md = _MD.match(line)
    if md:
        text = md.group(2).strip()
        return Heading(text, len(md.group(1)), "markdown") if text else None
    stripped = line.strip()
    num = _NUMBERED.match(stripped)
    if num:
        number = num.group(1) or num.group(3)
        title = (num.group(2) or num.group(4)).strip()
        first = title[0]
        if (
            (first.isupper() or first.isdigit())
            and _plausible_title(title)
            and not title.endswith(":")
        ):
            return Heading(stripped, number.count(".") + 1, "numbered")
        return None
    words = stripped.split()
    if (
        3 <= len(words) <= 10
        and any(c.isalpha() for c in stripped)
        and not any(c.islower() for c in stripped)
        and not _BREAK.match(stripped)
    ):
        return Heading(stripped, 1, "caps")
    return None


def _normalise(text: str) -> list[str]:
    text = text.lstrip("\ufeff").replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n\n")
    lines = text.split("\n")
    if lines and lines[0].strip() == "---":  # YAML front matter: not part of the text
        for end in range(1, len(lines)):
            if lines[end].strip() in ("---", "..."):
                return lines[end + 1 :]
    return lines


def _sections(text: str) -> list[tuple[Heading | None, tuple[str, ...], list[str]]]:
    """Every section, empty ones included: (heading, heading path, paragraphs)."""
    sections: list[tuple[Heading | None, tuple[str, ...], list[str]]] = [(None, (), [])]
    stack: list[tuple[int, str]] = []
    para: list[str] = []
    in_fence = False

    def flush(lines: list[str]) -> None:
        joined = " ".join(" ".join(lines).split())
        if len(joined) >= MIN_PARAGRAPH:
            sections[-1][2].append(joined)
        lines.clear()

    def open_section(heading: Heading) -> None:
        while stack and stack[-1][0] >= heading.level:
            stack.pop()
        stack.append((heading.level, heading.text))
        sections.append((heading, tuple(t for _, t in stack), []))

    for raw in _normalise(text):
        stripped = raw.strip()
        if _FENCE.match(raw):
            in_fence = not in_fence
            continue
        if in_fence:
            if stripped:
                para.append(stripped)
            continue
        if not stripped:
            flush(para)
            continue
        if _UNDERLINE.match(stripped) and para and _plausible_title(para[-1]):
            title = para.pop()
            flush(para)
            open_section(Heading(title, 1 if stripped[0] == "=" else 2, "underline"))
            continue
        if _UNDERLINE.match(stripped) or _BREAK.match(stripped):
            flush(para)
            continue
        heading = detect_heading(raw)
        if heading is not None:
            flush(para)
            open_section(heading)
            continue
        para.append(stripped)
    flush(para)
    return sections


def title(text: str) -> str | None:
    """The document's title: its first heading, when that is a level-1 ``#`` or ``===`` one."""
    for heading, _, _ in _sections(text):
        if heading is not None:
            if heading.level == 1 and heading.style in ("markdown", "underline"):
                return heading.text
            return None
    return None


def segment(text: str) -> list[Segment]:
    """The document's sections, in order (see the module docstring for the rules)."""
    out: list[Segment] = []
    for heading, path, paragraphs in _sections(text):
        if paragraphs:
            out.append(Segment(len(out), heading, path, tuple(paragraphs)))
    return out


def split_units(paragraphs: tuple[str, ...]) -> list[tuple[str, ...]]:
    """Consecutive chunks of at most 5 paragraphs, cut where cohesion is weakest."""
    if not paragraphs:
        return []
    out: list[tuple[str, ...]] = []
    start = 0
    for size in cut_points(adjacent_cohesion(paragraphs)):
        out.append(paragraphs[start : start + size])
        start += size
    return out


def _cue_kind(title: str) -> Kind | None:
    text = " " + " ".join(words_of(title.replace("-", " "))) + " "
    best: tuple[int, Kind] | None = None
    for kind in ("introduction", "methodology", "conclusion"):
        for cue in KIND_CUES[kind]:
            at = text.find(f" {cue} ")
            if at >= 0 and (best is None or at < best[0]):
                best = (at, kind)
    return best[1] if best else None


def _heading_kind(path: tuple[str, ...]) -> Kind | None:
    for title in reversed(path):
        kind = _cue_kind(title)
        if kind is not None:
            return kind
    return None


def segment_document(text: str) -> list[Unit]:
    """The document's units, in order, each with its kind."""
    segments = segment(text)
    has_headings = any(s.heading is not None for s in segments)
    pieces: list[tuple[Segment, int, int, tuple[str, ...]]] = []
    for seg in segments:
        chunks = split_units(seg.paragraphs)
        for part, chunk in enumerate(chunks, 1):
            pieces.append((seg, part, len(chunks), chunk))
    total = len(pieces)
    units: list[Unit] = []
    for index, (seg, part, parts, chunk) in enumerate(pieces):
        kind = _heading_kind(seg.path)
        if kind is None:
            if (seg.heading is None and has_headings) or index == 0:
                kind = "introduction"
            elif index == total - 1 and total >= 3:
                kind = "conclusion"
            else:
                kind = "body"
        units.append(
            Unit(
                index=index,
                segment=seg.index,
                part=part,
                parts=parts,
                heading=seg.heading.text if seg.heading else None,
                path=seg.path,
                kind=kind,
                paragraphs=chunk,
                cohesion=unit_cohesion(adjacent_cohesion(chunk)),
            )
        )
    return units
