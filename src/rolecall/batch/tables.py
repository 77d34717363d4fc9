"""The batch tables of the SQLite store: a batch's plan, and each run's session and result.

A batch is stored when it starts (its plan: the world document, the ``--vary`` axes,
``--runs``), each run's session id as soon as the session exists, and each run's result
row once it ended; ``rolecall batch --resume NAME`` reads them back.

A batch run on a NATS cluster is recorded here when ``sessions import`` stores its
sessions (:meth:`BatchTables.record_imported`): its plan then names the cluster
(``{"nats": URL, ...}``), and its runs are those the cluster's streams hold, so that
``sessions list --batch NAME`` and the web view's batch filter find them as they find a
local batch's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from rolecall.batch.results import RunResult
from rolecall.errors import BatchInUse, SessionInUse, StorageError, UsageError
from rolecall.paths import data_dir_flag
from rolecall.storage.claims import Claim, FileClaims, describe_holder
from rolecall.storage.sqlite import SqliteStore


@dataclass(frozen=True)
class StoredRun:
    run: int
    session_id: str | None
    result: RunResult | None


class BatchTables:
    """Reads and writes a store's batch tables (the store must be open)."""

    def __init__(self, store: SqliteStore) -> None:
        self.store = store

    def claim(self, name: str) -> Claim:
        """Make this process the only one running batch ``name`` until the claim is
        released (or the process ends, however it ends): a second ``rolecall batch
        --resume NAME`` started meanwhile would find every remaining run's session
        claimed and report them all failed. :class:`BatchInUse`, naming the holder, when
        another process has it.

        The lock files are those of the sessions' claims (storage/claims.py), in a
        ``.batches`` folder beside them: no session id or batch name starts with a dot.
        """
        claims = FileClaims(self.store.claims_folder / ".batches")
        try:
            return claims.claim(name)
        except SessionInUse:
            again = f"rolecall batch --resume {name}{data_dir_flag(self.store.path)}"
            raise BatchInUse(name, describe_holder(claims.path_of(name)), again) from None
        except OSError as exc:
            raise StorageError(
                f"cannot claim batch {name} in {claims.folder}: {exc.strerror or exc}"
            ) from exc

    async def create(self, name: str, plan: dict[str, Any]) -> None:
        """Record a new batch; a usage error when the name is taken."""
        if await self.plan(name) is not None:
            raise UsageError(
                f"a batch named {name!r} already exists in {self.store.path}: "
                f"`rolecall batch --resume {name}{data_dir_flag(self.store.path)}` finishes it, "
                "or choose another --name"
            )
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO batches (name, plan_json, created_at) VALUES (?, ?, ?)",
                (name, json.dumps(plan, ensure_ascii=False), datetime.now(UTC).isoformat()),
            )

    async def plan(self, name: str) -> dict[str, Any] | None:
        rows = await self.store.fetch_all("SELECT plan_json FROM batches WHERE name = ?", name)
        return dict(json.loads(rows[0][0])) if rows else None

    async def names(self) -> list[str]:
        return [
            row[0]
            for row in await self.store.fetch_all("SELECT name FROM batches ORDER BY created_at")
        ]

    async def set_session(self, name: str, run: int, session_id: str) -> None:
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO batch_runs (batch, run, session_id) VALUES (?, ?, ?) "
                "ON CONFLICT (batch, run) DO UPDATE SET session_id = excluded.session_id, "
                "result_json = NULL",
                (name, run, session_id),
            )

    async def set_result(self, result: RunResult) -> None:
        async with self.store.transaction() as db:
            await db.execute(
                "INSERT INTO batch_runs (batch, run, session_id, result_json) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (batch, run) DO UPDATE SET session_id = excluded.session_id, "
                "result_json = excluded.result_json",
                (result.batch, result.run, result.session_id, result.model_dump_json()),
            )

    async def runs(self, name: str) -> dict[int, StoredRun]:
        rows = await self.store.fetch_all(
            "SELECT run, session_id, result_json FROM batch_runs WHERE batch = ?", name
        )
        return {
            run: StoredRun(
                run, sid, RunResult.model_validate_json(text) if text is not None else None
            )
            for run, sid, text in rows
        }

    async def record_imported(
        self,
        name: str,
        plan: dict[str, Any],
        runs: Sequence[tuple[int, str | None, RunResult | None]],
    ) -> bool:
        """Record batch ``name`` of a NATS cluster (``plan`` holds ``"nats": URL``) and
        its ``runs`` (run, the session stored here or None, its result or None), each
        replacing what an earlier import recorded of it. False, recording nothing, when
        this store has a batch of that name of its own (run here, not imported)."""
        async with self.store.transaction(immediate=True) as db:
            found = list(
                await db.execute_fetchall("SELECT plan_json FROM batches WHERE name = ?", (name,))
            )
            if found and "nats" not in json.loads(found[0][0]):
                return False
            text = json.dumps(plan, ensure_ascii=False)
            if found:
                await db.execute("UPDATE batches SET plan_json = ? WHERE name = ?", (text, name))
            else:
                await db.execute(
                    "INSERT INTO batches (name, plan_json, created_at) VALUES (?, ?, ?)",
                    (name, text, datetime.now(UTC).isoformat()),
                )
            await db.executemany(
                "INSERT INTO batch_runs (batch, run, session_id, result_json) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (batch, run) DO UPDATE SET session_id = excluded.session_id, "
                "result_json = excluded.result_json",
                [
                    (name, run, sid, result.model_dump_json() if result is not None else None)
                    for run, sid, result in runs
                ],
            )
        return True
