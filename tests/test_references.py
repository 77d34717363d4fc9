"""What the code's comments and the docs point to exists.

A reader who follows ``(sessions.md, Persistence)`` in a docstring, a module path in
docs/architecture.md or ``rolecall.llm.offline.compose`` in a comment must find it: a page
under docs/, a file of the repository, an importable module and attribute.
"""

from __future__ import annotations

import ast
import importlib
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src" / "rolecall"
DOCS = ROOT / "docs"

# file names that the code uses as examples of a user's own documents, not pages
EXAMPLE_FILES = {"notes.md", "lesson.md", "brief.md", "README.md"}
# dotted names that are not modules: the database file, the plugins' entry-point group
NOT_MODULES = {"rolecall.db", "rolecall.models"}
PAGE = re.compile(r"(?<![\w/.-])(?:docs/)?([a-z][a-z_-]*\.md)\b")
DOTTED = re.compile(r"(?<![\w.])rolecall(?:\.[A-Za-z_]\w*)+")


def _prose(path: Path) -> list[tuple[int, str]]:
    """The comments and docstrings of a module, with their line numbers."""
    text = path.read_text(encoding="utf-8")
    found = [
        (tok.start[0], tok.string)
        for tok in tokenize.generate_tokens(io.StringIO(text).readline)
        if tok.type == tokenize.COMMENT
    ]
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc and node.body:
                found.append((node.body[0].lineno, doc))
    return found


def _resolves(dotted: str) -> bool:
    """Whether ``rolecall.a.b.c`` names a module, or an attribute of one."""
    parts = dotted.rstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_every_page_and_module_the_code_names_exists() -> None:
    broken = []
    for path in sorted(SRC.rglob("*.py")):
        for line, text in _prose(path):
            where = f"{path.relative_to(ROOT)}:{line}"
            for page in PAGE.findall(text):
                if page not in EXAMPLE_FILES and not (DOCS / page).is_file():
                    broken.append(f"{where}: {page} is not a page of docs/")
            for dotted in DOTTED.findall(text):
                if path.name == "tracing.py" and dotted.count(".") == 1:
                    continue  # a span attribute's name (rolecall.session_id), not a module
                if dotted not in NOT_MODULES and not _resolves(dotted):
                    broken.append(f"{where}: {dotted} names nothing importable")
    assert broken == []


def _links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", sorted(DOCS.glob("*.md")), ids=lambda p: p.name)
def test_every_link_of_a_page_leads_to_a_file(page: Path) -> None:
    missing = [
        link for link in _links(page) if "://" not in link and not (page.parent / link).exists()
    ]
    assert missing == []


def test_every_path_architecture_md_names_exists() -> None:
    text = (DOCS / "architecture.md").read_text(encoding="utf-8")
    # a path in backticks, unless it is one a how-to asks you to write: `x.py` (new)
    named = set(re.findall(r"`([\w./-]+(?:\.py|\.toml|/))`(?! \(new\))", text))
    table = text.split("```")[1]  # the layers, each row starting with its modules
    named |= set(re.findall(r"^([\w/]+(?:\.py|/))", table, flags=re.M))
    missing = [
        name
        for name in sorted(named)
        if not any((base / name).exists() for base in (SRC, ROOT, ROOT / "tests"))
    ]
    assert named and missing == []
