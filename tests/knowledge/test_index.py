"""Knowledge collections indexed in SQLite FTS5: formats, passages, incremental, bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from rolecall.errors import WorldError
from rolecall.knowledge.base import KnowledgeBase
from rolecall.knowledge.documents import KnowledgeError
from rolecall.storage.knowledge_index import KnowledgeIndex
from rolecall.world.loader import load_world
from tests.knowledge.pdfs import scanned_pdf, text_pdf

BOTANY = """# Photosynthesis

Plants make sugar from light, water and carbon dioxide.
Chlorophyll absorbs red and blue light and reflects green,
which is why leaves look green.

# Roots

Roots take up water and minerals from the soil.
Root hairs increase the surface area for absorption.
"""

HTML = """<html><head><title>Soil</title><style>p { color: red }</style></head>
<body>
<h1>Soil life</h1>
<p>Earthworms aerate the soil
and mix organic matter into it.</p>
<script>var earthworms = 1;</script>
</body></html>
"""


def world_with(folder: Path, paths: list[str], *, extra: str = "") -> Path:
    (folder / "world.yaml").write_text(
        "name: k\ntopic: plants\nknowledge:\n  botany:\n    paths: ["
        + ", ".join(paths)
        + "]\nroles:\n  - id: professor\n    knowledge: [botany]\n"
        + extra
    )
    return folder / "world.yaml"


def test_every_format_is_indexed_with_line_ranges(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "botany.md").write_text(BOTANY)
    (docs / "notes.txt").write_text("line one\n\nMoss has no true roots; rhizoids anchor it.\n")
    (docs / "soil.html").write_text(HTML)
    (docs / "seeds.pdf").write_bytes(
        text_pdf(["Seeds germinate when water", "reaches the embryo."])
    )
    (docs / ".hidden.md").write_text("secret photosynthesis")
    (docs / "image.png").write_bytes(b"\x89PNG")
    world = load_world(world_with(tmp_path, ["docs/"])).world
    with KnowledgeBase.open(world, tmp_path / "knowledge.db", tmp_path) as kb:
        assert sorted(Path(p).name for p in kb.report.indexed) == [
            "botany.md",
            "notes.txt",
            "seeds.pdf",
            "soil.html",
        ]
        found = kb.search(["botany"], "why do leaves look green?", 2)
        assert found[0].source == "docs/botany.md:1-5"
        assert found[0].heading == "Photosynthesis"
        assert "Chlorophyll absorbs red and blue light" in found[0].text
        roots = kb.search(["botany"], "root hairs absorption", 1)[0]
        assert roots.source == "docs/botany.md:7-10"
        html = kb.search(["botany"], "earthworms", 4)
        assert [p.source for p in html] == ["docs/soil.html:3-5"]  # not the script
        assert kb.search(["botany"], "germinate", 1)[0].source == "docs/seeds.pdf:1-2"
        assert (
            kb.search(["botany"], "rhizoids", 1)[0].source == "docs/notes.txt:1-3"
        )  # paragraphs gathered
        assert kb.search(["botany"], "the and of", 4) == []  # nothing searchable
        assert kb.search(["botany"], "secret", 4) == []  # hidden files are left out


def test_long_documents_make_passages_of_a_few_hundred_words(tmp_path: Path) -> None:
    paragraphs = [
        " ".join(f"word{p}x{i}" for i in range(60)) for p in range(20)
    ]  # 1,200 words, 20 paragraphs
    (tmp_path / "long.md").write_text("\n\n".join(paragraphs) + "\n")
    world = load_world(world_with(tmp_path, ["long.md"])).world
    with KnowledgeBase.open(world, None, tmp_path) as kb:
        assert kb.report.passages == 7  # 180 words (3 paragraphs) each, then the rest
        hit = kb.search(["botany"], "word7x3", 1)[0]
        assert hit.source == "long.md:13-17"  # paragraphs 6-8 (lines 11, 13, 15 ...)
        assert len(hit.text.split()) == 180


def test_unchanged_files_are_not_read_again(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text(BOTANY)
    (tmp_path / "b.md").write_text("Ferns reproduce with spores.\n")
    path = world_with(tmp_path, ["a.md", "b.md"])
    db = tmp_path / "knowledge.db"
    world = load_world(path).world
    with KnowledgeBase.open(world, db, tmp_path) as kb:
        assert len(kb.report.indexed) == 2
    with KnowledgeBase.open(world, db, tmp_path) as kb:
        assert kb.report.indexed == [] and len(kb.report.unchanged) == 2
    (tmp_path / "b.md").write_text("Ferns reproduce with spores and horsetails too.\n")
    with KnowledgeBase.open(world, db, tmp_path) as kb:
        assert [Path(p).name for p in kb.report.indexed] == ["b.md"]
        assert kb.search(["botany"], "horsetails", 1)[0].path == "b.md"
        assert kb.index.counts() == (2, 3)  # b.md's old passage is gone


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("bad.md", b"text\x00\x01binary", "a binary file, not text"),
        ("bad.txt", b"caf\xe9 au lait\n", "not UTF-8 text: byte 0xe9 at line 1, column 4"),
        ("bad.pdf", scanned_pdf(), "the PDF has no text layer"),
        ("bad.pdf", b"%PDF-1.4 garbage", "not a readable PDF"),
    ],
)
def test_a_bad_file_is_named_and_nothing_is_indexed(
    tmp_path: Path, name: str, content: bytes, problem: str
) -> None:
    (tmp_path / "good.md").write_text(BOTANY)
    (tmp_path / name).write_bytes(content)
    world = load_world(world_with(tmp_path, ["good.md", name])).world
    db = tmp_path / "knowledge.db"
    with pytest.raises(KnowledgeError) as caught:
        KnowledgeBase.open(world, db, tmp_path)
    assert str(caught.value).startswith(f"{tmp_path / name}: {problem}")
    index = KnowledgeIndex(db)
    assert index.counts() == (0, 0)  # good.md was not indexed either: all or nothing
    index.close()


def test_an_empty_collection_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "picture.png").write_bytes(b"\x89PNG")
    world = load_world(world_with(tmp_path, ["docs"])).world
    with pytest.raises(KnowledgeError, match=r"knowledge.botany: the collection is empty: no "):
        KnowledgeBase.open(world, None)
    (tmp_path / "docs" / "blank.md").write_text("\n\n   \n")
    with pytest.raises(KnowledgeError, match=r"the collection is empty: no text in .*blank.md"):
        KnowledgeBase.open(world, None)


def test_a_missing_path_is_an_error(tmp_path: Path) -> None:
    world = load_world(world_with(tmp_path, ["nowhere.md"])).world
    with pytest.raises(KnowledgeError, match=r"knowledge.botany: .*nowhere.md: no such file"):
        KnowledgeBase.open(world, None)


@pytest.mark.parametrize(
    ("entry", "problem"),
    [
        ("/etc/passwd", "knowledge.botany.paths[0]: absolute path '/etc/passwd'"),
        ("../secret.md", "knowledge.botany.paths[0]: '../secret.md' leaves the world folder"),
        ("~/notes.md", "knowledge.botany.paths[0]: '~/notes.md': '~' is not expanded"),
        ("link/x.md", "knowledge.botany.paths[0]: 'link/x.md' leads outside the world folder"),
    ],
)
def test_a_world_file_reads_nothing_outside_its_folder(
    tmp_path: Path, entry: str, problem: str
) -> None:
    world = tmp_path / "w"
    world.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "x.md").write_text("secret")
    (world / "link").symlink_to(tmp_path / "outside")
    path = world_with(world, [f"'{entry}'"])
    with pytest.raises(WorldError) as caught:
        load_world(path)
    assert any(p.startswith(problem) for p in caught.value.problems), caught.value.problems


def test_a_link_out_of_a_collection_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "ok.md").write_text(BOTANY)
    (tmp_path / "secret.md").write_text("the password is swordfish")
    (tmp_path / "docs" / "leak.md").symlink_to(tmp_path / "secret.md")
    world = load_world(world_with(tmp_path, ["docs"])).world
    with pytest.raises(KnowledgeError, match=r"leak.md: a symbolic link leading outside"):
        KnowledgeBase.open(world, None)
