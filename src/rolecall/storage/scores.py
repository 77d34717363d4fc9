"""The scores table of the SQLite store: scores given to stored sessions after the fact.

``rolecall score`` adds one row per scoring (several per session, each numbered, with its
judge, model and time); ``sessions show``, ``compare``, the web view and batch reports
read them. A scoring never changes the session's own rows: its transcript, log and state
stay as they were stored.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from rolecall.storage.sqlite import SqliteStore


@dataclass(frozen=True, slots=True)
class StoredScore:
    """One judge's scores of a session, stored beside it (``rolecall score``)."""

    session_id: str
    number: int  # 1, 2, ...: the session's scorings in the order they were made
    judge: str  # what --judge named: `offline`, a library role, a world file, ...
    model: str  # the model the judge ran on
    scored_at: str  # ISO 8601, UTC
    scores: dict[str, float]
    comment: str

    def record(self) -> dict[str, Any]:
        return {
            "number": self.number,
            "judge": self.judge,
            "model": self.model,
            "scored_at": self.scored_at,
            "scores": self.scores,
            "comment": self.comment,
        }

    def short(self) -> str:
        """``judge: name=7 other=4``: a table cell."""
        shown = " ".join(f"{k}={v:g}" for k, v in self.scores.items()) or "(no scores)"
        return f"{self.judge}: {shown}"


class ScoreTable:
    """Reads and writes a store's scores (the store must be open)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    async def add(
        self,
        session_id: str,
        *,
        judge: str,
        model: str,
        scored_at: str,
        scores: Mapping[str, float],
        comment: str,
    ) -> StoredScore:
        """Store one scoring of ``session_id`` (numbered after the ones before it)."""
        text = json.dumps(dict(scores), ensure_ascii=False)
        async with self.store.transaction(immediate=True) as db:
            found = list(
                await db.execute_fetchall(
                    "SELECT COALESCE(MAX(number), 0) + 1 FROM scores WHERE session_id = ?",
                    (session_id,),
                )
            )
            number = int(found[0][0])
            await db.execute(
                "INSERT INTO scores (session_id, number, judge, model, scored_at, scores_json, "
                "comment) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, number, judge, model, scored_at, text, comment),
            )
        return StoredScore(session_id, number, judge, model, scored_at, dict(scores), comment)

    async def of(self, session_ids: Iterable[str]) -> dict[str, list[StoredScore]]:
        """Each session's scorings, oldest first (sessions without any left out)."""
        ids = list(dict.fromkeys(session_ids))
        out: dict[str, list[StoredScore]] = {}
        for start in range(0, len(ids), 500):
            part = ids[start : start + 500]
            marks = ", ".join("?" for _ in part)
            rows = await self.store.fetch_all(
                "SELECT session_id, number, judge, model, scored_at, scores_json, comment "
                f"FROM scores WHERE session_id IN ({marks}) ORDER BY session_id, number",
                *part,
            )
            for sid, number, judge, model, at, text, comment in rows:
                scores = {str(k): float(v) for k, v in json.loads(text).items()}
                out.setdefault(str(sid), []).append(
                    StoredScore(str(sid), int(number), judge, model, at, scores, comment)
                )
        return out


async def scores_of(store: object, session_ids: Iterable[str]) -> dict[str, list[StoredScore]]:
    """The scorings of ``session_ids`` in ``store``; none in a store that is not SQLite's
    (it keeps no scores)."""
    if not isinstance(store, SqliteStore):
        return {}
    return await ScoreTable(store).of(session_ids)
