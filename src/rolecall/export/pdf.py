"""A stored session as a PDF document (``sessions export --format pdf``), through fpdf2.

fpdf2 is pure Python (the optional extra ``rolecall[pdf]``); the text is set in a Unicode
TrueType font, DejaVu Sans from Debian's ``fonts-dejavu-core`` (or the font named by
``ROLECALL_PDF_FONT``), so names and messages in any script the font covers print as
written; characters it lacks are left out, never an error. Shows what the other
exports show: the title, world, topic and status, then each message with who answers
whom, its step and loop iteration, the message it answers and its tokens.

Text in a script that needs shaping (Hebrew and Arabic, written right to left and, for
Arabic, with letters joined; the Indic, Thai and other complex scripts) is set through
fpdf2's text shaping, HarfBuzz (``uharfbuzz``, part of the extra): the bidirectional
algorithm puts the words in reading order and the letters take their joined forms.
Without uharfbuzz such text would print reversed and unjoined: the export still writes
the file and warns (the ``warn`` callback) naming the scripts and the fix.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from pathlib import Path

from rolecall.errors import UsageError
from rolecall.export.common import (
    answered,
    private_label,
    select,
    sender_label,
    step_label,
    target_of,
    tokens_label,
    visible,
    when_label,
)
from rolecall.export.common import doc_labels as labels_of
from rolecall.export.common import status as status_of
from rolecall.export.common import title as title_of
from rolecall.storage.document import SessionDocument

FONT_ENV = "ROLECALL_PDF_FONT"
FONT_DIRS = (
    Path("/usr/share/fonts/truetype/dejavu"),  # Debian, Ubuntu: fonts-dejavu-core
    Path("/usr/share/fonts/dejavu"),  # Fedora, Arch
    Path("/usr/share/fonts/TTF"),
)
INSTALL = "pip install 'rolecall[pdf]'"


def font_files() -> tuple[Path, Path]:
    """The regular and bold TrueType fonts to use; a usage error saying how to get one."""
    chosen = os.environ.get(FONT_ENV)
    if chosen:
        path = Path(chosen).expanduser()
        if not path.is_file():
            raise UsageError(f"{FONT_ENV}={chosen}: no such font file")
        return path, path
    for folder in FONT_DIRS:
        regular, bold = folder / "DejaVuSans.ttf", folder / "DejaVuSans-Bold.ttf"
        if regular.is_file():
            return regular, bold if bold.is_file() else regular
    raise UsageError(
        "the PDF export needs a Unicode TrueType font: install DejaVu Sans "
        f"(`apt-get install fonts-dejavu-core`) or set {FONT_ENV}=/path/to/font.ttf"
    )


# the scripts fpdf2 sets wrongly without a shaping engine, by the blocks they use
_NEEDS_SHAPING = (
    ("Hebrew", re.compile(r"[\u0590-\u05ff\ufb1d-\ufb4f]")),
    ("Arabic", re.compile(r"[\u0600-\u06ff\u0750-\u077f\u08a0-\u08ff\ufb50-\ufdff\ufe70-\ufeff]")),
    ("Syriac, Thaana or N'Ko", re.compile(r"[\u0700-\u074f\u0780-\u07ff]")),
    ("an Indic script", re.compile(r"[\u0900-\u0dff]")),
    ("Thai, Lao, Tibetan, Myanmar or Khmer", re.compile(r"[\u0e00-\u109f\u1780-\u17ff]")),
)


def scripts_needing_shaping(texts: list[str]) -> list[str]:
    """The names of the scripts in ``texts`` that print right only when shaped."""
    return [name for name, chars in _NEEDS_SHAPING if any(chars.search(t) for t in texts)]


def _shaping_engine() -> bool:
    try:
        importlib.import_module("uharfbuzz")  # what fpdf2's text shaping uses
    except ImportError:
        return False
    return True


def to_pdf(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    seen_by: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> bytes:
    """The session as a PDF document; ``warn`` is told what could not be set right."""
    try:
        from fpdf import FPDF
    except ModuleNotFoundError:
        raise UsageError(f"the PDF export needs fpdf2: {INSTALL}") from None
    regular, bold = font_files()
    sel = select(doc, role=role, search=search, seen_by=seen_by)
    shown = [title_of(doc), str(doc.world.get("topic") or "")]
    shown += [m.content for m in sel.messages] + [d.content for d in sel.drafts]
    shown += [m.sender for m in sel.messages]
    scripts = scripts_needing_shaping(shown)
    pdf = FPDF(format="A4")
    pdf.set_title(title_of(doc))
    pdf.set_creator("rolecall")
    pdf.add_font("body", "", str(regular))
    pdf.add_font("body", "B", str(bold))
    pdf.set_auto_page_break(auto=True, margin=15)
    if scripts and _shaping_engine():
        pdf.set_text_shaping(use_shaping_engine=True)  # bidi order, joined letters
    elif scripts and warn is not None:
        warn(
            f"the PDF holds {' and '.join(scripts)} text, which prints reversed or with "
            "its letters unjoined without a text shaping engine: install uharfbuzz "
            f"({INSTALL}, or `pip install uharfbuzz`) and export again"
        )
    pdf.add_page()
    width = pdf.epw

    def para(text: str, size: float, style: str = "", gap: float = 1.5) -> None:
        pdf.set_font("body", style, size)
        pdf.multi_cell(width, size * 0.5, visible(text), new_x="LMARGIN", new_y="NEXT")
        pdf.ln(gap)

    para(title_of(doc), 16, "B", 3)
    world = doc.world
    facts = [f"World: {world.get('name', '?')}"]
    if world.get("topic"):
        facts.append(f"Topic: {world['topic']}")
    facts += [
        f"Session: {doc.session_id}",
        f"Created: {when_label(doc.created_at)} · Updated: {when_label(doc.updated_at)}",
        f"Status: {status_of(doc)}",
        sel.describe(),
    ]
    para("\n".join(facts), 9, gap=4)
    labels = labels_of(doc)
    texts = {m.id: m.content for m in doc.messages}
    for m in sel.messages:
        target = target_of(doc, m)
        who = sender_label(labels, m) + (f" → {target}" if target else "")
        if m.audience is not None:  # audiences.md
            who += f" ({private_label(m)})"
        head = [f"{m.id} · {who}"]
        where = step_label(m.step_id, m.loop_iteration)
        if where:
            head.append(where)
        if m.reply_to:
            head.append(answered(m.reply_to, texts.get(m.reply_to)))
        if tokens_label(m):
            head.append(tokens_label(m))
        para("  ·  ".join(head), 9, "B", 0.5)
        para(m.content or " ", 10, gap=3)
    if sel.drafts:
        para("Drafts (incomplete; not part of the history)", 11, "B", 2)
        for d in sel.drafts:
            para(f"{d.id} · {d.sender} ({d.reason})", 9, "B", 0.5)
            para(d.content or " ", 10, gap=3)
    return bytes(pdf.output())
