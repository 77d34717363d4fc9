"""The ``knowledge`` benchmark of scripts/bench.py (docs/knowledge.md, docs/performance.md).

* recall@1 and recall@4 of retrieval over the shipped garden world's documents, on the
  labelled questions of scripts/knowledge_questions.jsonl (each names the passage, by
  file and heading, that answers it);
* indexing speed (MB/s of Markdown read, cut into passages and written to FTS5) and the
  time of a sync that finds nothing changed, at 10,000 and 100,000 passages of a
  synthetic corpus (Zipf-distributed words, a heading per passage);
* retrieval latency (p50, p99) of :meth:`KnowledgeBase.search` at those sizes, for
  queries made of words of a passage and common words, as a message would be;
* the per-turn cost of a role with knowledge: :func:`rolecall.knowledge.turn.retrieve`
  (the search, the prompt block, the event), on the garden world and at 10,000 passages.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rolecall.knowledge.base import KnowledgeBase
from rolecall.knowledge.turn import retrieve
from rolecall.session.state import TranscriptMessage
from rolecall.world.folders import world_folder
from rolecall.world.loader import load_world
from rolecall.world.models import KnowledgeCollection, Role, World

ROOT = Path(__file__).resolve().parent.parent
QUESTIONS = ROOT / "scripts" / "knowledge_questions.jsonl"
WORDS_PER_PASSAGE = 110
PASSAGES_PER_FILE = 1000


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _vocabulary(rng: random.Random, size: int) -> list[str]:
    syllables = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"] + ["an", "el", "or", "is"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))))
    return sorted(words)


def write_corpus(folder: Path, passages: int, seed: int = 7) -> tuple[int, list[list[str]]]:
    """``passages`` passages (a heading and ~110 words each) in Markdown files under
    ``folder``; the bytes written and a sample of passages' words (for queries)."""
    rng = random.Random(seed)
    vocab = _vocabulary(rng, 30000)
    weights = [1 / (rank + 1) for rank in range(len(vocab))]
    cumulative: list[float] = []
    total = 0.0
    for w in weights:
        total += w
        cumulative.append(total)
    folder.mkdir(parents=True, exist_ok=True)
    size = 0
    sample: list[list[str]] = []
    for start in range(0, passages, PASSAGES_PER_FILE):
        parts = []
        for i in range(start, min(passages, start + PASSAGES_PER_FILE)):
            words = rng.choices(vocab, cum_weights=cumulative, k=WORDS_PER_PASSAGE)
            if i % 97 == 0:
                sample.append(words)
            lines = [" ".join(words[j : j + 14]) for j in range(0, len(words), 14)]
            parts.append(f"## Section {i}\n\n" + "\n".join(lines) + "\n")
        text = "\n".join(parts)
        (folder / f"part{start // PASSAGES_PER_FILE:04d}.md").write_text(text)
        size += len(text.encode())
    return size, sample


def _world(folder: Path) -> World:
    return World(
        name="bench",
        knowledge={"bench": KnowledgeCollection(paths=[str(folder)])},
        roles=[Role(id="expert", knowledge=["bench"])],
    )


def _queries(sample: list[list[str]], count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    common = ["the", "what", "how", "does", "garden", "about", "why", "would"]
    out = []
    for _ in range(count):
        words = rng.choice(sample)
        picked = rng.sample(words, 8)
        out.append(" ".join([*picked[:4], *rng.sample(common, 3), *picked[4:]]))
    return out


def _time(fn: Callable[[], object], count: int) -> list[float]:
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return samples


def recall(kb: KnowledgeBase, collections: list[str]) -> dict[str, Any]:
    """recall@1 and recall@4 on the labelled questions; the misses at 4."""
    rows = [json.loads(line) for line in QUESTIONS.read_text().splitlines() if line.strip()]
    at1 = at4 = 0
    misses = []
    for row in rows:
        found = kb.search(collections, row["question"], 4)
        hits = [p.path == row["path"] and p.heading == row["heading"] for p in found]
        at1 += bool(hits[:1] and hits[0])
        at4 += any(hits)
        if not any(hits):
            misses.append(row["question"])
    return {"questions": len(rows), "at1": at1, "at4": at4, "misses": misses}


def _at_size(b: Any, tmp: Path, n: int, queries: int) -> None:
    """Index ``n`` synthetic passages, time searches and a turn's retrieval, resync."""
    folder = tmp / f"corpus{n}"
    size, sample = write_corpus(folder, n)
    past = time.time() - 3600  # older than the "racily clean" window: stamps are kept
    for path in folder.rglob("*.md"):
        os.utime(path, (past, past))
    world = _world(folder)
    db = tmp / f"knowledge{n}.db"
    t0 = time.perf_counter()
    kb = KnowledgeBase.open(world, db, folder)
    seconds = time.perf_counter() - t0
    try:
        indexed = kb.index.counts()[1]
        if indexed != n:
            raise RuntimeError(f"{indexed} passages indexed, {n} written")
        b.add(f"index_mb_per_s_{n}", size / 1e6 / seconds, "MB/s")
        b.add(f"index_seconds_{n}", seconds, "s")
        b.details[f"corpus_mb_{n}"] = round(size / 1e6, 2)
        qs = _queries(sample, queries)
        for q in qs[:20]:  # warm the page cache
            kb.search(["bench"], q, 4)
        lat = []
        for q in qs:
            t1 = time.perf_counter()
            kb.search(["bench"], q, 4)
            lat.append(time.perf_counter() - t1)
        b.add(f"search_ms_p50_{n}", _percentile(lat, 50) * 1000, "ms")
        b.add(f"search_ms_p99_{n}", _percentile(lat, 99) * 1000, "ms")
        role = world.roles[0]
        msg = TranscriptMessage(
            id="m1", sender="human", kind="human", content=qs[0], ts=datetime.now(UTC)
        )
        turn = _time(lambda: retrieve(kb, world, role, msg, None, "m2"), 200)
        b.add(f"turn_retrieve_ms_p50_{n}", _percentile(turn, 50) * 1000, "ms")
    finally:
        kb.close()
    t0 = time.perf_counter()
    again = KnowledgeBase.open(world, db, folder)
    b.add(f"resync_unchanged_seconds_{n}", time.perf_counter() - t0, "s")
    b.add(f"resync_unchanged_files_read_{n}", again.report.files_read, "files")
    again.close()


def bench_knowledge(quick: bool, bench_class: Any) -> Any:
    b = bench_class(
        "knowledge",
        "knowledge bases: recall@4 on the shipped labelled questions, FTS5 indexing MB/s, "
        "BM25 retrieval p50/p99 and the per-turn cost at 10,000 and 100,000 passages",
    )
    loaded = load_world(ROOT / "worlds" / "garden")
    garden = loaded.world
    with KnowledgeBase.open(garden, None, world_folder(garden)) as kb:
        found = recall(kb, list(garden.knowledge))
        b.add("recall_at_4", found["at4"] / found["questions"], "fraction")
        b.add("recall_at_1", found["at1"] / found["questions"], "fraction")
        b.target(
            "recall_at_4", 0.9, "the passage answering a question is among the 4 retrieved", op=">="
        )
        b.details["recall_misses"] = found["misses"]
        b.details["questions"] = found["questions"]
        role = garden.role("botanist")
        target = TranscriptMessage(
            id="m1",
            sender="gardener",
            kind="agent",
            content="Why are the lower leaves of my tomato plants turning yellow?",
            ts=datetime.now(UTC),
        )
        turn = _time(lambda: retrieve(kb, garden, role, target, None, "m2"), 100 if quick else 2000)
        b.add("turn_retrieve_ms_p50_garden", _percentile(turn, 50) * 1000, "ms")
    sizes = (500, 2000) if quick else (10000, 100000)
    queries = 50 if quick else 400
    with tempfile.TemporaryDirectory(prefix="rolecall-bench-knowledge-") as tmp:
        for n in sizes:
            _at_size(b, Path(tmp), n, queries)
    big = sizes[-1]
    b.target(f"search_ms_p50_{big}", 5.0, f"BM25 retrieval p50 at {big:,} passages")
    b.target(
        f"resync_unchanged_files_read_{big}", 0, "a resync of unchanged files reads none", op="<="
    )
    b.target(
        "turn_retrieve_ms_p50_garden", 2.0, "per-turn cost of a role with knowledge (retrieval)"
    )
    b.method = {
        "corpus": f"{WORDS_PER_PASSAGE} Zipf-distributed words of a 30,000-word vocabulary "
        f"and a heading per passage, {PASSAGES_PER_FILE} passages a Markdown file",
        "queries": f"{queries} per size: 8 words of a passage and 3 common words (stop "
        "words, dropped from the FTS5 query), top 4",
        "index": "KnowledgeBase.open on an empty knowledge.db (read, hash, cut, one "
        "transaction); resync: open again with nothing changed (a stat per file, no file "
        "opened: resync_unchanged_files_read is 0)",
        "turn": "rolecall.knowledge.turn.retrieve: query, search, prompt block, event",
    }
    return b
