"""The SQLite store (WAL): sessions are written as they run.

One store serves any number of sessions in a process; each :meth:`commit` is one
transaction (serialised by a lock) holding the events delivered since the last one,
the envelopes about to be delivered, new messages, execution records and drafts, and
the session's state. A message is therefore stored before its event is delivered.

Two connections to one database file:

* the *writer* (plain :mod:`sqlite3`) commits the turns. A turn's transaction appends a
  few pages to the WAL, with no fsync (``synchronous=NORMAL``): tens of microseconds, so
  it runs inline on the event loop, like the memory-file appends, instead of paying
  two thread wake-ups per turn. Whatever could block is sent to a worker thread: a
  write lock held by another process (the inline attempt never waits, ``busy_timeout``
  0, and the same transaction is retried on a thread that waits up to
  ``writer.BUSY_TIMEOUT_S``); it never checkpoints (that fsyncs);
* the aiosqlite connection (its own thread) reads, migrates and runs the management
  writes (create, import, delete, forget); the periodic checkpoints run on a thread of
  their own (:mod:`rolecall.storage.checkpointer`), never waited for by a turn.

It implements :class:`~rolecall.storage.port.SessionStore`; a session's turns reach it
as :class:`~rolecall.storage.port.TurnBatch` values from its recorder. All of rolecall's
SQL on sessions is here (and in the modules beside it).
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import aiosqlite
import anyio
import anyio.lowlevel
from pydantic import ValidationError

from rolecall.debuglog import debug_enabled
from rolecall.errors import StorageError, UsageError
from rolecall.log import get_logger
from rolecall.paths import data_dir_flag, db_path, safe_id
from rolecall.session.state import Draft, TranscriptMessage
from rolecall.storage import catalog, fts, writer
from rolecall.storage.catalog import SessionFilter, SessionRow
from rolecall.storage.checkpointer import Checkpointer
from rolecall.storage.checkpointer import finish as finish_checkpoint
from rolecall.storage.claims import Claim, FileClaims
from rolecall.storage.document import SessionDocument, StateDoc, check_document
from rolecall.storage.port import NewSession, StoredCounts, TurnBatch
from rolecall.storage.rows import Batch, event_rows, record_from_row, record_row
from rolecall.storage.schema import (
    EXPECTED_OBJECTS,
    MIGRATIONS,
    SCHEMA_VERSION,
    WORLD_INSERT,
    statements,
)

T = TypeVar("T")

if TYPE_CHECKING:
    from rolecall.storage.fork import ForkPlan

log = get_logger(__name__)

# the writer never checkpoints (that fsyncs); the store asks its checkpointer's thread for
# one after this many turn commits or this many bytes of rows, whichever comes first
CHECKPOINT_EVERY_COMMITS = 500
CHECKPOINT_EVERY_BYTES = 8 * 1024 * 1024
# commits of several sessions taking turns are grouped (one transaction) this long after
# two sessions last alternated; a session alone commits each turn at once
GROUP_FOR_COMMITS = 64


async def _last_checkpoint(db: aiosqlite.Connection) -> None:
    """Copy the WAL into the database and empty it, as the store closes.

    First without the write lock (``PASSIVE``): another process writing to the database
    goes on meanwhile. Then, when that copied every frame, ``TRUNCATE``, which holds the
    lock, has nothing left to copy and only empties the file. When frames were left
    (another process appended some, or reads an older snapshot), the WAL is left as it
    is: that process is still using it, and checkpoints it itself. A ``TRUNCATE`` alone
    held the other process's turns up for the whole copy (10-30 ms after 3,000 turns)."""
    rows = await db.execute_fetchall("PRAGMA wal_checkpoint(PASSIVE)")
    busy, frames, copied = next(iter(rows))
    if busy == 0 and frames == copied:
        await db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


async def _enter_wal(db: aiosqlite.Connection) -> None:
    """``PRAGMA journal_mode=WAL``, waiting for another process opening the same new
    database: changing the journal mode takes an exclusive lock, and SQLite answers
    "database is locked" at once rather than through the busy handler (two `rolecall
    run` started together on a fresh data dir failed so)."""
    deadline = anyio.current_time() + writer.BUSY_TIMEOUT_S
    delay = 0.002
    while True:
        try:
            await db.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if not writer.is_busy(exc) or anyio.current_time() >= deadline:
                raise
        await anyio.sleep(delay)
        delay = min(delay * 2, 0.05)


class SqliteStore:
    """The SQLite session store.

    ``read_only``: for commands that only read (sessions list/show/trace/export, memory
    show). Where the data directory can be written they open it as usual (so SQLite
    tidies its WAL files away on close); where it cannot (an archive, a backup, a
    read-only mount) the file is opened with ``mode=ro``, or ``immutable=1`` when even
    that cannot work because the WAL's shared-memory file cannot be made: nothing is
    created, migrated or checkpointed, and any write is refused."""

    def __init__(self, path: Path, *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        self._db: aiosqlite.Connection | None = None
        self._writer: sqlite3.Connection | None = None
        # uncontended, a commit takes it without a trip through the event loop
        self._lock = anyio.Lock(fast_acquire=True)
        self._since_checkpoint = (0, 0)  # (commits, bytes) written since the last checkpoint
        self._checkpointer: Checkpointer | None = None
        # group commits (see _grouped): the session of the last commit, how many more
        # commits are grouped, and the batches of a group being gathered
        self._last_sid = ""
        self._written: set[str] = set()  # the sessions whose messages it wrote (search index)
        self._grouping = 0
        self._group: list[tuple[Batch, anyio.Event, list[BaseException | None]]] | None = None
        # which live sessions write which stored ones (storage/claims.py)
        self._claims = FileClaims(self.path.with_name(self.path.name + "-claims"))

    # ------------------------------------------------------------ lifecycle
    async def open(self) -> SqliteStore:
        if self.read_only:
            writable = all(os.access(p, os.W_OK) for p in (self.path, self.path.parent))
            if not writable:
                return await self._open_read_only()
            try:
                return await self._open()
            except StorageError:  # writable as far as permissions say, yet not (immutable)
                return await self._open_read_only()
        return await self._open()

    async def _open(self) -> SqliteStore:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = await aiosqlite.connect(self.path)
            await _enter_wal(self._db)
            await self._db.execute("PRAGMA synchronous=NORMAL")
            await self._db.execute("PRAGMA foreign_keys=ON")
            await self._migrate(self._db)
            self._writer = writer.open_writer(self.path)
            self._checkpointer = Checkpointer(self.path)
        except (OSError, sqlite3.Error) as exc:
            await self.close()
            if isinstance(exc, sqlite3.DatabaseError) and not isinstance(
                exc, sqlite3.OperationalError
            ):
                raise  # damaged content: the command says so, and what to do (sessions.md)
            raise StorageError(f"cannot open the session store {self.path}: {exc}") from exc
        except BaseException:
            await self.close()
            raise
        return self

    async def _open_read_only(self) -> SqliteStore:
        """Open for reading only: ``mode=ro``, else ``immutable=1`` (see the class)."""
        last: sqlite3.Error | None = None
        for flag in ("mode=ro", "immutable=1"):
            try:
                self._db = await aiosqlite.connect(f"{self.path.as_uri()}?{flag}", uri=True)
                version = await self._version(self._db)  # the first read: fails here if any
            except sqlite3.OperationalError as exc:  # e.g. the -shm file cannot be made
                last = exc
                await self.close()
                continue
            except sqlite3.DatabaseError:
                await self.close()
                raise  # damaged content: the command says so, and what to do (sessions.md)
            if version < SCHEMA_VERSION:
                await self.close()
                raise StorageError(
                    f"the session store {self.path} has schema version {version} and cannot "
                    "be upgraded where it is: it is read-only (open it once with write access, "
                    "or read a copy)"
                )
            if flag != "mode=ro":
                log.info("store_opened_immutable", path=str(self.path), error=str(last))
            return self
        raise StorageError(f"cannot open the session store {self.path} to read it: {last}")

    async def close(self) -> None:
        self._claims.release_all()
        if self._writer is not None and self._db is not None:
            with anyio.CancelScope(shield=True):
                try:  # index what this store wrote since the last catch-up
                    if self._written:
                        await fts.catch_up(self._db, sessions=self._written)
                except sqlite3.Error as exc:  # another process writes: a later one will
                    log.info("fts_catch_up_skipped", path=str(self.path), error=str(exc))
        if self._checkpointer is not None:
            checkpointer, self._checkpointer = self._checkpointer, None
            with anyio.CancelScope(shield=True):  # a checkpoint under way finishes first
                await anyio.to_thread.run_sync(checkpointer.close)
        if self._writer is not None:
            conn, self._writer = self._writer, None
            conn.close()
        if self._db is not None:
            db, self._db = self._db, None
            with anyio.CancelScope(shield=True):
                try:
                    if not self.read_only:
                        await _last_checkpoint(db)
                except sqlite3.Error as exc:  # another process is reading: it checkpoints later
                    log.info("checkpoint_skipped", path=str(self.path), error=str(exc))
                await db.close()

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, read_only: bool = False) -> SqliteStore:
        """The store of a data directory: ``<data_dir>/rolecall.db``."""
        return cls(db_path(data_dir), read_only=read_only)

    @classmethod
    def exists_in(cls, data_dir: Path) -> bool:
        """Whether the data directory has a database file."""
        return db_path(data_dir).is_file()

    async def __aenter__(self) -> SqliteStore:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @property
    def writer(self) -> sqlite3.Connection:
        """The connection that commits turns (diagnostics: set a trace callback on it)."""
        if self._writer is None:
            raise StorageError(f"the session store {self.path} is not open")
        return self._writer

    @property
    def db(self) -> aiosqlite.Connection:
        if self._db is None:
            raise StorageError(f"the session store {self.path} is not open")
        return self._db

    async def _migrate(self, db: aiosqlite.Connection) -> None:
        version = await self._version(db)
        if version < SCHEMA_VERSION:
            # one write transaction: another process creating or migrating the schema
            # holds the lock; we wait for it (the busy timeout, 5 s), read the version
            # again, and find its tables instead of creating them a second time
            await db.execute("BEGIN IMMEDIATE")
            try:
                version = await self._version(db)
                for number in range(version, SCHEMA_VERSION):
                    for statement in statements(MIGRATIONS[number]):
                        await db.execute(statement)
                    await db.execute(f"PRAGMA user_version = {number + 1}")
                await db.execute("COMMIT")
            except BaseException:
                with anyio.CancelScope(shield=True), contextlib.suppress(sqlite3.Error):
                    await db.execute("ROLLBACK")
                raise
        async with db.execute("SELECT name FROM sqlite_master") as cur:
            present = {row[0] for row in await cur.fetchall()}
        missing = sorted(EXPECTED_OBJECTS - present)
        if missing:
            raise UsageError(
                f"the session store {self.path} says schema version {SCHEMA_VERSION} but lacks "
                f"{', '.join(missing)}: it was not made by this rolecall; move it away or use "
                "another --data-dir"
            )

    async def _version(self, db: aiosqlite.Connection) -> int:
        async with db.execute("PRAGMA user_version") as cur:
            row = await cur.fetchone()
        version = int(row[0]) if row else 0
        if version > SCHEMA_VERSION:
            raise UsageError(
                f"the session store {self.path} has schema version {version}, newer than this "
                f"rolecall supports ({SCHEMA_VERSION}); upgrade rolecall or use another --data-dir"
            )
        return version

    # ------------------------------------------------------------- writing
    @property
    def location(self) -> str:
        return str(self.path)

    @property
    def claims_folder(self) -> Path:
        """The folder of this store's claims (lock files; storage/claims.py)."""
        return self._claims.folder

    def claim(self, session_id: str) -> Claim:
        sid = safe_id(session_id, "session id")
        try:
            return self._claims.claim(sid)
        except OSError as exc:
            raise StorageError(
                f"cannot claim session {sid} in {self._claims.folder}: {exc.strerror or exc}"
            ) from exc

    def _change(self, session_id: str) -> Claim:
        """The claim under which a stored session is changed outside its turns (deleted,
        an agent's memory cleared): taken for the change, unless a live session of this
        store holds it (the REPL deletes the empty session it leaves)."""
        sid = safe_id(session_id, "session id")
        return Claim(sid) if self._claims.holds(sid) else self.claim(sid)

    async def create(self, new: NewSession) -> None:
        """Write a new session's row (before its first commit)."""
        sid = safe_id(new.session_id, "session id")
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO sessions (id, world_name, title, world_json, world_source, "
                "model_override, state, stop_reason, state_json, last_seq, created_at, "
                "updated_at) VALUES (?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    new.world_name,
                    new.title,
                    new.world_source,
                    new.model_override,
                    new.state,
                    new.stop_reason,
                    new.state_json,
                    new.last_seq,
                    new.created_at,
                    new.created_at,
                ),
            )
            await db.execute(WORLD_INSERT, (sid, new.world_json))

    async def counts(self, session_id: str) -> StoredCounts | None:
        """How much of the session is stored; None when it is not."""
        sid = safe_id(session_id, "session id")
        if not await self._exists(sid):
            return None
        out = []
        for table in ("messages", "execution_log", "drafts"):
            rows = await self.fetch_all(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", sid)
            out.append(int(rows[0][0]) if rows else 0)
        return StoredCounts(out[0], out[1], out[2])

    async def has(self, session_id: str) -> bool:
        """Whether the session is stored here."""
        return await self._exists(safe_id(session_id, "session id"))

    async def _exists(self, sid: str) -> bool:
        return bool(await self.fetch_all("SELECT 1 FROM sessions WHERE id = ?", sid))

    def transaction(self, *, immediate: bool = False) -> _Transaction:
        """``async with store.transaction() as db``: statements on the management
        connection, committed together when the block ends (rolled back on an error);
        ``immediate`` takes the write lock at once (a read-then-write)."""
        return _Transaction(self, "BEGIN IMMEDIATE" if immediate else "BEGIN")

    async def commit(self, batch: TurnBatch) -> None:
        """One transaction: a turn's events, new messages, execution records and drafts,
        and the session's state. The rows are written by one function (see :meth:`_run`).
        """
        sid = batch.session_id
        self._written.add(sid)
        rows = Batch(
            events=event_rows(sid, list(batch.events)),
            messages=[
                (sid, batch.first_message + i, m.id, m.sender, m.model_dump_json())
                for i, m in enumerate(batch.messages)
            ],
            records=[record_row(sid, r) for r in batch.records],
            drafts=[
                (sid, batch.first_draft + i, d.model_dump_json())
                for i, d in enumerate(batch.drafts)
            ],
            session=(
                batch.state,
                batch.stop_reason,
                batch.state_json,
                batch.last_seq,
                batch.updated_at,
                sid,
            ),
        )
        started = time.perf_counter() if debug_enabled() else 0.0
        if sid != self._last_sid:  # sessions take turns here: group their commits a while
            self._grouping = GROUP_FOR_COMMITS if self._last_sid else 0
            self._last_sid = sid
        if self._grouping:
            self._grouping -= 1
            await self._grouped(rows)
        else:
            await self._run(writer.write_batch, rows)
        if started:
            took = round((time.perf_counter() - started) * 1000, 3)
            log.debug("store_commit", session=sid, ms=took, events=len(batch.events))
        self._checkpoint_when_due(rows.size)

    async def _grouped(self, rows: Batch) -> None:
        """Commit ``rows`` with those of the other sessions that reach their commit
        before the event loop comes back here: one transaction for them all.

        The first one to arrive leads: it lets the loop run every other ready task
        once, then writes the rows gathered meanwhile and wakes their sessions. A
        transaction that fails is run again one batch at a time, so that each session
        gets its own error, and the others are written (unless another process kept
        the database locked: then each would wait as long again, and all fail alike).
        """
        done = anyio.Event()
        outcome: list[BaseException | None] = [None]
        if self._group is not None:
            self._group.append((rows, done, outcome))
            with anyio.CancelScope(shield=True):
                await done.wait()
        else:
            self._group = [(rows, done, outcome)]
            try:
                await anyio.lowlevel.cancel_shielded_checkpoint()
            finally:
                members, self._group = self._group, None
            try:
                try:
                    await self._run(writer.write_group, [m[0] for m in members])
                except StorageError as exc:
                    cause = exc.__cause__
                    if isinstance(cause, sqlite3.Error) and writer.is_busy(cause):
                        raise  # another process kept the lock: the same for each batch
                    for batch, _, result in members:
                        try:
                            await self._run(writer.write_batch, batch)
                        except StorageError as one:
                            result[0] = one
            except BaseException as exc:
                # whatever is not known to be written counts as not written: a session
                # that stops on it resumes from what the store holds
                for _, _, result in members:
                    if result[0] is None:
                        result[0] = exc
                raise
            finally:
                for _, event, _ in members:
                    event.set()
        if outcome[0] is not None:
            raise outcome[0]

    async def _run(self, fn: Callable[[sqlite3.Connection, T], None], batch: T) -> None:
        """Run ``fn(conn, batch)`` (one transaction) under the lock, inline if it can be.

        Once called, the transaction is written and the caller records it, even if the
        turn is cancelled meanwhile (otherwise its rows would be written twice): every
        wait in here is shielded, and inline there is none.
        """
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            with anyio.CancelScope(shield=True):
                await self._lock.acquire()
        try:
            conn = self.writer
            checkpointer = self._checkpointer
            if (
                checkpointer is not None
                and checkpointer.finish_wanted
                and checkpointer.busy.acquire(blocking=False)
            ):
                # the tail, then the commit that starts the WAL over: no pass of the
                # thread's may begin between them (see Checkpointer.busy)
                try:
                    finish_checkpoint(conn)
                    checkpointer.finish_wanted = False
                    done = writer.try_inline(fn, conn, batch)
                finally:
                    checkpointer.busy.release()
            else:
                done = writer.try_inline(fn, conn, batch)
            if not done:
                with anyio.CancelScope(shield=True):
                    await self._when_free(fn, conn, batch)
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(f"cannot write to the session store {self.path}: {exc}") from exc
        finally:
            self._lock.release()

    async def _when_free(
        self,
        fn: Callable[[sqlite3.Connection, T], None],
        conn: sqlite3.Connection,
        batch: T,
    ) -> None:
        """Another process holds the write lock: try again inline each time the event
        loop has run its other ready tasks, for up to ``writer.SPIN_S`` (its commits take
        a tenth of a millisecond), then on a worker thread that waits for it.

        No sleep in between: asyncio sleeps at least a millisecond, whatever shorter
        time is asked (its selector's timeout is in whole milliseconds), and so does
        SQLite's own busy handler at its first retry; with two processes on one database
        those waits cost a third of the time (1.1 ms at each of the 13% of commits that
        found the lock taken, measured with the retries this replaced: 0.1 to 0.8 ms
        sleeps)."""
        deadline = time.perf_counter() + writer.SPIN_S
        while time.perf_counter() < deadline:
            await anyio.lowlevel.checkpoint()
            if writer.try_inline(fn, conn, batch):
                return
            # the CPU to the process that has the lock: 50 us, on purpose on the loop's
            # thread (an event-loop sleep would last a millisecond)
            time.sleep(writer.SPIN_PAUSE_S)  # noqa: ASYNC251
        await anyio.to_thread.run_sync(writer.run_waiting, fn, conn, batch)

    def _checkpoint_when_due(self, size: int) -> None:
        """Ask for a checkpoint when enough has been written; the checkpointer's thread
        runs it while the turns go on (storage/checkpointer.py)."""
        commits, written = self._since_checkpoint
        commits, written = commits + 1, written + size
        if commits < CHECKPOINT_EVERY_COMMITS and written < CHECKPOINT_EVERY_BYTES:
            self._since_checkpoint = (commits, written)
            return
        self._since_checkpoint = (0, 0)
        if self._checkpointer is not None:
            self._checkpointer.request()

    # ------------------------------------------------------------- reading
    async def list_sessions(self, where: SessionFilter | None = None) -> list[SessionRow]:
        """The stored sessions, newest first, with a preview and their summed figures
        (see :class:`SessionRow`, :class:`SessionFilter`), in one query.

        Without a filter every session is listed, empty ones included.
        """
        where = where or SessionFilter(with_empty=True)
        if where.search is not None and where.search.split():
            await self.prepare_search()
        query, params = catalog.list_query(where)
        return [SessionRow(*row) for row in await self.fetch_all(query, *params)]

    async def prepare_search(self) -> None:
        """Bring the messages' full-text index up to date for a search (storage/fts.py)."""
        async with self._lock:
            try:
                await fts.prepare(self.db, writable=self._writer is not None)
            except sqlite3.Error as exc:
                raise StorageError(f"cannot search the session store {self.path}: {exc}") from exc

    async def resolve_id(self, text: str) -> str:
        """The full session id ``text`` stands for: itself, ``last`` or a unique prefix.

        ``text`` is returned unchanged when no stored id matches (``load`` then says so);
        a prefix shared by several ids is a UsageError listing them.
        """
        if text != "last" and await self._exists(text):
            return text
        query, params = catalog.prefix_query(text)
        found = [sid for (sid,) in await self.fetch_all(query, *params)]
        if len(found) == 1:
            return str(found[0])
        if text == "last" and not found:
            raise UsageError(f"no session stored in {self.path} yet: nothing is 'last'")
        if len(found) > 1:
            shown = ", ".join(found[:10]) + (", ..." if len(found) > 10 else "")
            raise UsageError(
                f"session id '{text}' is ambiguous: {len(found)} sessions start with it ({shown})"
            )
        return text

    async def costs(self) -> dict[str, float | None]:
        """Each session's cost in USD: the sum over its agent messages, None when one of
        them has no known cost (sessions without agent messages are left out)."""
        rows = await self.fetch_all(
            "SELECT session_id, SUM(json_extract(body, '$.cost_usd')), "
            "SUM(json_extract(body, '$.cost_usd') IS NULL) FROM messages "
            "WHERE json_extract(body, '$.kind') = 'agent' GROUP BY session_id"
        )
        return {sid: None if unknown else float(total or 0.0) for sid, total, unknown in rows}

    async def load(self, session_id: str, *, with_events: bool = True) -> SessionDocument:
        """The stored session as a document; StorageError naming a row that does not read."""
        sid = safe_id(session_id, "session id")
        try:
            return await self._load(sid, session_id, with_events=with_events)
        except (ValueError, TypeError, KeyError) as exc:  # pydantic's, json's, a row's shape
            first = exc.errors()[0] if isinstance(exc, ValidationError) else None
            what = (
                f"{'.'.join(str(p) for p in first['loc']) or 'a row'}: {first['msg']}"
                if first
                else f"{type(exc).__name__}: {exc}"
            )
            raise StorageError(
                f"the session store {self.path} holds a damaged row of session {sid} (its "
                f"messages, log or state do not read: {what}). Restore {self.path.name} from a "
                f"backup, or export what still reads elsewhere and `rolecall sessions delete "
                f"{sid}{data_dir_flag(self.path)}` (sessions.md, A damaged store)"
            ) from exc

    async def _load(self, sid: str, session_id: str, *, with_events: bool) -> SessionDocument:
        found = await self.fetch_all(
            "SELECT w.world_json, s.world_source, s.model_override, s.state_json, s.last_seq, "
            "s.created_at, s.updated_at FROM sessions AS s JOIN session_worlds AS w "
            "ON w.session_id = s.id WHERE s.id = ?",
            sid,
        )
        row = found[0] if found else None
        if row is None:
            recent = SessionFilter(with_empty=True, limit=5)
            known = [r.id for r in await self.list_sessions(recent)]
            hint = f" (recent: {', '.join(known)})" if known else " (no sessions stored yet)"
            raise UsageError(f"no session '{session_id}' in {self.path}{hint}")
        world_json, source, override, state_text, last_seq, created, updated = row
        messages = [
            TranscriptMessage.model_validate_json(b)
            for (b,) in await self.fetch_all(
                "SELECT body FROM messages WHERE session_id = ? ORDER BY idx", sid
            )
        ]
        records = [
            record_from_row(r)
            for r in await self.fetch_all(
                "SELECT * FROM execution_log WHERE session_id = ? ORDER BY execution_order", sid
            )
        ]
        drafts = [
            Draft.model_validate_json(b)
            for (b,) in await self.fetch_all(
                "SELECT body FROM drafts WHERE session_id = ? ORDER BY idx", sid
            )
        ]
        events: list[dict[str, Any]] = []
        if with_events:  # the streamed events (sse) are not part of a session document
            for record, count in await self.fetch_all(
                "SELECT record, count FROM events_packed WHERE session_id = ? AND topic != 'sse' "
                "ORDER BY seq",
                sid,
            ):
                if count == 1:
                    events.append(json.loads(record))
                else:
                    events.extend(json.loads(record))
        # the sequence goes on after the last event actually stored (an event published
        # while a commit was under way, then lost in a crash, leaves no gap behind)
        ((last_seq,),) = await self.fetch_all(
            "SELECT COALESCE(MAX(seq + count - 1), 0) FROM events_packed WHERE session_id = ?",
            sid,
        )
        return SessionDocument.model_validate(
            {
                "session_id": sid,
                "created_at": created,
                "updated_at": updated,
                "world": json.loads(world_json),
                "world_source": source,
                "model_override": override,
                "state": json.loads(state_text),
                "last_seq": last_seq,
                "messages": messages,
                "execution_log": records,
                "drafts": drafts,
                "events": events,
            }
        )

    async def fetch_all(self, query: str, *params: Any) -> list[Any]:
        """Every row of ``query``, read in one call on aiosqlite's thread.

        No statement stays open across an await: a read still stepping while the writer
        commits would pin an old snapshot, and a management write on this connection
        (begun meanwhile by another task) would then fail with "database is locked".
        """
        return list(await self.db.execute_fetchall(query, params))

    async def forks(self) -> dict[str, tuple[str, str]]:
        """Forked session id -> (parent id, fork point), from each state's ``extra.fork``."""
        query = (
            "SELECT id, json_extract(state_json, '$.extra.fork.parent'), "
            "json_extract(state_json, '$.extra.fork.at') FROM sessions "
            "WHERE json_extract(state_json, '$.extra.fork.parent') IS NOT NULL"
        )
        rows = await self.fetch_all(query)
        return {str(sid): (str(parent), str(at)) for sid, parent, at in rows}

    async def delete(self, session_id: str) -> int | None:
        """Delete the session; the number of messages it held, None when it was not stored.
        SessionInUse while a live session writes it (in another store or process)."""
        claim = self._change(session_id)
        try:
            return await self._delete(claim.session_id)
        finally:
            claim.release()

    async def _delete(self, sid: str) -> int | None:
        async with self.transaction() as db:
            rows = list(
                await db.execute_fetchall(
                    "SELECT (SELECT COUNT(*) FROM messages WHERE session_id = ?) "
                    "FROM sessions WHERE id = ?",
                    (sid, sid),
                )
            )
            tables = ("events_packed", "messages", "execution_log", "drafts", "session_worlds")
            for table in (*tables, "scores"):
                await db.execute(f"DELETE FROM {table} WHERE session_id = ?", (sid,))
            await db.execute("DELETE FROM sessions WHERE id = ?", (sid,))
        return int(rows[0][0]) if rows else None

    async def forget(self, session_id: str, agent: str) -> int:
        """Clear ``agent``'s memory in the stored state: ``memory_start[agent]`` becomes the
        number of stored messages (returned), its turn count 0. One transaction.
        SessionInUse while a live session writes it (that session's next commit would
        write its own state over this one)."""
        claim = self._change(session_id)
        try:
            return await self._forget(claim.session_id, agent)
        finally:
            claim.release()

    async def _forget(self, sid: str, agent: str) -> int:
        async with self.transaction(immediate=True) as db:
            found = list(
                await db.execute_fetchall("SELECT state_json FROM sessions WHERE id = ?", (sid,))
            )
            if not found:
                raise UsageError(f"no session '{sid}' in {self.path}")
            counted = list(
                await db.execute_fetchall(
                    "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)
                )
            )
            count = int(counted[0][0]) if counted else 0
            state = StateDoc.model_validate_json(found[0][0])
            state.turn_counts[agent] = 0
            state.memory_start[agent] = count
            await db.execute(
                "UPDATE sessions SET state_json = ?, updated_at = ? WHERE id = ?",
                (state.model_dump_json(), datetime.now(UTC).isoformat(), sid),
            )
        return count

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
        """Store a fork of the session right after message ``at`` (see
        :mod:`rolecall.storage.fork_copy`): the rows are copied inside the store in one
        transaction. What the fork holds besides the copied rows."""
        from rolecall.storage import fork_copy

        sid = safe_id(session_id, "session id")
        if not await self._exists(sid):
            await self._load(sid, session_id, with_events=False)  # the error naming it
        async with self.transaction(immediate=True) as db:
            plan, row = await fork_copy.plan(
                db, sid, at, new_id=new_id, now=now, edit=edit, model=model
            )
            await fork_copy.copy_rows(db, sid, plan, row)
        self._written.add(new_id)
        return plan

    async def import_document(self, doc: SessionDocument) -> None:
        """Store a session read from a file (all of it), unless it is already stored."""
        sid = safe_id(doc.session_id, "session id")
        if await self._exists(sid):
            return
        check_document(doc, f"session {sid}")  # parts that disagree: nothing is stored
        try:
            await self._import(sid, doc)
        except OverflowError as exc:  # a count or token number past what SQLite holds
            raise UsageError(
                f"session {sid}: damaged session file: a number is too large to store ({exc})"
            ) from None

    async def _import(self, sid: str, doc: SessionDocument) -> None:
        self._written.add(sid)
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO sessions VALUES (?, ?, ?, '', ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    sid,
                    doc.world.get("name", ""),
                    doc.world.get("title", ""),
                    doc.world_source,
                    doc.model_override,
                    doc.state.state,
                    doc.state.stop_reason,
                    doc.state.model_dump_json(),
                    doc.last_seq,
                    doc.created_at.isoformat(),
                    doc.updated_at.isoformat(),
                ),
            )
            await db.execute(WORLD_INSERT, (sid, json.dumps(doc.world)))
            await db.executemany(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?)",
                [(sid, i, m.id, m.sender, m.model_dump_json()) for i, m in enumerate(doc.messages)],
            )
            await db.executemany(
                "INSERT INTO execution_log VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [record_row(sid, r) for r in doc.execution_log],
            )
            await db.executemany(
                "INSERT INTO drafts VALUES (?, ?, ?)",
                [(sid, i, d.model_dump_json()) for i, d in enumerate(doc.drafts)],
            )
            await db.executemany(
                "INSERT INTO events_packed VALUES (?, ?, ?, ?, ?, 1)",
                [
                    (sid, e["seq"], e["topic"], e["type"], json.dumps(e, ensure_ascii=False))
                    for e in doc.events
                ],
            )


class _Transaction:
    """``async with``: the store's lock, BEGIN, COMMIT or ROLLBACK; errors as StorageError."""

    def __init__(self, store: SqliteStore, begin: str = "BEGIN") -> None:
        self.store = store
        self.begin = begin

    async def __aenter__(self) -> aiosqlite.Connection:
        await self.store._lock.acquire()
        try:
            await self.store.db.execute(self.begin)
        except BaseException as exc:
            self.store._lock.release()
            if isinstance(exc, sqlite3.Error):
                raise StorageError(
                    f"cannot write to the session store {self.store.path}: {exc}"
                ) from exc
            raise
        return self.store.db

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: object
    ) -> None:
        db = self.store.db
        try:
            if kind is None:
                await db.commit()
            else:
                await db.rollback()
        finally:
            self.store._lock.release()
        if isinstance(exc, sqlite3.Error | OSError):
            raise StorageError(
                f"cannot write to the session store {self.store.path}: {exc}"
            ) from exc
