"""The in-memory store: :class:`~rolecall.storage.port.SessionStore` in a process's memory.

For tests and embedding applications that want stored sessions (resume, list, export)
without a file. Nothing survives the process. Streamed ``sse`` events are not kept (a
document leaves them out anyway).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rolecall.bus import Envelope
from rolecall.errors import SessionInUse, UsageError
from rolecall.paths import safe_id
from rolecall.session.state import Draft, ExecutionRecord, TranscriptMessage
from rolecall.storage.catalog import SessionFilter, SessionRow
from rolecall.storage.claims import Claim
from rolecall.storage.document import SessionDocument, StateDoc, check_document
from rolecall.storage.port import NewSession, StoredCounts, TurnBatch

if TYPE_CHECKING:
    from rolecall.storage.fork import ForkPlan


@dataclass
class _Stored:
    new: NewSession
    state: str
    stop_reason: str | None
    state_json: str
    updated_at: str
    messages: list[TranscriptMessage] = field(default_factory=list)
    records: list[ExecutionRecord] = field(default_factory=list)
    drafts: list[Draft] = field(default_factory=list)
    events: list[dict[str, Any]] = field(default_factory=list)
    last_seq: int = 0  # of the last event stored (streamed ones included)


class InMemoryStore:
    """Sessions kept in a dict, one :class:`TurnBatch` at a time."""

    def __init__(self) -> None:
        self._sessions: dict[str, _Stored] = {}
        self._claimed: set[str] = set()  # the sessions a live session writes

    @property
    def location(self) -> str:
        return "memory"

    async def __aenter__(self) -> InMemoryStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None

    def claim(self, session_id: str) -> Claim:
        sid = safe_id(session_id, "session id")
        if sid in self._claimed:
            raise SessionInUse.held_by(sid, "this process (another live session of this store)")
        self._claimed.add(sid)
        return Claim(sid, lambda: self._claimed.discard(sid))

    async def create(self, new: NewSession) -> None:
        sid = safe_id(new.session_id, "session id")
        self._sessions[sid] = _Stored(
            new, new.state, new.stop_reason, new.state_json, new.created_at
        )

    async def counts(self, session_id: str) -> StoredCounts | None:
        stored = self._sessions.get(safe_id(session_id, "session id"))
        if stored is None:
            return None
        return StoredCounts(len(stored.messages), len(stored.records), len(stored.drafts))

    async def commit(self, batch: TurnBatch) -> None:
        stored = self._get(batch.session_id)
        stored.messages.extend(batch.messages)
        stored.records.extend(batch.records)
        stored.drafts.extend(batch.drafts)
        stored.events.extend(
            e.to_record() for e in batch.events if isinstance(e, Envelope) and e.topic != "sse"
        )
        if batch.events:
            stored.last_seq = batch.events[-1].seq
        stored.state = batch.state
        stored.stop_reason = batch.stop_reason
        stored.state_json = batch.state_json
        stored.updated_at = batch.updated_at

    async def has(self, session_id: str) -> bool:
        return safe_id(session_id, "session id") in self._sessions

    async def load(self, session_id: str, *, with_events: bool = True) -> SessionDocument:
        stored = self._get(session_id)
        new = stored.new
        return SessionDocument.model_validate(
            {
                "session_id": new.session_id,
                "created_at": new.created_at,
                "updated_at": stored.updated_at,
                "world": json.loads(new.world_json),
                "world_source": new.world_source,
                "model_override": new.model_override,
                "state": json.loads(stored.state_json),
                "last_seq": stored.last_seq,
                "messages": list(stored.messages),
                "execution_log": list(stored.records),
                "drafts": list(stored.drafts),
                "events": list(stored.events) if with_events else [],
            }
        )

    async def costs(self) -> dict[str, float | None]:
        out: dict[str, float | None] = {}
        for sid, stored in self._sessions.items():
            agents = [m for m in stored.messages if m.kind == "agent"]
            if agents:
                unknown = any(m.cost_usd is None for m in agents)
                out[sid] = None if unknown else sum(m.cost_usd or 0.0 for m in agents)
        return out

    async def list_sessions(self, where: SessionFilter | None = None) -> list[SessionRow]:
        if where is not None:
            raise UsageError("filtering sessions needs the SQLite store (rolecall.SqliteStore)")
        costs = await self.costs()
        rows = []
        for sid, stored in self._sessions.items():
            rows.append(
                SessionRow(
                    id=sid,
                    world_name=stored.new.world_name,
                    title=stored.new.title,
                    state=stored.state,
                    stop_reason=stored.stop_reason,
                    messages=len(stored.messages),
                    created_at=stored.new.created_at,
                    updated_at=stored.updated_at,
                    pause_reason=json.loads(stored.state_json).get("pause_reason"),
                    input_tokens=sum(m.input_tokens for m in stored.messages),
                    output_tokens=sum(m.output_tokens for m in stored.messages),
                    cost_usd=costs.get(sid, 0.0) if stored.messages else None,
                )
            )
        # newest first, as the SQLite store lists them
        rows.sort(key=lambda r: (r.updated_at, r.created_at, r.id), reverse=True)
        return rows

    async def delete(self, session_id: str) -> int | None:
        # every live session of this store is this store's: it may delete what it holds
        stored = self._sessions.pop(safe_id(session_id, "session id"), None)
        return None if stored is None else len(stored.messages)

    async def import_document(self, doc: SessionDocument) -> None:
        sid = safe_id(doc.session_id, "session id")
        if sid in self._sessions:
            return
        check_document(doc, f"session {sid}")  # parts that disagree: nothing is stored
        state_text = doc.state.model_dump_json()
        self._sessions[sid] = _Stored(
            NewSession(
                session_id=sid,
                world_name=str(doc.world.get("name", "")),
                title=str(doc.world.get("title", "")),
                world_json=json.dumps(doc.world),
                world_source=doc.world_source,
                model_override=doc.model_override,
                state=doc.state.state,
                stop_reason=doc.state.stop_reason,
                state_json=state_text,
                last_seq=doc.last_seq,
                created_at=doc.created_at.isoformat(),
            ),
            doc.state.state,
            doc.state.stop_reason,
            state_text,
            doc.updated_at.isoformat(),
            messages=list(doc.messages),
            records=list(doc.execution_log),
            drafts=list(doc.drafts),
            events=[dict(e) for e in doc.events],
            last_seq=doc.last_seq,
        )

    async def fork_copy(
        self,
        session_id: str,
        at: str,
        *,
        new_id: str,
        now: datetime,
        edit: str | None = None,
        model: str | None = None,
    ) -> ForkPlan:
        """The fork, its lists copied from the parent's (no serialising on the way)."""
        from rolecall.storage.fork import fork

        plan, new = fork(
            await self.load(session_id), at, new_id=new_id, now=now, edit=edit, model=model
        )
        await self.import_document(new)
        return plan

    async def forget(self, session_id: str, agent: str) -> int:
        stored = self._get(session_id)
        state = StateDoc.model_validate_json(stored.state_json)
        state.turn_counts[agent] = 0
        state.memory_start[agent] = len(stored.messages)
        stored.state_json = state.model_dump_json()
        stored.updated_at = datetime.now(UTC).isoformat()
        return len(stored.messages)

    def _get(self, session_id: str) -> _Stored:
        sid = safe_id(session_id, "session id")
        stored = self._sessions.get(sid)
        if stored is None:
            recent = list(self._sessions)[-5:]
            hint = f" (recent: {', '.join(recent)})" if recent else " (no sessions stored yet)"
            raise UsageError(f"no session '{session_id}' in memory{hint}")
        return stored
