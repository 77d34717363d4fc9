"""Reading what a comparison needs from a store (docs/compare.md): the sessions'
documents and their stored scores, or a batch's runs."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rolecall.compare.runs import RunFigures, figures, first_difference, grouped
from rolecall.errors import UsageError
from rolecall.storage.scores import scores_of

if TYPE_CHECKING:
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument


async def _documents(store: DataStore, names: list[str]) -> list[SessionDocument]:
    docs = []
    for name in names:
        sid = await store.resolve_id(name)
        docs.append(await store.load(sid, with_events=False))  # names a missing one
    return docs


async def compare_sessions(store: DataStore, names: list[str]) -> dict[str, Any]:
    """Each named session's figures, and where the first two differ."""
    docs = await _documents(store, names)
    scores = await scores_of(store, [d.session_id for d in docs])
    runs = [figures(d, scores.get(d.session_id, ())) for d in docs]
    a, b = docs[0], docs[1]
    return {
        "runs": runs,
        "compared": [a.session_id, b.session_id],
        "difference": first_difference(a.session_id, a.messages, b.session_id, b.messages),
    }


async def compare_batch(store: DataStore, name: str) -> dict[str, Any]:
    """A batch's runs grouped by their varied values, and where the first runs of its
    first two groups differ (its first two runs when all share the same values)."""
    from rolecall.batch.tables import BatchTables
    from rolecall.storage.data_store import sqlite_only

    tables = BatchTables(sqlite_only(store, "compare --batch"))
    if await tables.plan(name) is None:
        known = await tables.names()
        listing = f" (batches: {', '.join(known)})" if known else " (no batches stored)"
        raise UsageError(f"no batch '{name}' in {store.location}{listing}")
    stored = await tables.runs(name)
    pairs: list[tuple[SessionDocument, dict[str, Any]]] = []
    for run in sorted(stored):
        entry = stored[run]
        if entry.session_id is None:
            continue
        values = dict(entry.result.values) if entry.result is not None else {}
        pairs.append((await store.load(entry.session_id, with_events=False), values))
    if len(pairs) < 2:
        raise UsageError(f"batch '{name}' has {len(pairs)} stored run(s); compare needs two")
    scores = await scores_of(store, [d.session_id for d, _ in pairs])
    runs: list[RunFigures] = [figures(d, scores.get(d.session_id, ()), v) for d, v in pairs]
    groups = grouped(runs)
    if len(groups) >= 2:
        first, second = groups[0][1][0], groups[1][1][0]
    else:
        first, second = runs[0], runs[1]
    by_id = {d.session_id: d for d, _ in pairs}
    a, b = by_id[first.session_id], by_id[second.session_id]
    ordered = [r for _, members in groups for r in members]
    return {
        "batch": name,
        "runs": ordered,
        "groups": groups,
        "compared": [a.session_id, b.session_id],
        "difference": first_difference(a.session_id, a.messages, b.session_id, b.messages),
    }
