"""`sessions export --format pdf` (issue 15): a real PDF, read back with pypdf."""

from __future__ import annotations

import json
from pathlib import Path

from pypdf import PdfReader

from tests.cli.test_run_cli import rolecall

WORLD = {
    "name": "scripts",
    "title": "Écritures · Письмо · 書き方",
    "topic": "alphabets",
    "model": "scripted",
    "roles": [
        {"id": "ana", "script": ["Ça va très bien — Привет, мир! Καλημέρα. 你好，世界。"]},
        {"id": "bo", "script": ["Answering {target}: plain words here."]},
    ],
    "flow": {"steps": [{"id": "one", "speaker": "ana"}, {"id": "two", "speaker": "bo"}]},
}


def test_a_session_exports_to_a_pdf_that_holds_its_messages(tmp_path: Path) -> None:
    world = tmp_path / "scripts"
    world.mkdir()
    (world / "world.yaml").write_text(json.dumps(WORLD), encoding="utf-8")
    data = str(tmp_path / "data")
    assert rolecall("run", str(world), "--data-dir", data, "-q").returncode == 0
    out = tmp_path / "session.pdf"
    done = rolecall(
        "sessions", "export", "last", "--format", "pdf", "--out", str(out), "--data-dir", data
    )
    assert done.returncode == 0, done.stderr
    assert "as pdf to" in done.stderr + done.stdout
    assert out.read_bytes().startswith(b"%PDF-")
    reader = PdfReader(out)
    text = "\n".join(page.extract_text() for page in reader.pages)
    assert "Answering ana: plain words here." in text
    assert "Ça va très bien" in text and "Привет, мир!" in text and "Καλημέρα" in text
    assert "m2 · bo → ana" in text and '↩ m1 "' in text
    assert reader.metadata is not None and reader.metadata.title == WORLD["title"]


def test_pdf_needs_an_output_file(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    assert rolecall("run", "tutoring", "--data-dir", data, "-q").returncode == 0
    done = rolecall("sessions", "export", "last", "--format", "pdf", "--data-dir", data)
    assert done.returncode == 2
    assert "--format pdf writes a file: give --out FILE.pdf" in done.stderr


HEBREW = "שלום עולם"
ARABIC = "بيت كبير"
RTL_WORLD = {
    "name": "rtl",
    "topic": "right to left",
    "model": "scripted",
    "roles": [
        {"id": "dan", "script": [f"Hello {HEBREW} end"]},
        {"id": "sami", "script": [ARABIC]},
    ],
    "flow": {"steps": [{"id": "one", "speaker": "dan"}, {"id": "two", "speaker": "sami"}]},
}


def _rtl_export(tmp_path: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    world = tmp_path / "rtl"
    world.mkdir()
    (world / "world.yaml").write_text(json.dumps(RTL_WORLD), encoding="utf-8")
    data = str(tmp_path / "data")
    assert rolecall("run", str(world), "--data-dir", data, "-q").returncode == 0
    out = tmp_path / "rtl.pdf"
    done = rolecall(
        "sessions", "export", "last", "--format", "pdf", "--out", str(out), "--data-dir", data,
        env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out, done.stderr


def _glyph_names(path: Path) -> set[str]:
    """The names of the glyphs the PDF's embedded fonts hold (the subset it uses)."""
    import io

    from fontTools.ttLib import TTFont

    names: set[str] = set()
    for page in PdfReader(path).pages:
        for font in page["/Resources"]["/Font"].values():
            cid = font.get_object()["/DescendantFonts"][0].get_object()
            data = cid["/FontDescriptor"].get_object()["/FontFile2"].get_object().get_data()
            names.update(TTFont(io.BytesIO(data)).getGlyphOrder())
    return names


def test_hebrew_reads_in_order_and_arabic_letters_join(tmp_path: Path) -> None:
    """Unshaped, the glyphs went left to right in logical order (a reader sees Hebrew
    and Arabic reversed: pypdf reads them back reversed) and Arabic letters kept their
    isolated forms. Shaped, the text reads back as written and the Arabic letters are
    set in their joined (initial, medial, final) forms."""
    out, stderr = _rtl_export(tmp_path)
    assert "warning" not in stderr
    text = "\n".join(page.extract_text() for page in PdfReader(out).pages)
    assert HEBREW in text and ARABIC in text, text
    assert HEBREW[::-1] not in text and ARABIC[::-1] not in text
    glyphs = _glyph_names(out)
    joined = {g for g in glyphs if g.startswith("uniFE") and "uniFE70" <= g <= "uniFEFF"}
    assert {"uniFE91", "uniFE92"} <= joined, sorted(glyphs)  # beh, initial and medial


def test_without_a_shaping_engine_the_export_warns(tmp_path: Path) -> None:
    """uharfbuzz missing (shadowed by a module that cannot be imported): the PDF is
    written and a warning names the scripts and how to fix it."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    (blocker / "uharfbuzz.py").write_text("raise ImportError('not installed')\n")
    _, stderr = _rtl_export(tmp_path, env={"PYTHONPATH": str(blocker)})
    assert "warning: the PDF holds Hebrew and Arabic text, which prints reversed" in stderr
    assert "install uharfbuzz" in stderr
