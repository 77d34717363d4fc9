"""A world's knowledge collections, indexed and searchable (knowledge.md).

:meth:`KnowledgeBase.open` resolves each collection's paths to files, reads the files
whose stat changed since they were indexed (a file whose size, times and inode are as
they were is not opened), indexes again those whose content hash changed, cuts them into
passages and writes them all in one transaction; any unusable file (unreadable, binary,
a PDF without text, over the collection's ``max_file_mb``), a collection without text,
or a path that is not there is a :class:`KnowledgeError` naming it, before anything is
written. :meth:`search` ranks the passages of some collections for a query by BM25.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

from rolecall.knowledge.documents import FORMATS, KnowledgeError, read_document
from rolecall.knowledge.passages import SPLITTER, split
from rolecall.storage.knowledge_index import IndexedPassage, KnowledgeIndex
from rolecall.world.models import KnowledgeCollection, World

__all__ = ["KnowledgeBase", "Passage", "SyncReport", "match_query"]


@dataclass(frozen=True, slots=True)
class Passage:
    """A passage found for a query: where it is and how well it matched."""

    path: str  # as shown: relative to the world's folder when inside it
    line_start: int
    line_end: int
    heading: str
    text: str
    score: float  # BM25 relevance, higher is better
    collection: str = ""

    @property
    def lines(self) -> str:
        if self.line_start == self.line_end:
            return str(self.line_start)
        return f"{self.line_start}-{self.line_end}"

    @property
    def source(self) -> str:
        """``path:lines``, as citations show it."""
        return f"{self.path}:{self.lines}"


@dataclass
class SyncReport:
    """What :meth:`KnowledgeBase.open` did: files indexed again, unchanged, forgotten."""

    indexed: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    bytes_read: int = 0  # of the files indexed again
    passages: int = 0
    files_read: int = 0  # files opened (one whose stat is as it was is not)


# words a query is not searched for (they match most passages and rank nothing)
_STOP_WORDS: Final = (
    "a about above after again against all also am an and any are as at be because been "
    "before being below between both but by can could did do does doing down during each "
    "few for from further had has have having he her here hers herself him himself his "
    "how i if in into is it its itself just let me more most my myself no nor not now of "
    "off on once only or other our ours ourselves out over own same she should so some "
    "such than that the their theirs them themselves then there these they this those "
    "through to too under until up very was we were what when where which while who whom "
    "why will with would you your yours yourself yourselves yes please tell think know "
    "say said like well really thing things much many one ones way get got make made us "
    "go going"
)
_STOP: Final = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"[^\W_]+(?:['’][^\W_]+)?", re.UNICODE)
MAX_TERMS: Final = 24


POSTINGS: Final = 1500  # passages a query's terms may hold in all (see match_query)
MIN_SCORE: Final = 0.0005
"""A passage scoring less (shown as 0.000) holds only query words that half the
passages or more hold, which FTS5's BM25 weighs at 1e-6: it is left out when another
passage scores more. When none does (an index of a few passages, where every word is in
half of them), the passages holding the words are all there is to go by, and are kept."""


def query_words(query: str) -> list[str]:
    """The distinct words of free text that are worth searching for (no stop words),
    at most :data:`MAX_TERMS`, in order."""
    terms: list[str] = []
    seen: set[str] = set()
    for word in _WORD.findall(query.lower()):
        base = word.replace("’", "'").split("'")[0]
        if len(base) < 2 or base in _STOP or base in seen:
            continue
        seen.add(base)
        terms.append(base)
        if len(terms) >= MAX_TERMS:
            break
    return terms


@lru_cache(maxsize=1)
def _stemmer() -> Any:
    import snowballstemmer

    return snowballstemmer.stemmer("porter")  # the algorithm of FTS5's porter tokenizer


@lru_cache(maxsize=50_000)
def _stem(word: str) -> str:
    stem: str = _stemmer().stemWord(word)
    return stem


def match_query(query: str, passages_of: Callable[[list[str]], dict[str, int]]) -> str | None:
    """The FTS5 query for free text: its words, each quoted, joined by OR (None when no
    word is left). ``passages_of`` says how many passages hold each (stemmed) term: the
    rarest words are kept while the passages they hold add up to :data:`POSTINGS` at
    most (two at least), so a common word never makes BM25 rank most of the index."""
    words = query_words(query)
    if not words:
        return None
    stems = {w: _stem(w) for w in words}
    counts = passages_of(sorted(set(stems.values())))
    ranked = sorted(words, key=lambda w: counts.get(stems[w], 0))
    kept: list[str] = []
    total = 0
    for word in ranked:
        n = counts.get(stems[word], 0)  # 0: no passage holds it (costs nothing to ask)
        if len(kept) >= 2 and total + n > POSTINGS:
            break
        kept.append(word)
        total += n
    return " OR ".join(f'"{w}"' for w in kept)


class KnowledgeBase:
    """The indexed collections of one world; :meth:`search` them. Close when done."""

    def __init__(
        self,
        index: KnowledgeIndex,
        files: Mapping[str, Sequence[Path]],
        folder: Path | None,
        report: SyncReport,
    ) -> None:
        self.index = index
        # resolved as the files are (a world reached through a symbolic link)
        self.folder = folder.resolve() if folder is not None else None
        self.report = report
        self.files = {name: list(paths) for name, paths in files.items()}
        docs = index.docs()
        self._doc_ids = {
            name: tuple(docs[str(p)].id for p in paths if str(p) in docs)
            for name, paths in self.files.items()
        }
        self._all = len({i for ids in self._doc_ids.values() for i in ids}) == len(docs)
        self._of_doc = {str(p): name for name, paths in self.files.items() for p in paths}

    @classmethod
    def open(cls, world: World, db: Path | None, folder: Path | None = None) -> KnowledgeBase:
        """``world``'s collections indexed in ``db`` (None: in memory), brought up to date."""
        index = KnowledgeIndex(db)
        try:
            files = {name: collection_files(name, c) for name, c in world.knowledge.items()}
            limits = {name: c.max_file_mb for name, c in world.knowledge.items()}
            report = sync(index, files, limits)
        except BaseException:
            index.close()
            raise
        return cls(index, files, folder, report)

    def close(self) -> None:
        self.index.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def collections(self) -> list[str]:
        return list(self.files)

    def search(self, collections: Iterable[str], query: str, top_k: int = 4) -> list[Passage]:
        """The ``top_k`` passages of ``collections`` best matching ``query`` (BM25), best
        first; none when the query has no searchable word. A passage scoring under
        :data:`MIN_SCORE` is left out when a better one is found. The built-in tool
        ``knowledge.search`` calls this. A collection the world lacks is a KnowledgeError."""
        names = list(dict.fromkeys(collections))
        for name in names:
            if name not in self._doc_ids:
                known = ", ".join(self._doc_ids) or "none"
                raise KnowledgeError(f"no knowledge collection '{name}' (collections: {known})")
        match = match_query(query, self.index.term_passages)
        if match is None or top_k < 1:
            return []
        every = set(names) == set(self._doc_ids) and self._all
        ids = None if every else sorted({i for n in names for i in self._doc_ids[n]})
        rows = self.index.search(match, ids, top_k)
        if rows and -rows[0].score >= MIN_SCORE:  # best first: drop those scoring ~0
            rows = [r for r in rows if -r.score >= MIN_SCORE]
        return [
            Passage(
                self.shown(row.path),
                row.line_start,
                row.line_end,
                row.heading,
                row.text,
                round(-row.score, 6),
                self._of_doc.get(row.path, ""),
            )
            for row in rows
        ]

    def shown(self, path: str) -> str:
        """``path`` as citations show it: relative to the world's folder when inside it."""
        if self.folder is not None:
            try:
                return Path(path).relative_to(self.folder).as_posix()
            except ValueError:
                pass
        return path


def collection_files(name: str, collection: KnowledgeCollection) -> list[Path]:
    """The files of a collection: each path given, each supported file under a folder
    (sorted, hidden ones skipped). A path that is not there is a KnowledgeError."""
    found: list[Path] = []
    for entry in collection.paths:
        path = Path(entry)
        if path.is_dir():
            inside = path.resolve()
            for p in sorted(path.rglob("*")):
                if (
                    not p.is_file()
                    or p.suffix.lower() not in FORMATS
                    or any(part.startswith(".") for part in p.relative_to(path).parts)
                ):
                    continue
                if not p.resolve().is_relative_to(inside):
                    raise KnowledgeError(
                        f"knowledge.{name}: {p}: a symbolic link leading outside {entry}"
                    )
                found.append(p)
        elif path.is_file():
            found.append(path)
        else:
            raise KnowledgeError(f"knowledge.{name}: {entry}: no such file or folder")
    files = list(dict.fromkeys(p.resolve() for p in found))
    if not files:
        raise KnowledgeError(
            f"knowledge.{name}: the collection is empty: no {', '.join(FORMATS)} file in "
            + ", ".join(collection.paths)
        )
    return files


RACY_NS: Final = 2_000_000_000
"""A file modified this recently before it is read may change again within the same
tick of its clock without its stat showing it: its stamp is not kept (it is read and
hashed again next time), as git does with a "racily clean" file."""


def stamp_of(status: os.stat_result, now_ns: int) -> str:
    """What a file's stat says of its content: size, modification and change times,
    inode ('' when it was modified within :data:`RACY_NS` of ``now_ns``). The change
    time catches a modification whose modification time was set back (``touch -d``)."""
    if status.st_mtime_ns >= now_ns - RACY_NS:
        return ""
    return f"{status.st_size}:{status.st_mtime_ns}:{status.st_ctime_ns}:{status.st_ino}"


def _mb(size: float) -> str:
    return f"{size / 1_000_000:,.1f} MB"


def sync(
    index: KnowledgeIndex,
    files: Mapping[str, Sequence[Path]],
    limits: Mapping[str, float],
) -> SyncReport:
    """Index every file of ``files`` whose content changed, in one transaction. A file
    whose stat is as when it was indexed is not read; a file larger than its
    collection's limit (``limits``: its ``max_file_mb`` by collection name) is a
    KnowledgeError naming it, and is never read."""
    report = SyncReport()
    known = index.docs()
    changed: list[IndexedPassage] = []
    stamps: dict[str, str] = {}
    counted: dict[str, int] = {}
    seen: set[str] = set()
    now_ns = time.time_ns()
    for name, paths in files.items():
        most = limits[name]
        total = 0
        for path in paths:
            key = str(path)
            if key in seen:
                total += counted.get(key, 0)
                continue
            seen.add(key)
            try:
                status = path.stat()
            except OSError as exc:
                raise KnowledgeError(f"{path}: cannot read it ({exc.strerror})") from None
            if status.st_size > most * 1_000_000:
                raise KnowledgeError(
                    f"{path}: {_mb(status.st_size)} ({status.st_size:,} bytes), larger than "
                    f"the {most:g} MB a file of knowledge.{name} may have: split it, or "
                    f"raise knowledge.{name}.max_file_mb"
                )
            stamp = stamp_of(status, now_ns)
            old = known.get(key)
            if old is not None and old.splitter == SPLITTER and stamp and old.stamp == stamp:
                report.unchanged.append(key)  # as it was: not even opened
                counted[key] = old.passages
                total += old.passages
                continue
            try:
                data = path.read_bytes()
            except OSError as exc:
                raise KnowledgeError(f"{path}: cannot read it ({exc.strerror})") from None
            report.files_read += 1
            digest = hashlib.sha256(data).hexdigest()
            if old is not None and old.sha256 == digest and old.splitter == SPLITTER:
                report.unchanged.append(key)
                if old.stamp != stamp:
                    stamps[key] = stamp  # touched, not changed: a stat says so next time
                counted[key] = old.passages
                total += old.passages
                continue
            passages = split(read_document(path, data))
            changed.append(IndexedPassage(key, digest, SPLITTER, len(data), passages, stamp))
            report.indexed.append(key)
            report.bytes_read += len(data)
            report.passages += len(passages)
            counted[key] = len(passages)
            total += len(passages)
        if total == 0:
            raise KnowledgeError(
                f"knowledge.{name}: the collection is empty: no text in "
                + ", ".join(str(p) for p in paths)
            )
    if changed or stamps:
        index.replace(changed, stamps=stamps)
    return report
