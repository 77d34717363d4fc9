"""The knowledge index (knowledge.md): documents' passages in SQLite FTS5, ranked by BM25.

It lives in the data directory beside the session store, in its own file
(``knowledge.db``), so indexing a world's documents never waits for (or holds up) a
session's turn; without a data directory it is kept in memory. The schema:

- ``kdocs``: one row per indexed file (its absolute path, the sha256 of its bytes, and
  its ``stamp``: size, modification and change times and inode as last seen, so a file
  whose stamp is unchanged is known unchanged from a ``stat``, without reading it);
- ``kpassages``: its passages (the line range of each in the file);
- ``kfts``: the FTS5 index of the passages' heading and text, rowid = ``kpassages.id``.

Every change of a sync is written in one transaction (:meth:`KnowledgeIndex.replace`):
a failure leaves the index as it was. Reads and writes are synchronous: a search is a
few milliseconds, less than handing it to a thread would cost.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from rolecall.errors import StorageError

__all__ = ["DocRow", "IndexedPassage", "KnowledgeIndex", "NewPassage", "SearchRow"]

_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS kdocs (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    splitter TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    passages INTEGER NOT NULL,
    indexed_at TEXT NOT NULL,
    stamp TEXT NOT NULL DEFAULT ''
);
CREATE TABLE IF NOT EXISTS kpassages (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES kdocs(id) ON DELETE CASCADE,
    line_start INTEGER NOT NULL,
    line_end INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS kpassages_doc ON kpassages (doc_id);
CREATE VIRTUAL TABLE IF NOT EXISTS kfts USING fts5(
    heading, text, tokenize = 'porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE IF NOT EXISTS kvocab USING fts5vocab(kfts, 'row');
-- how many passages hold each (stemmed) term, as of the last write: a search leaves
-- out the terms so common that ranking every passage holding them would be slow
CREATE TABLE IF NOT EXISTS kterms (term TEXT PRIMARY KEY, passages INTEGER NOT NULL)
    WITHOUT ROWID;
"""
_VERSION: Final = 1  # PRAGMA user_version of a knowledge.db this code writes
# added to kdocs after version 1 was written (an older rolecall leaves it '', which only
# means the file is read and hashed to be checked)
_ADDED: Final = ("ALTER TABLE kdocs ADD COLUMN stamp TEXT NOT NULL DEFAULT ''",)


@dataclass(frozen=True, slots=True)
class NewPassage:
    """A passage to index: its lines ``line_start``..``line_end`` (1-based, inclusive)."""

    line_start: int
    line_end: int
    heading: str
    text: str


@dataclass(frozen=True, slots=True)
class IndexedPassage:
    """One file's new content: its passages replace whatever the index had of it."""

    path: str
    sha256: str
    splitter: str  # how it was cut into passages (a new way indexes every file again)
    size: int
    passages: Sequence[NewPassage]
    stamp: str = ""  # the file's stat as read ('': unknown, read it again to check)


@dataclass(frozen=True, slots=True)
class DocRow:
    id: int
    path: str
    sha256: str
    splitter: str
    size: int
    passages: int
    indexed_at: str
    stamp: str = ""


@dataclass(frozen=True, slots=True)
class SearchRow:
    passage_id: int
    path: str
    line_start: int
    line_end: int
    heading: str
    text: str
    score: float  # BM25 as FTS5 gives it: lower is better (negative)


class KnowledgeIndex:
    """An open knowledge index (``path`` None: in memory). Close it when done."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        try:
            if path is not None:
                path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(
                str(path) if path is not None else ":memory:",
                isolation_level=None,  # transactions are ours (BEGIN ... COMMIT)
                check_same_thread=False,
            )
            version = db.execute("PRAGMA user_version").fetchone()[0]
            if version > _VERSION:
                db.close()
                raise StorageError(
                    f"the knowledge index {path} has version {version}, newer than this "
                    "rolecall knows; upgrade rolecall or delete the file (it is rebuilt)"
                )
            db.execute("PRAGMA foreign_keys = ON")
            if path is not None:
                db.execute("PRAGMA journal_mode = WAL")
                db.execute("PRAGMA busy_timeout = 10000")
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(kdocs)")}
            if "stamp" not in columns:
                for statement in _ADDED:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version = {_VERSION}")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot open the knowledge index {path}: {exc}") from exc
        self._db = db

    def close(self) -> None:
        self._db.close()

    def docs(self, paths: Iterable[str] | None = None) -> dict[str, DocRow]:
        """The indexed files (of ``paths`` only, when given), by path."""
        rows = self._db.execute(
            "SELECT id, path, sha256, splitter, bytes, passages, indexed_at, stamp "
            "FROM kdocs ORDER BY path"
        ).fetchall()
        wanted = None if paths is None else set(paths)
        return {row[1]: DocRow(*row) for row in rows if wanted is None or row[1] in wanted}

    def replace(
        self,
        changed: Sequence[IndexedPassage],
        removed: Iterable[str] = (),
        stamps: Mapping[str, str] | None = None,
    ) -> None:
        """Index ``changed`` (replacing what each file had), forget ``removed`` and set
        the ``stamps`` of files whose content did not change, in one transaction: on any
        failure nothing changes."""
        db = self._db
        now = datetime.now(UTC).isoformat(timespec="seconds")
        removed = list(removed)
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                for path in [*removed, *(c.path for c in changed)]:
                    self._forget(path)
                for doc in changed:
                    cur = db.execute(
                        "INSERT INTO kdocs "
                        "(path, sha256, splitter, bytes, passages, indexed_at, stamp) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (
                            doc.path,
                            doc.sha256,
                            doc.splitter,
                            doc.size,
                            len(doc.passages),
                            now,
                            doc.stamp,
                        ),
                    )
                    doc_id = cur.lastrowid
                    for p in doc.passages:
                        cur = db.execute(
                            "INSERT INTO kpassages (doc_id, line_start, line_end) VALUES (?, ?, ?)",
                            (doc_id, p.line_start, p.line_end),
                        )
                        db.execute(
                            "INSERT INTO kfts (rowid, heading, text) VALUES (?, ?, ?)",
                            (cur.lastrowid, p.heading, p.text),
                        )
                for path, stamp in (stamps or {}).items():
                    db.execute("UPDATE kdocs SET stamp = ? WHERE path = ?", (stamp, path))
                if changed or removed:
                    db.execute("DELETE FROM kterms")
                    db.execute("INSERT INTO kterms (term, passages) SELECT term, doc FROM kvocab")
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise StorageError(f"cannot write the knowledge index {self.path}: {exc}") from exc

    def _forget(self, path: str) -> None:
        db = self._db
        row = db.execute("SELECT id FROM kdocs WHERE path = ?", (path,)).fetchone()
        if row is None:
            return
        db.execute(
            "DELETE FROM kfts WHERE rowid IN (SELECT id FROM kpassages WHERE doc_id = ?)",
            (row[0],),
        )
        db.execute("DELETE FROM kpassages WHERE doc_id = ?", (row[0],))
        db.execute("DELETE FROM kdocs WHERE id = ?", (row[0],))

    def search(self, match: str, doc_ids: Sequence[int] | None, limit: int) -> list[SearchRow]:
        """The ``limit`` best passages for the FTS5 query ``match`` (BM25, the heading
        weighing twice the text), among the files ``doc_ids`` (every file when None)."""
        where = ""
        params: list[object] = [match]
        if doc_ids is not None:
            if not doc_ids:
                return []
            where = f" AND p.doc_id IN ({','.join('?' * len(doc_ids))})"
            params.extend(doc_ids)
        params.append(limit)
        try:
            rows = self._db.execute(
                "SELECT p.id, d.path, p.line_start, p.line_end, f.heading, f.text, "
                "bm25(kfts, 2.0, 1.0) AS score "
                "FROM kfts f JOIN kpassages p ON p.id = f.rowid JOIN kdocs d ON d.id = p.doc_id "
                f"WHERE kfts MATCH ?{where} ORDER BY score LIMIT ?",
                params,
            ).fetchall()
        except sqlite3.Error as exc:
            raise StorageError(f"cannot search the knowledge index {self.path}: {exc}") from exc
        return [SearchRow(*row) for row in rows]

    def term_passages(self, terms: Sequence[str]) -> dict[str, int]:
        """How many passages hold each of ``terms`` (stemmed as the index stems them);
        a term no passage holds is left out."""
        if not terms:
            return {}
        rows = self._db.execute(
            f"SELECT term, passages FROM kterms WHERE term IN ({','.join('?' * len(terms))})",
            list(terms),
        ).fetchall()
        return {str(term): int(n) for term, n in rows}

    def counts(self) -> tuple[int, int]:
        """(files, passages) indexed."""
        files = self._db.execute("SELECT COUNT(*) FROM kdocs").fetchone()[0]
        passages = self._db.execute("SELECT COUNT(*) FROM kpassages").fetchone()[0]
        return int(files), int(passages)
