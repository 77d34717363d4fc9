"""The recorder: a live session's changes as :class:`TurnBatch` values for a store.

The composition root creates one per stored session and hands it to the session as its
store (the runtime calls :meth:`Recorder.commit` before it publishes a turn's events, so
whatever a subscriber sees is stored). The recorder knows how much of the session is
stored already; the store only writes the batches it is given.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from rolecall.bus import Bus, Envelope
from rolecall.bus.events import StreamChunk
from rolecall.errors import SessionInUse, StorageError
from rolecall.paths import safe_id
from rolecall.session.state import SessionState
from rolecall.storage.claims import Claim
from rolecall.storage.document import state_json, world_dict
from rolecall.storage.port import (
    ChunkRun,
    NewSession,
    SessionStore,
    Stamped,
    StoredCounts,
    TurnBatch,
)
from rolecall.world.models import World


class RecorderSite(Protocol):
    """What the recorder reads of a live session (``runtime.Dialogue``)."""

    @property
    def session_id(self) -> str: ...

    world: World
    state: SessionState
    bus: Bus
    clock: Callable[[], datetime]
    model_override: str | None


class EventBuffer(list[Stamped]):
    """The envelopes stamped since the last commit, in order (the bus appends them). A
    generation's chunks are folded into one :class:`ChunkRun` from its second chunk on,
    so a reply is held as about its text, not as an event object per word."""

    def append(self, envelope: Stamped) -> None:
        if isinstance(envelope, Envelope) and isinstance(event := envelope.event, StreamChunk):
            last = self[-1] if self else None
            if last is not None and last.seq + 1 == envelope.seq:
                if isinstance(last, ChunkRun):
                    if last.message_id == event.message_id:
                        last.stamps.append(envelope.ts)
                        last.deltas.append(event.delta)
                        last.tokens.append(event.output_tokens)
                        return
                elif isinstance(first := last.event, StreamChunk) and (
                    first.message_id == event.message_id
                ):
                    self[-1] = ChunkRun(
                        last.seq,
                        event.message_id,
                        event.sender,
                        [last.ts, envelope.ts],
                        [first.delta, event.delta],
                        [first.output_tokens, event.output_tokens],
                    )
                    return
        super().append(envelope)


class Recorder:
    """Writes one live session to a :class:`SessionStore`, a turn at a time."""

    def __init__(self, store: SessionStore, session_id: str, claim: Claim) -> None:
        self.store = store
        self.session_id = session_id
        self.claim = claim  # this live session writes it (released when it closes)
        self.buffer = EventBuffer()  # stamped since the last commit (the bus appends)
        self.messages = self.records = self.drafts = 0  # how many of each are stored
        self.state_json = ""
        # why a commit failed: the session in memory is then ahead of what is stored (its
        # message added, its events never published), so nothing more of it is written and
        # a resume goes on from the last commit
        self.failed: str | None = None

    @classmethod
    async def attach(
        cls, store: SessionStore, session: RecorderSite, *, world_source: str | None = None
    ) -> Recorder:
        """Record ``session`` into ``store`` from now on (creating its row if new).

        The session is claimed first (:meth:`SessionStore.claim`): SessionInUse when
        another live session writes it, or wrote to it since ``session`` was read from the
        store. The caller makes it the session's recorder (``session.recorder``),
        flushes it after every turn and releases it (:meth:`release`) when it closes.
        """
        sid = safe_id(session.session_id, "session id")
        recorder = cls(store, sid, store.claim(sid))
        try:
            await recorder._start(session, world_source)
        except BaseException:
            recorder.release()
            raise
        return recorder

    async def _start(self, session: RecorderSite, world_source: str | None) -> None:
        store, sid = self.store, self.session_id
        session.bus.record_into(self.buffer)
        stored = await store.counts(sid)
        if stored is None:
            self.state_json = state_json(session.state)
            await store.create(
                NewSession(
                    session_id=sid,
                    world_name=session.world.name,
                    title=session.world.title,
                    world_json=json.dumps(world_dict(session.world)),
                    world_source=world_source,
                    model_override=session.model_override,
                    state=session.state.state,
                    stop_reason=session.state.stop_reason,
                    state_json=self.state_json,
                    last_seq=session.bus.last_seq,
                    created_at=session.clock().isoformat(),
                )
            )
            return
        state = session.state
        read = StoredCounts(
            len(state.transcript.messages), len(state.execution_log), len(state.drafts)
        )
        if stored != read:  # read before another process went on with it, then let it go
            raise SessionInUse.changed(sid, stored.messages, read.messages)
        self.counted(stored)

    def release(self) -> None:
        """Let another live session go on with this stored session (its claim ends)."""
        self.claim.release()

    def counted(self, stored: StoredCounts) -> None:
        self.messages, self.records, self.drafts = stored.messages, stored.records, stored.drafts

    async def commit(self, session: RecorderSite) -> None:
        """One transaction: the events stamped since the last one (delivered, or about to
        be), new messages, execution records and drafts, the session's state."""
        if self.failed is not None:
            raise StorageError(
                f"session {self.session_id} is no longer written to {self.store.location} "
                f"since a write failed ({self.failed}); what was committed before is kept"
            )
        state = session.state
        events = tuple(self.buffer)
        self.buffer.clear()  # the bus appends to this very list
        messages = tuple(state.transcript.messages[self.messages :])
        records = tuple(state.execution_log[self.records :])
        drafts = tuple(state.drafts[self.drafts :])
        state_now = state_json(state)
        if not (events or messages or records or drafts) and state_now == self.state_json:
            return
        batch = TurnBatch(
            session_id=self.session_id,
            events=events,
            messages=messages,
            records=records,
            drafts=drafts,
            first_message=self.messages,
            first_draft=self.drafts,
            state=state.state,
            stop_reason=state.stop_reason,
            state_json=state_now,
            last_seq=session.bus.last_seq,
            # the time of its last event: what a copy rebuilt from the events (a NATS
            # import) says too; the clock when only the state changed
            updated_at=_last_time(events, session.clock).isoformat(),
        )
        try:
            await self.store.commit(batch)
        except BaseException as exc:
            self.failed = str(exc) or type(exc).__name__
            raise
        self.messages += len(messages)
        self.records += len(records)
        self.drafts += len(drafts)
        self.state_json = state_now

    async def flush(self, session: RecorderSite) -> None:
        """Store whatever happened since the last commit.

        Every change of a session's state comes with an event or a new row (a flag, a
        pause, a message...), so with none of those there is nothing to write.
        """
        state = session.state
        if (
            self.buffer
            or len(state.transcript.messages) > self.messages
            or len(state.execution_log) > self.records
            or len(state.drafts) > self.drafts
        ):
            await self.commit(session)


def _last_time(events: tuple[Envelope | ChunkRun, ...], clock: Callable[[], datetime]) -> datetime:
    """The time of the last of ``events`` (a run of chunks: its last chunk's); the clock
    when there are none."""
    if not events:
        return clock()
    last = events[-1]
    return last.stamps[-1] if isinstance(last, ChunkRun) else last.ts
