"""Passive memory files (chat.md, Passive memory): one JSON Lines file per session and agent.

``<root>/<session id>/<agent id>.jsonl``, where ``root`` is ``<data dir>/memory``. Each line
is one message as that agent saw it, in the chat format providers use::

    {"role": "user", "content": "hello @alice", "name": "human", "message_id": "m1",
     "ts": "2024-05-01T12:00:00+00:00"}

The agent's own messages are ``assistant``, human and other agents' messages are ``user``
(``name`` is the sender) and system messages are ``system`` (``name`` is ``"system"``),
exactly as :func:`rolecall.prompt.memory_entry` shows them in a prompt.

Concurrency. Many sessions may share one :class:`MemoryFiles` and run at once in one
process. Appends to a file are serialised by an :class:`anyio.Lock` per path; the blocking
I/O of one message (one line in every agent's file) runs in a single
``anyio.to_thread.run_sync`` call, so a turn costs one thread hop. Inside the worker each
file is written under a :class:`threading.Lock` per path, which the synchronous
:meth:`MemoryFiles.read` and :meth:`MemoryFiles.clear` take too, so a read never sees half
of an append and a clear never races one. Per-path locks live in a
:class:`weakref.WeakValueDictionary`: they exist while someone uses the file and vanish
after, so a long-running process does not accumulate one entry per file ever written.

Durability. Lines are written whole with one ``write`` loop on an unbuffered ``O_APPEND``
handle and flushed to the kernel before the append returns; by default there is **no
fsync**. A crash of the process therefore loses nothing that was appended; a crash of the
machine (power loss, kernel panic) may lose the last lines written or leave a torn or
zero-filled tail. That tail is repaired the next time the file is opened (below). The
memory files are a passive, derived record: the session store (SQLite, committed at
every turn) is the source of truth, and an fsync per agent per message would cost
milliseconds per turn on most disks. Pass ``fsync=True`` for files that must survive power
loss as well.

Torn tails. Whenever this process opens a file (to append or to read), it first checks
the last byte on the handle it opened anyway. If the file does not end with ``\\n``, the
bytes after the last newline are appended to ``<agent>.jsonl.torn`` beside it (and that
file is fsynced, so the rescued bytes are durable before anything is cut), the file is
truncated to its last newline and a warning is logged. Checking at every open rather than
only the first costs one one-byte read and also covers an append of this process that
failed half-way (disk full): that partial line is cut at once when possible, else at the
next open. Lines that are complete but not valid JSON objects are skipped (and logged) by
:meth:`MemoryFiles.read`, never deleted.

Errors. Every ``OSError`` (read-only directory, disk full, a path that is not a
directory, ...) is raised as :class:`rolecall.errors.StorageError` naming the file and the
cause. When an append fails for one agent, the agents before it already have the line.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import weakref
from collections.abc import Sequence
from contextlib import AsyncExitStack, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio
import structlog

from rolecall.errors import StorageError
from rolecall.paths import safe_id
from rolecall.prompt import memory_entry

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.session.state import Message

__all__ = ["MemoryFiles", "memory_line"]

log = structlog.get_logger(__name__)

_SUFFIX = ".jsonl"
_TORN_SUFFIX = ".jsonl.torn"
_ARCHIVE_SUFFIX = ".jsonl.archived"
_CHUNK = 64 * 1024


def memory_line(message: Message, agent_id: str) -> dict[str, Any]:
    """The memory entry of ``message`` in ``agent_id``'s file (a JSON-ready dict)."""
    entry = memory_entry(message, agent_id)
    return {
        "role": entry.role,
        "content": message.content,
        "name": entry.name,
        "message_id": message.id,
        "ts": message.ts.isoformat(),
    }


def _encode(record: dict[str, Any]) -> bytes:
    """One JSON line. ``json`` escapes ``\\n`` inside strings, so the line is one line."""
    return (json.dumps(record, ensure_ascii=False, separators=(", ", ": ")) + "\n").encode()


def _cause(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__


class _Slot:
    """The locks of one file: async (appenders queue here) and thread (actual I/O)."""

    __slots__ = ("__weakref__", "async_lock", "thread_lock")

    def __init__(self) -> None:
        self.async_lock = anyio.Lock()
        self.thread_lock = threading.Lock()


class MemoryFiles:
    """The memory files under ``root`` (``<data dir>/memory``)."""

    def __init__(self, root: Path, *, fsync: bool = False) -> None:
        self.root = Path(root)
        self.fsync = fsync
        self._locks: weakref.WeakValueDictionary[Path, _Slot] = weakref.WeakValueDictionary()
        self._guard = threading.Lock()
        self._attached: weakref.WeakSet[Session] = weakref.WeakSet()

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, fsync: bool = False) -> MemoryFiles:
        """The memory files of a data directory (see :func:`rolecall.paths.data_dir`)."""
        return cls(Path(data_dir) / "memory", fsync=fsync)

    # ------------------------------------------------------------------ paths
    def path(self, session_id: str, agent_id: str) -> Path:
        """``<root>/<session id>/<agent id>.jsonl``; both ids must pass :func:`safe_id`."""
        session = safe_id(session_id, "session id")
        agent = safe_id(agent_id, "agent id")
        return self.root / session / f"{agent}{_SUFFIX}"

    def _slot(self, path: Path) -> _Slot:
        with self._guard:
            slot = self._locks.get(path)
            if slot is None:
                slot = _Slot()
                self._locks[path] = slot
            return slot

    # ---------------------------------------------------------------- writing
    def attach(self, session: Session) -> None:
        """Save every message ``session`` commits in every agent's file (once per session)."""
        if session in self._attached:
            return
        session_id = safe_id(session.session_id, "session id")
        self._attached.add(session)

        async def save_to_memory(message: Message) -> None:
            await self.record(session_id, session.world.role_ids, message)

        session.commit_hooks.append(save_to_memory)

    async def record(self, session_id: str, agent_ids: Sequence[str], message: Message) -> None:
        """Append ``message`` to the file of each of ``agent_ids`` (one thread hop)."""
        batch = [
            (self.path(session_id, agent), _encode(memory_line(message, agent)))
            for agent in dict.fromkeys(agent_ids)
        ]
        if not batch:
            return
        # Hold a reference to every slot until the writes are done (the dict is weak),
        # and take the async locks in path order so two writers can never deadlock.
        slots = [(path, self._slot(path)) for path, _ in batch]
        async with AsyncExitStack() as stack:
            for _, slot in sorted(slots, key=lambda item: item[0]):
                await stack.enter_async_context(slot.async_lock)
            await anyio.to_thread.run_sync(self._write_batch, batch, [s for _, s in slots])

    def _write_batch(self, batch: list[tuple[Path, bytes]], slots: list[_Slot]) -> None:
        """Worker thread: one line per file, each under its thread lock."""
        for folder in dict.fromkeys(path.parent for path, _ in batch):
            try:
                folder.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create memory folder {folder}: {_cause(exc)}") from exc
        for (path, line), slot in zip(batch, slots, strict=True):
            with slot.thread_lock:
                self._append(path, line)

    def _append(self, path: Path, line: bytes) -> None:
        try:
            with open(path, "a+b", buffering=0) as handle:
                self._repair(handle, path)
                start = handle.seek(0, os.SEEK_END)
                try:
                    _write_all(handle, line)
                    if self.fsync:
                        os.fsync(handle.fileno())
                except OSError:
                    # never leave our own partial line behind (disk full); if even the
                    # truncate fails, the next open repairs it
                    with suppress(OSError):
                        handle.truncate(start)
                    raise
        except OSError as exc:
            raise StorageError(f"cannot append to memory file {path}: {_cause(exc)}") from exc

    # ---------------------------------------------------------------- repair
    def _repair(self, handle: IO[bytes], path: Path) -> None:
        """Move a torn last line (no trailing newline) into ``<agent>.jsonl.torn``."""
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        cut = _after_last_newline(handle, size)
        handle.seek(cut)
        tail = handle.read(size - cut)
        torn = path.with_name(path.name[: -len(_SUFFIX)] + _TORN_SUFFIX)
        with open(torn, "ab", buffering=0) as out:
            _write_all(out, tail + b"\n")
            os.fsync(out.fileno())  # the rescued bytes are durable before we cut them
        handle.truncate(cut)
        log.warning(
            "memory_torn_line_repaired",
            file=str(path),
            torn_file=str(torn),
            bytes=len(tail),
            kept_bytes=cut,
        )

    # ---------------------------------------------------------------- reading
    def read(self, session_id: str, agent_id: str) -> list[dict[str, Any]]:
        """Every valid entry of the agent's file, in order ([] when there is no file).

        A torn last line is repaired first; lines that are not JSON objects are skipped
        and reported in the log.
        """
        path = self.path(session_id, agent_id)
        slot = self._slot(path)  # keep a reference: the lock lives as long as the slot
        with slot.thread_lock:
            try:
                data = self._read_repaired(path)
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise StorageError(f"cannot read memory file {path}: {_cause(exc)}") from exc
        entries: list[dict[str, Any]] = []
        for number, raw in enumerate(data.split(b"\n")[:-1], start=1):
            try:
                value = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                log.warning("memory_line_skipped", file=str(path), line=number, error=str(exc))
                continue
            if not isinstance(value, dict):
                log.warning(
                    "memory_line_skipped", file=str(path), line=number, error="not a JSON object"
                )
                continue
            entries.append(value)
        return entries

    def _read_repaired(self, path: Path) -> bytes:
        with open(path, "rb") as handle:
            data = handle.read()
        if not data or data.endswith(b"\n"):
            return data
        with open(path, "r+b", buffering=0) as handle:
            self._repair(handle, path)
            handle.seek(0)
            return handle.read()

    # --------------------------------------------------------------- clearing
    def clear(self, session_id: str, agent_id: str) -> Path | None:
        """Archive the agent's file beside it; the archive's path, or None if no file.

        The archive is ``<agent>.<UTC timestamp>.jsonl.archived``; the next message starts
        a new file.
        """
        path = self.path(session_id, agent_id)
        agent = path.name[: -len(_SUFFIX)]
        slot = self._slot(path)  # keep a reference: the lock lives as long as the slot
        with slot.thread_lock:
            if not path.exists():
                return None
            stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ")
            archive = path.with_name(f"{agent}.{stamp}{_ARCHIVE_SUFFIX}")
            n = 1
            while archive.exists():
                archive = path.with_name(f"{agent}.{stamp}-{n}{_ARCHIVE_SUFFIX}")
                n += 1
            try:
                os.rename(path, archive)
            except FileNotFoundError:
                return None
            except OSError as exc:
                raise StorageError(
                    f"cannot archive memory file {path} to {archive.name}: {_cause(exc)}"
                ) from exc
        log.info("memory_cleared", file=str(path), archive=str(archive))
        return archive


def _write_all(handle: IO[bytes], data: bytes) -> None:
    """Write every byte of ``data`` on an unbuffered handle (``write`` may be partial)."""
    view = memoryview(data)
    while view:
        written = handle.write(view)
        if not written:  # None (would block) or 0: never on a regular file; do not spin
            raise OSError(errno.EIO, "short write")
        view = view[written:]


def _after_last_newline(handle: IO[bytes], size: int) -> int:
    """The offset just after the last ``\\n`` before ``size`` (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _CHUNK)
        handle.seek(start)
        chunk = handle.read(end - start)
        index = chunk.rfind(b"\n")
        if index >= 0:
            return start + index + 1
        end = start
    return 0
