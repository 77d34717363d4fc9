"""The floor of a persisted turn (issue 18): the same work as rolecall's turn, hand-written.

Per turn, as rolecall's ``turn_overhead`` world does it: a reply of 13 words streamed
as one chunk each, so 16 events (``sse/start``, 13 ``sse/chunk``, ``sse/end``,
``messages/message``) plus the step record; each event is a pydantic model serialised
to JSON and written to a sink on /dev/null (flushed per event, as the CLI's JSON sink
does); then one SQLite transaction (WAL, ``synchronous=NORMAL``) inserting the turn's
events as two packed rows, the message and its execution record and updating the
session row; then one line appended to each of three agents' memory files. No routing,
no flow, no prompt, no bus: what any program doing the same work must pay at least.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel

WORDS = tuple(
    [
        "the",
        "floor",
        "loop",
        "says",
        "its",
        "scripted",
        "line",
        "of",
        "thirteen",
        "words",
        "here",
        "for",
        "the",
        "bench",
    ]
)


class _Event(BaseModel):
    topic: str
    type: str
    seq: int
    session_id: str
    ts: datetime


class Start(_Event):
    type: Literal["start"] = "start"
    message_id: str
    sender: str


class Chunk(_Event):
    type: Literal["chunk"] = "chunk"
    message_id: str
    sender: str
    delta: str
    output_tokens: int


class End(_Event):
    type: Literal["end"] = "end"
    message_id: str
    sender: str
    input_tokens: int
    output_tokens: int


class MessageEv(_Event):
    type: Literal["message"] = "message"
    message_id: str
    sender: str
    content: str


class StepEv(_Event):
    type: Literal["step"] = "step"
    step_id: str
    speaker: str


SCHEMA = """
CREATE TABLE sessions (id TEXT PRIMARY KEY, state TEXT, last_seq INTEGER, updated_at TEXT);
CREATE TABLE events (session_id TEXT, seq INTEGER, record TEXT, PRIMARY KEY (session_id, seq))
    WITHOUT ROWID;
CREATE TABLE messages (session_id TEXT, idx INTEGER, id TEXT, sender TEXT, body TEXT,
    PRIMARY KEY (session_id, idx)) WITHOUT ROWID;
CREATE TABLE execution_log (session_id TEXT, idx INTEGER, step_id TEXT, speaker TEXT,
    PRIMARY KEY (session_id, idx)) WITHOUT ROWID;
"""


def run_floor(turns: int) -> tuple[list[float], float]:
    """``turns`` floor turns: (per-turn durations, process CPU seconds)."""
    sid = "floor-session"
    roles = ("alice", "bob", "carol")
    with tempfile.TemporaryDirectory(prefix="rolecall-floor-") as data:
        db = sqlite3.connect(Path(data) / "floor.db")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        db.executescript(SCHEMA)
        db.execute("INSERT INTO sessions VALUES (?, 'running', 0, '')", (sid,))
        db.commit()
        files = [open(Path(data) / f"{r}.jsonl", "a", encoding="utf-8") for r in roles]  # noqa: SIM115
        sink = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
        seq = 0
        stamps: list[float] = []
        cpu0 = time.process_time()
        for turn in range(turns):
            speaker = roles[turn % 3]
            mid = f"m{turn + 1}"
            now = datetime.now(UTC)
            events: list[_Event] = [
                Start(topic="sse", seq=seq + 1, session_id=sid, ts=now, message_id=mid,
                      sender=speaker)
            ]  # fmt: skip
            for i, word in enumerate(WORDS):
                events.append(
                    Chunk(topic="sse", seq=seq + 2 + i, session_id=sid, ts=now, message_id=mid,
                          sender=speaker, delta=word + " ", output_tokens=i + 1)
                )  # fmt: skip
            text = " ".join(WORDS)
            seq += len(events)
            events.append(
                End(topic="sse", seq=seq + 1, session_id=sid, ts=now, message_id=mid,
                    sender=speaker, input_tokens=100, output_tokens=len(WORDS))
            )  # fmt: skip
            message = MessageEv(topic="messages", seq=seq + 2, session_id=sid, ts=now,
                                message_id=mid, sender=speaker, content=text)  # fmt: skip
            step = StepEv(topic="system", seq=seq + 3, session_id=sid, ts=now, step_id="s",
                          speaker=speaker)  # fmt: skip
            events += [message, step]
            seq += 3
            lines = [e.model_dump_json() for e in events]
            for line in lines:
                sink.write(line + "\n")
                sink.flush()
            db.executemany(
                "INSERT INTO events VALUES (?, ?, ?)",
                [(sid, seq - 2, "[" + ",".join(lines[:-2]) + "]"), (sid, seq, lines[-1])],
            )
            db.execute("INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                       (sid, turn, mid, speaker, lines[-2]))  # fmt: skip
            db.execute("INSERT INTO execution_log VALUES (?, ?, 's', ?)", (sid, turn, speaker))
            db.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?",
                       (seq, now.isoformat(), sid))  # fmt: skip
            db.commit()
            for f in files:
                f.write(lines[-2] + "\n")
                f.flush()
            stamps.append(time.perf_counter())
        cpu = time.process_time() - cpu0
        for f in (*files, sink):
            f.close()
        db.close()
    return [b - a for a, b in itertools.pairwise(stamps)], cpu


def floor_figures(turns: int, repeats: int) -> dict[str, float]:
    """Median per-turn duration and mean CPU per turn, best of ``repeats`` runs."""
    runs = [run_floor(turns) for _ in range(repeats)]
    best = min(runs, key=lambda r: statistics.median(r[0]))
    return {
        "median_ms": statistics.median(best[0]) * 1000,
        "cpu_mean_ms": best[1] / turns * 1000,
    }
