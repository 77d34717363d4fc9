"""Segmentation (modes.md, Study): headings, leading text, short paragraphs, units, kinds;
reading TXT, Markdown and PDF documents (a PDF with a text layer is written by hand)."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import pytest

from rolecall.study.document import DocumentError, read_document, resolve_in_folder
from rolecall.study.segment import detect_heading, segment, segment_document, split_units, title
from tests.conftest import ROOT

HAS_PYPDF = importlib.util.find_spec("pypdf") is not None
needs_pypdf = pytest.mark.skipif(not HAS_PYPDF, reason="pypdf is not installed (pip install pypdf)")

P = "This paragraph is long enough to be kept as text."  # >= 20 characters


def headings(text: str) -> list[tuple[str | None, int | None, str | None]]:
    return [
        (s.heading.text, s.heading.level, s.heading.style) if s.heading else (None, None, None)
        for s in segment(text)
    ]


# ------------------------------------------------------------------ headings
def test_markdown_headings_with_levels_and_paths() -> None:
    text = f"# Title\n\n{P}\n\n## Part one\n\n{P}\n\n### Detail\n\n{P}\n\n## Part two ##\n\n{P}\n"
    assert headings(text) == [
        ("Title", 1, "markdown"),
        ("Part one", 2, "markdown"),
        ("Detail", 3, "markdown"),
        ("Part two", 2, "markdown"),
    ]
    assert [s.path for s in segment(text)] == [
        ("Title",),
        ("Title", "Part one"),
        ("Title", "Part one", "Detail"),
        ("Title", "Part two"),
    ]


def test_hash_without_space_is_not_a_heading() -> None:
    assert detect_heading("#hashtag is not a heading") is None


def test_numbered_headings() -> None:
    text = f"1. Introduction\n{P}\n\n1.1. Background\n{P}\n\n1.2 Scope of the notes\n{P}\n\n2. Results\n{P}"
    assert headings(text) == [
        ("1. Introduction", 1, "numbered"),
        ("1.1. Background", 2, "numbered"),
        ("1.2 Scope of the notes", 2, "numbered"),
        ("2. Results", 1, "numbered"),
    ]


@pytest.mark.parametrize(
    "line",
    [
        "1. mix the flour with the water",  # lowercase: a list item
        "2. Stir until the dough comes together.",  # a sentence
        "3. Then:",  # ends with a colon
        "2021. A year of change",  # not a section number
        "1. One two three four five six seven eight nine ten eleven twelve thirteen",
    ],
)
def test_numbered_lines_that_are_not_headings(line: str) -> None:
    assert detect_heading(line) is None


def test_all_caps_lines_of_3_to_10_words() -> None:
    assert detect_heading("PUTTING IT INTO PRACTICE") is not None
    assert detect_heading("ONE TWO THREE") is not None
    assert detect_heading("A B C D E F G H I J") is not None  # 10 words
    assert detect_heading("NOTE WELL") is None  # 2 words
    assert detect_heading("A B C D E F G H I J K") is None  # 11 words
    assert detect_heading("THIS LINE has lowercase") is None
    assert detect_heading("1 2 3 4") is None  # no letters
    text = f"WHY SPACING WORKS\n{P}\n\nHOW TO START TODAY\n{P}"
    assert headings(text) == [
        ("WHY SPACING WORKS", 1, "caps"),
        ("HOW TO START TODAY", 1, "caps"),
    ]


def test_underlined_headings() -> None:
    text = f"Main Title\n==========\n\n{P}\n\nA Subsection\n---\n{P}\n\nAnother one\n-----------\n\n{P}"
    assert headings(text) == [
        ("Main Title", 1, "underline"),
        ("A Subsection", 2, "underline"),
        ("Another one", 2, "underline"),
    ]
    assert [s.path for s in segment(text)][1] == ("Main Title", "A Subsection")


def test_dashes_after_a_blank_line_or_a_sentence_are_a_break_not_a_heading() -> None:
    text = f"{P}\n\n---\n\nThe second paragraph ends with a full stop.\n---\n\n{P}"
    segs = segment(text)
    assert [s.heading for s in segs] == [None]
    assert segs[0].paragraphs == (P, "The second paragraph ends with a full stop.", P)


def test_nothing_in_a_code_fence_is_a_heading() -> None:
    text = f"# Real\n\n{P}\n\n```\n# not a heading inside code\n```\n"
    assert headings(text) == [("Real", 1, "markdown")]
    assert segment(text)[0].paragraphs == (P, "# not a heading inside code")


def test_front_matter_is_skipped() -> None:
    text = f"---\ntitle: My notes\ntags: [a]\n---\n# Topic\n\n{P}"
    assert headings(text) == [("Topic", 1, "markdown")]


# ------------------------------------------------------------- leading text
def test_text_before_the_first_heading_is_its_own_segment() -> None:
    text = f"{P}\n\nA second opening paragraph, also long.\n\n# First\n\n{P}"
    segs = segment(text)
    assert [s.heading is None for s in segs] == [True, False]
    assert segs[0].paragraphs == (P, "A second opening paragraph, also long.")
    assert segs[0].path == ()
    units = segment_document(text)
    assert units[0].heading is None and units[0].kind == "introduction"


def test_empty_sections_are_dropped() -> None:
    text = f"# Title\n\n## 1. Start\n\n{P}"
    assert headings(text) == [("1. Start", 2, "markdown")]
    assert title(text) == "Title"


# -------------------------------------------------------- short paragraphs
def test_paragraphs_under_20_characters_are_dropped() -> None:
    text = f"# Part\n\nOk, moving on.\n\n{'x' * 19}\n\n{'y' * 20}\n\n{P}\n\nSee   below\nplease."
    segs = segment(text)
    assert segs[0].paragraphs == ("y" * 20, P)  # "See below please." is 17 characters
    only_short = "# Empty\n\ntoo short\n\n# Full\n\n" + P
    assert headings(only_short) == [("Full", 1, "markdown")]


def test_lines_of_a_paragraph_are_joined_with_single_spaces() -> None:
    (seg,) = segment("First line of the paragraph\n   second   line\r\nthird line")
    assert seg.paragraphs == ("First line of the paragraph second line third line",)


# ------------------------------------------------------------------- units
@pytest.mark.parametrize(
    ("count", "sizes"),
    [(1, [1]), (5, [5]), (6, [3, 3]), (7, [4, 3]), (10, [5, 5]), (11, [4, 4, 3]), (12, [4, 4, 4])],
)
def test_evenly_cohesive_paragraphs_make_balanced_units_of_at_most_5(
    count: int, sizes: list[int]
) -> None:
    paragraphs = tuple(f"paragraph number {i:02d} of the section" for i in range(count))
    chunks = split_units(paragraphs)
    assert [len(c) for c in chunks] == sizes
    assert sum(chunks, ()) == paragraphs  # consecutive, nothing lost or reordered


def test_long_section_splits_into_numbered_parts() -> None:
    body = "\n\n".join(f"Paragraph {i} of a long section with enough words." for i in range(12))
    units = segment_document(f"# Long\n\n{body}\n\n# Short\n\n{P}")
    assert [(u.id, u.heading, u.part, u.parts, len(u.paragraphs)) for u in units] == [
        ("u1", "Long", 1, 3, 4),
        ("u2", "Long", 2, 3, 4),
        ("u3", "Long", 3, 3, 4),
        ("u4", "Short", 1, 1, 1),
    ]
    assert all(len(u.paragraphs) <= 5 for u in units)


def test_a_book_length_section_is_cut_into_units_of_at_most_5() -> None:
    """3,000 paragraphs without a heading: 600 units, nothing lost or reordered (the cut
    keeps at most 5 partial cuts a unit: this took minutes and gigabytes before)."""
    paragraphs = tuple(f"paragraph number {i:04d} of the long section" for i in range(3000))
    chunks = split_units(paragraphs)
    assert len(chunks) == 600 and all(len(c) == 5 for c in chunks)
    assert sum(chunks, ()) == paragraphs


TOPIC_A = (
    "Glaciers carve valleys as the glacier ice grinds bedrock; glacier valleys are wide.",
    "A glacier moving downhill plucks bedrock, and glacier ice leaves valleys shaped like U.",
    "Moraines mark where glacier ice stopped, piling bedrock debris along valleys.",
)
TOPIC_B = (
    "Volcanoes erupt when magma pressure rises; volcanic magma carries dissolved gases.",
    "Magma chambers feed volcanoes, and gases escaping the magma drive explosive eruptions.",
    "Lava from volcanoes cools into basalt when magma reaches the surface during eruptions.",
)


def test_a_section_is_cut_where_the_topic_changes() -> None:
    # 3 + 3 paragraphs on two topics: cut between them, not after the fourth paragraph
    # (7 would be 4 + 3 balanced; 6 is cut 3 + 3 here only because of the topics)
    paragraphs = (*TOPIC_A, *TOPIC_B, TOPIC_B[0])
    assert [len(c) for c in split_units(paragraphs)] == [3, 4]
    assert split_units(paragraphs)[0] == TOPIC_A
    # the same paragraphs in the other order: cut after the first topic again
    assert [len(c) for c in split_units((*TOPIC_B, TOPIC_B[1], *TOPIC_A))] == [4, 3]


def test_each_unit_reports_its_cohesion() -> None:
    body = "\n\n".join((*TOPIC_A, *TOPIC_B, TOPIC_B[0]))
    first, second = segment_document(f"# Earth\n\n{body}\n\n# One\n\n{P}")[:2]
    assert 0.3 < first.cohesion <= 1.0 and 0.3 < second.cohesion <= 1.0
    assert first.to_dict()["cohesion"] == first.cohesion
    mixed = "\n\n".join((TOPIC_A[0], TOPIC_B[0], TOPIC_A[1]))
    assert segment_document(f"# Mixed\n\n{mixed}")[0].cohesion == 0.0  # no stem in common
    assert segment_document(f"# One\n\n{P}")[0].cohesion == 1.0


# ------------------------------------------------------------------- kinds
def test_kinds_from_heading_cues() -> None:
    text = (
        f"## 1. Introduction\n\n{P}\n\n## 2. Methods and materials\n\n{P}\n\n"
        f"## 3. The forgetting curve\n\n{P}\n\n## Common misunderstandings\n\n{P}\n\n"
        f"## Summary\n\n{P}\n\n## Further reading\n\n{P}"
    )
    kinds = [(u.heading, u.kind) for u in segment_document(text)]
    assert kinds == [
        ("1. Introduction", "introduction"),
        ("2. Methods and materials", "methodology"),
        ("3. The forgetting curve", "body"),
        ("Common misunderstandings", "body"),
        ("Summary", "conclusion"),
        ("Further reading", "conclusion"),  # no cue: the last unit of the document
    ]


def test_kind_is_inherited_from_the_nearest_heading_with_a_cue() -> None:
    text = (
        f"# Methods\n\n## Sampling\n\n{P}\n\n## Conclusion of the pilot\n\n{P}\n\n# Results\n\n{P}"
    )
    assert [(u.heading, u.kind) for u in segment_document(text)] == [
        ("Sampling", "methodology"),  # from its parent
        ("Conclusion of the pilot", "conclusion"),  # its own cue wins
        ("Results", "conclusion"),  # no cue, last of 3 units
    ]


def test_first_cue_in_reading_order_wins_within_a_heading() -> None:
    text = f"# Background and methods\n\n{P}\n\n# Body\n\n{P}"
    assert segment_document(text)[0].kind == "introduction"


def test_kinds_by_position_without_headings() -> None:
    body = "\n\n".join(f"Paragraph {i} of a document without headings." for i in range(15))
    assert [u.kind for u in segment_document(body)] == ["introduction", "body", "conclusion"]
    two = "\n\n".join(f"Paragraph {i} of a short document here." for i in range(10))
    assert [u.kind for u in segment_document(two)] == ["introduction", "body"]


def test_same_text_same_units() -> None:
    text = (ROOT / "worlds/study/notes.md").read_text("utf-8")
    assert segment_document(text) == segment_document(text)


def test_sample_notes_segments() -> None:
    text = (ROOT / "worlds/study/notes.md").read_text("utf-8")
    units = segment_document(text)
    assert [(u.heading, u.kind, len(u.paragraphs)) for u in units] == [
        (None, "introduction", 1),
        ("1. Introduction", "introduction", 2),
        ("2. Methods: How the Evidence Is Gathered", "methodology", 3),
        # six paragraphs: cut before the last, which shares no stem with the one before it
        ("3. The Forgetting Curve", "body", 5),
        ("3. The Forgetting Curve", "body", 1),
        ("3.1. Why Spacing Helps", "body", 1),
        ("Common Misunderstandings", "body", 1),
        ("PUTTING IT INTO PRACTICE", "body", 1),
        ("Conclusion", "conclusion", 1),
    ]
    assert title(text) == "Spacing Out Practice: How Review Timing Shapes Memory"


# --------------------------------------------------------------- documents
def test_reads_txt_and_markdown_as_utf8(tmp_path: Path) -> None:
    md = tmp_path / "n.md"
    md.write_text("\ufeff# Café\n\nNaïve résumé paragraph text.", encoding="utf-8")
    doc = read_document(md)
    assert doc.format == "markdown" and doc.text.startswith("# Café")
    txt = tmp_path / "n.txt"
    txt.write_bytes(b"plain text document body")
    assert read_document(txt).format == "text"


def test_document_errors_are_clear(tmp_path: Path) -> None:
    with pytest.raises(DocumentError, match="no such file"):
        read_document(tmp_path / "missing.md")
    bad = tmp_path / "latin.txt"
    bad.write_bytes(b"caf\xe9 au lait, not UTF-8")
    with pytest.raises(DocumentError, match="not UTF-8"):
        read_document(bad)
    other = tmp_path / "notes.docx"
    other.write_bytes(b"PK")
    with pytest.raises(DocumentError, match=r"unsupported document type '\.docx'"):
        read_document(other)
    empty = tmp_path / "empty.md"
    empty.write_text("  \n", encoding="utf-8")
    with pytest.raises(DocumentError, match="empty"):
        read_document(empty)


def test_paths_may_not_leave_the_world_folder(tmp_path: Path) -> None:
    world = tmp_path / "world"
    world.mkdir()
    (world / "notes.md").write_text("# A\n\n" + P, encoding="utf-8")
    (tmp_path / "secret.md").write_text("secret", encoding="utf-8")
    assert resolve_in_folder(world, "notes.md") == (world / "notes.md").resolve()
    for name, problem in [
        (str(tmp_path / "secret.md"), "absolute path"),
        ("../secret.md", "leaves the world folder"),
        ("sub/../../secret.md", "leaves the world folder"),
        ("~/secret.md", "not expanded"),
    ]:
        with pytest.raises(DocumentError, match=problem):
            resolve_in_folder(world, name)
    if hasattr(os, "symlink"):
        (world / "link.md").symlink_to(tmp_path / "secret.md")
        with pytest.raises(DocumentError, match="outside the world folder"):
            resolve_in_folder(world, "link.md")


# --------------------------------------------------------------------- PDF
PDF_PAGES = [
    [
        (740, "1. Introduction"),
        (720, "Spaced practice spreads the same study time over several sessions."),
        (706, "It is the alternative to cramming the night before an exam."),
        (680, "A second paragraph says why the timing of review matters."),
        (650, "2. Methods"),
        (630, "Participants learn word pairs and are tested one week later."),
    ],
    [
        (740, "CONCLUSION AND FINAL WORDS"),
        (720, "Spacing works because each retrieval takes a little effort."),
    ],
]


@needs_pypdf
def test_pdf_text_layer_is_extracted_and_segmented(tmp_path: Path) -> None:
    path = tmp_path / "notes.pdf"
    path.write_bytes(make_pdf(PDF_PAGES))
    doc = read_document(path)
    assert doc.format == "pdf" and doc.pages == 2
    assert "Spaced practice spreads the same study time" in doc.text
    units = segment_document(doc.text)
    assert [(u.heading, u.kind) for u in units] == [
        ("1. Introduction", "introduction"),
        ("2. Methods", "methodology"),
        ("CONCLUSION AND FINAL WORDS", "conclusion"),
    ]
    assert units[0].paragraphs[0].startswith("Spaced practice spreads")
    assert units[0].paragraphs[-1] == "A second paragraph says why the timing of review matters."


@needs_pypdf
def test_pdf_without_text_layer_or_broken(tmp_path: Path) -> None:
    scanned = tmp_path / "scan.pdf"
    scanned.write_bytes(make_pdf([[], []]))
    with pytest.raises(DocumentError, match="no text layer"):
        read_document(scanned)
    fake = tmp_path / "fake.pdf"
    fake.write_text("just some text", encoding="utf-8")
    with pytest.raises(DocumentError, match="not a PDF"):
        read_document(fake)
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(b"%PDF-1.4\n1 0 obj\n<< /Type /Catalog")
    with pytest.raises(DocumentError, match="unreadable PDF"):
        read_document(broken)


Line = tuple[int, str]  # (y position in points, text)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def make_pdf(pages: list[list[Line]]) -> bytes:
    """A PDF whose pages show ``pages`` (each line at x=72, y as given) in Helvetica 11.

    An empty list of lines gives a page without any text (no text layer).
    """
    bodies: list[bytes] = [b"", b""]  # 1: catalog, 2: page tree (filled in below)
    bodies.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    font = len(bodies)
    kids: list[int] = []
    for lines in pages:
        ops = ["BT", "/F1 11 Tf"]
        ops += [f"1 0 0 1 72 {y} Tm ({_escape(text)}) Tj" for y, text in lines]
        ops.append("ET")
        stream = "\n".join(ops).encode("latin-1") if lines else b""
        bodies.append(b"<< /Length %d >>\nstream\n%b\nendstream" % (len(stream), stream))
        content = len(bodies)
        bodies.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 %d 0 R >> >> /Contents %d 0 R >>" % (font, content)
        )
        kids.append(len(bodies))
    bodies[0] = b"<< /Type /Catalog /Pages 2 0 R >>"
    refs = b" ".join(b"%d 0 R" % k for k in kids)
    bodies[1] = b"<< /Type /Pages /Kids [%b] /Count %d >>" % (refs, len(kids))
    out = bytearray(b"%PDF-1.4\n")
    offsets: list[int] = []
    for number, body in enumerate(bodies, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n%b\nendobj\n" % (number, body)
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(bodies) + 1)
    out += b"".join(b"%010d 00000 n \n" % off for off in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (
        len(bodies) + 1,
        xref,
    )
    return bytes(out)
