"""The store port: what rolecall needs from wherever sessions are kept.

:class:`SessionStore` is the protocol; :class:`~rolecall.storage.sqlite.SqliteStore`
(one SQLite file, WAL) and :class:`~rolecall.storage.in_memory.InMemoryStore` (a process's
memory) implement it. Everything else (the composition root, the command line, the
REPL) goes through these methods: no SQL outside the SQLite implementation.

A live session is written as pure :class:`TurnBatch` values, built by the
:class:`~rolecall.storage.recorder.Recorder` the composition root attaches to it: the
store never sees the session object, and never changes it.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from rolecall.bus import Envelope
from rolecall.session.state import Draft, ExecutionRecord, TranscriptMessage
from rolecall.storage.catalog import SessionFilter, SessionRow
from rolecall.storage.claims import Claim
from rolecall.storage.document import SessionDocument

if TYPE_CHECKING:
    from rolecall.storage.fork import ForkPlan


@dataclass(frozen=True, slots=True)
class NewSession:
    """The row of a session about to be written for the first time."""

    session_id: str
    world_name: str
    title: str
    world_json: str
    world_source: str | None
    model_override: str | None
    state: str
    stop_reason: str | None
    state_json: str
    last_seq: int
    created_at: str


@dataclass(slots=True)
class ChunkRun:
    """One generation's consecutive streamed chunks, kept compactly until they are
    stored (a long reply is a million of them): what the store writes of each chunk."""

    first_seq: int
    message_id: str
    sender: str
    stamps: list[datetime]
    deltas: list[str]
    tokens: list[int]

    @property
    def seq(self) -> int:
        """The seq of its last chunk."""
        return self.first_seq + len(self.deltas) - 1


Stamped = Envelope | ChunkRun  # what a turn's batch holds, in seq order


@dataclass(frozen=True, slots=True)
class TurnBatch:
    """What happened in a session since its last commit: written in one transaction.

    ``first_message`` and ``first_draft`` are the transcript positions of the first new
    message and draft (the rows are numbered by them).
    """

    session_id: str
    events: tuple[Stamped, ...]
    messages: tuple[TranscriptMessage, ...]
    records: tuple[ExecutionRecord, ...]
    drafts: tuple[Draft, ...]
    first_message: int
    first_draft: int
    state: str
    stop_reason: str | None
    state_json: str
    last_seq: int
    updated_at: str


@dataclass(frozen=True, slots=True)
class StoredCounts:
    """How much of a session is stored: messages, execution records, drafts."""

    messages: int
    records: int
    drafts: int


class SessionStore(Protocol):
    """Where sessions are kept. Failures are :class:`~rolecall.errors.StorageError`;
    an unknown session id is a :class:`~rolecall.errors.UsageError` naming it."""

    @property
    def location(self) -> str:
        """Where the store is (a path), for messages."""
        ...

    def claim(self, session_id: str) -> Claim:
        """Make this process the only writer of the session until the claim is released
        (its live session closed, or the store): one live session at a time goes on with
        a stored session. :class:`~rolecall.errors.SessionInUse`, naming the
        holder, when another one (in any process) has it."""
        ...

    async def create(self, new: NewSession) -> None:
        """Write a new session's row (before its first commit)."""
        ...

    async def counts(self, session_id: str) -> StoredCounts | None:
        """How much of the session is stored; None when it is not."""
        ...

    async def commit(self, batch: TurnBatch) -> None:
        """Write ``batch`` in one transaction: all of it or, on failure, none."""
        ...

    async def has(self, session_id: str) -> bool:
        """Whether the session is stored here."""
        ...

    async def load(self, session_id: str, *, with_events: bool = True) -> SessionDocument:
        """The stored session as a document (events without the streamed ``sse`` ones)."""
        ...

    async def list_sessions(self, where: SessionFilter | None = None) -> list[SessionRow]:
        """The stored sessions, newest first (all of them without a filter)."""
        ...

    async def costs(self) -> dict[str, float | None]:
        """Each session's cost in USD: the sum over its agent messages, None when one of
        them has no known cost (sessions without agent messages are left out)."""
        ...

    async def delete(self, session_id: str) -> int | None:
        """Delete the session; the number of messages it held, None when it was not stored.
        SessionInUse while a live session of another store (another process) writes it."""
        ...

    async def import_document(self, doc: SessionDocument) -> None:
        """Store a session read from a file (all of it), unless it is already stored.

        A document whose parts disagree (``rolecall.storage.document.inconsistency``)
        is refused with UsageError and nothing is stored."""
        ...

    async def forget(self, session_id: str, agent: str) -> int:
        """Clear ``agent``'s memory in the stored state (later prompts start after the
        messages stored so far; its turn count is 0). Returns that message count."""
        ...

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
        """Store a fork of the session right after message ``at`` (``mK``) as ``new_id``
        (:func:`rolecall.storage.fork.fork` says what it holds), copying the kept rows
        inside the store. What the fork holds besides the copied rows."""
        ...
