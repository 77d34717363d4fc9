"""Reading a study document: the only I/O of :mod:`rolecall.study`.

TXT and Markdown (``.txt``, ``.text``, ``.md``, ``.markdown``) are read as UTF-8; PDF
(``.pdf``) through pypdf's text layer (layout mode, which keeps the blank lines between
paragraphs; plain mode when layout fails), imported only when a PDF is read. Pages are
joined with a blank line; a page with columns may come out with its columns interleaved.

A document named by a world file is resolved inside the world folder: absolute paths,
``..`` parts and symbolic links that lead outside it are refused, so a world file can
never make the runtime read anything outside its own folder.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Final, Literal

from rolecall.errors import NotTextError
from rolecall.paths import decode_text

__all__ = [
    "PDF_SUFFIXES",
    "TEXT_SUFFIXES",
    "Document",
    "DocumentError",
    "check_relative",
    "read_document",
    "resolve_in_folder",
]

TEXT_SUFFIXES: Final = (".txt", ".text", ".md", ".markdown")
PDF_SUFFIXES: Final = (".pdf",)
Format = Literal["text", "markdown", "pdf"]


class DocumentError(Exception):
    """The document cannot be used; the message says why and what to do."""


@dataclass(frozen=True)
class Document:
    name: str
    format: Format
    text: str
    pages: int | None = None


def check_relative(name: str) -> str | None:
    """Why ``name`` is not a safe path relative to a world folder, or None when it is."""
    if not name.strip():
        return "empty path"
    if "\x00" in name:
        return "a path may not contain NUL characters"
    if (
        PurePosixPath(name).is_absolute()
        or PureWindowsPath(name).is_absolute()
        or (PureWindowsPath(name).drive)
    ):
        return f"absolute path {name!r} (give a path relative to the world folder)"
    parts = PurePosixPath(name.replace("\\", "/")).parts
    if ".." in parts:
        return f"{name!r} leaves the world folder ('..' is not allowed)"
    if name.startswith("~"):
        return f"{name!r}: '~' is not expanded (give a path relative to the world folder)"
    return None


def resolve_in_folder(folder: Path, name: str) -> Path:
    """``folder / name``, refusing anything that could lead outside ``folder``."""
    problem = check_relative(name)
    if problem is not None:
        raise DocumentError(problem)
    root = folder.resolve()
    target = (root / name.replace("\\", "/")).resolve()
    if not target.is_relative_to(root):
        raise DocumentError(f"{name!r} leads outside the world folder (a symbolic link?)")
    return target


def read_document(path: Path, *, name: str | None = None) -> Document:
    """The document's text. Raises :class:`DocumentError` with a clear message."""
    shown = name or str(path)
    suffix = path.suffix.lower()
    if path.is_dir():
        raise DocumentError(f"{shown}: a folder, not a document (give a file)")
    if suffix not in TEXT_SUFFIXES + PDF_SUFFIXES:
        known = ", ".join(TEXT_SUFFIXES + PDF_SUFFIXES)
        raise DocumentError(f"{shown}: unsupported document type {suffix or '(none)'!r} ({known})")
    if not path.exists():
        raise DocumentError(f"{shown}: no such file")
    if not path.is_file():
        raise DocumentError(f"{shown}: not a file")
    if suffix in PDF_SUFFIXES:
        return _read_pdf(path, shown)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise DocumentError(f"{shown}: cannot read ({exc.strerror})") from None
    try:
        text = decode_text(data, shown, "utf-8-sig")
    except NotTextError as exc:
        raise DocumentError(str(exc)) from None
    fmt: Format = "markdown" if suffix in (".md", ".markdown") else "text"
    if not text.strip():
        raise DocumentError(f"{shown}: the document is empty")
    return Document(shown, fmt, text)


def _page_text(page: Any) -> str:
    """A page's text layer; layout mode keeps blank lines between paragraphs."""
    try:
        text = page.extract_text(extraction_mode="layout")
    except Exception:  # layout mode is stricter about fonts: fall back to plain mode
        text = ""
    if not isinstance(text, str) or not text.strip():
        text = page.extract_text() or ""
    return str(text)


def _read_pdf(path: Path, shown: str) -> Document:
    try:
        from pypdf import PdfReader
    except ModuleNotFoundError:  # pragma: no cover - pypdf is a dependency
        raise DocumentError(f"{shown}: reading PDF needs the pypdf package") from None
    try:
        with path.open("rb") as handle:
            if handle.read(5) != b"%PDF-":
                raise DocumentError(f"{shown}: not a PDF file (no %PDF- header)")
        reader = PdfReader(path)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentError(f"{shown}: the PDF is encrypted; give an unencrypted copy")
        pages = [_page_text(page) for page in reader.pages]
    except DocumentError:
        raise
    except Exception as exc:  # pypdf raises many kinds of errors on a malformed file
        raise DocumentError(f"{shown}: unreadable PDF ({type(exc).__name__}: {exc})") from None
    text = "\n\n".join(p.strip("\n") for p in pages)
    if not text.strip():
        raise DocumentError(
            f"{shown}: the PDF has no text layer ({len(pages)} page(s) of images only?); "
            "run OCR on it first (e.g. ocrmypdf) or give a TXT/Markdown version"
        )
    return Document(shown, "pdf", text, pages=len(pages))
