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
