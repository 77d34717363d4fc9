"""Passive memory files (chat.md, Passive memory): one JSON Lines file per session and agent.

``<root>/<session id>/<agent id>.jsonl``, where ``root`` is ``<data dir>/memory``. Each line
is one message as that agent saw it, in the chat format providers use::

    {"role": "user", "content": "hello @alice", "name": "human", "message_id": "m1",
     "ts": "2024-05-01T12:00:00+00:00"}

The agent's own messages are ``assistant``, human and other agents' messages are ``user``
(``name`` is the sender) and system messages are ``system`` (``name`` is ``"system"``),
exactly as :func:`rolecall.prompt.memory_entry` shows them in a prompt.

Concurrency. Many sessions may share one :class:`MemoryFiles` and run at once in one
process. One message's lines (one per agent) are appended inline on the event loop, to
files kept open (up to half the file-descriptor limit, at most 4096; least recently
used closed first): each append is one
``write`` of a whole line into the page cache, a few microseconds, far cheaper than a
thread hand-off per message. The event loop runs one append at a time, so appends never
interleave; each file also has a :class:`threading.Lock`, taken by appends and by the
synchronous :meth:`MemoryFiles.read` and :meth:`MemoryFiles.clear` (which may run in other
threads), so a read never sees half of an append and a clear never races one. Per-path
locks live in a :class:`weakref.WeakValueDictionary`: they exist while someone uses the
file and vanish after.

Durability. Lines are written whole with one ``write`` loop on an unbuffered ``O_APPEND``
handle and flushed to the kernel before the append returns; by default there is **no
fsync**. A crash of the process therefore loses nothing that was appended; a crash of the
machine (power loss, kernel panic) may lose the last lines written or leave a torn or
zero-filled tail. That tail is repaired the next time the file is opened (below). The
memory files are a passive, derived record: the session store (SQLite, committed at
every turn) is the source of truth, and an fsync per agent per message would cost
milliseconds per turn on most disks. Pass ``fsync=True`` for files that must survive power
loss as well.

Torn tails. When this process opens a file (to append or to read), it first checks the
last byte. If the file does not end with ``\\n``, the bytes after the last newline are
appended to ``<agent>.jsonl.torn`` beside it (and that file is fsynced, so the rescued
bytes are durable before anything is cut), the file is truncated to its last newline and
a warning is logged. An append of this process that fails half-way (disk full) cuts its
own partial line at once when it can, and closes the file so that the next append
reopens and checks it. Lines that are complete but not valid JSON objects are skipped
(and logged) by :meth:`MemoryFiles.read`, never deleted.

Errors. Every ``OSError`` (read-only directory, disk full, a path that is not a
directory, ...) is raised as :class:`rolecall.errors.StorageError` naming the file and the
cause. When an append fails for one agent, the agents before it already have the line.
"""

from __future__ import annotations

import errno
import json
import os
import re
import threading
import weakref
from collections import OrderedDict
from collections.abc import Collection, Mapping, Sequence
from contextlib import suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import anyio

from rolecall.errors import StorageError
from rolecall.log import get_logger
from rolecall.paths import safe_id
from rolecall.prompt import memory_entry
from rolecall.session.audience import can_see, seen

if TYPE_CHECKING:
    from rolecall.runtime import Dialogue
    from rolecall.session.state import TranscriptMessage

__all__ = ["MemoryFiles", "memory_line"]

log = get_logger(__name__)

_SUFFIX = ".jsonl"
_TORN_SUFFIX = ".jsonl.torn"
_ARCHIVE_SUFFIX = ".jsonl.archived"


def _max_open() -> int:
    """How many memory files to keep open at once (least recently used closed first):
    half the process's file-descriptor limit, between 64 and 4096 (256 without one)."""
    try:
        import resource
    except ImportError:  # Windows
        return 256
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return 4096
    return min(4096, max(64, soft // 2))


_MAX_OPEN = _max_open()
_CHUNK = 64 * 1024


def memory_line(message: TranscriptMessage, agent_id: str) -> dict[str, Any]:
    """The memory entry of ``message`` in ``agent_id``'s file (a JSON-ready dict)."""
    entry = memory_entry(message, agent_id)
    line: dict[str, Any] = {
        "role": entry.role,
        "content": message.content,
        "name": entry.name,
        "message_id": message.id,
        "ts": message.ts.isoformat(),
    }
    if message.tool_calls and message.sender == agent_id:  # its own calls (tools.md)
        line["tool_calls"] = list(message.tool_calls)
    return line


_to_json = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": ")).encode


_MESSAGE_NUMBER = re.compile(r"^m([1-9][0-9]*)$")
_MESSAGE_ID_KEY = b'"message_id": "'


def _message_id_of(line: bytes) -> bytes:
    """The message id of an encoded memory line (the key's quotes are never escaped;
    a quote inside the content is)."""
    at = line.rfind(_MESSAGE_ID_KEY)
    if at < 0:
        return b""
    at += len(_MESSAGE_ID_KEY)
    return line[at : line.find(b'"', at)]


def _encode(record: dict[str, Any]) -> bytes:
    """One JSON line. ``json`` escapes ``\\n`` inside strings, so the line is one line."""
    return (_to_json(record) + "\n").encode()


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
        self._attached: weakref.WeakSet[Dialogue] = weakref.WeakSet()
        self._paths: dict[tuple[str, str], Path] = {}
        self._targets: dict[tuple[str, str], tuple[Path, _Slot]] = {}
        self._ends: dict[Path, int] = {}  # the size of each file kept open
        self._handles: OrderedDict[Path, IO[bytes]] = OrderedDict()
        # close the files kept open when this object goes away, whoever forgot to
        self._finalizer = weakref.finalize(self, _close_all, self._handles)

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
    def attach(self, session: Dialogue) -> None:
        """Save every message ``session`` commits in every agent's file (once per session)."""
        if session in self._attached:
            return
        session_id = safe_id(session.session_id, "session id")
        self._attached.add(session)

        async def save_to_memory(message: TranscriptMessage) -> None:
            await self.record(session_id, session.world.role_ids, message, session.limits)

        session.commit_hooks.append(save_to_memory)

    def rebuild(
        self,
        session_id: str,
        agent_ids: Sequence[str],
        messages: Sequence[TranscriptMessage],
        starts: dict[str, int],
        limits: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        """Write each agent's file of a new session (a fork) in one go: the messages it
        saw (audiences.md; ``limits``: the roles' ``sees:``) from its ``starts`` index on
        (a cleared memory starts later), replacing any file."""
        limits = limits or {}
        for agent in dict.fromkeys(agent_ids):
            path, slot = self._target(session_id, agent)
            kept = seen(messages, agent, start=starts.get(agent, 0), limit=limits.get(agent))
            data = b"".join(_encode(memory_line(m, agent)) for m in kept)
            self._replace(path, slot, data)

    def _replace(self, path: Path, slot: _Slot, data: bytes) -> None:
        """Write ``data`` as the whole file (closing our append handle first)."""
        with slot.thread_lock:
            self._close(path)
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
            except OSError as exc:
                raise StorageError(f"memory file {path}: {_cause(exc)}") from exc

    def fork(
        self,
        parent_id: str,
        session_id: str,
        agent_ids: Sequence[str],
        starts: dict[str, int],
        last: TranscriptMessage,
        *,
        edited: bool,
    ) -> bool:
        """Write each agent's file of a fork at ``last`` (mK) from the parent's file: its
        lines for m(start+1)..mK, mK's line written again when it was edited. False, and
        nothing written, when a parent file does not hold exactly those lines in order
        (then :meth:`rebuild` from the messages): so it is whenever a message among them
        was private (audiences.md), which the rebuild leaves out of the files it must."""
        k = _MESSAGE_NUMBER.match(last.id)
        if k is None:
            return False
        files: dict[str, bytes] = {}
        for agent in dict.fromkeys(agent_ids):
            start = starts.get(agent, 0)
            wanted = int(k.group(1)) - start
            data = b""
            if wanted > 0:
                try:
                    with self._slot(self._path_of(parent_id, agent)).thread_lock:
                        data = self._read_repaired(self._path_of(parent_id, agent))
                except OSError:
                    return False
                lines = data.split(b"\n", wanted)[:wanted]
                if len(lines) < wanted or any(
                    _message_id_of(line) != f"m{start + n}".encode()
                    for n, line in enumerate(lines, start=1)
                ):
                    return False
                if edited:
                    lines[-1] = _encode(memory_line(last, agent))[:-1]
                data = b"\n".join(lines) + b"\n"
            files[agent] = data
        for agent, data in files.items():
            self._replace(*self._target(session_id, agent), data)
        return True

    async def record(
        self,
        session_id: str,
        agent_ids: Sequence[str],
        message: TranscriptMessage,
        limits: Mapping[str, Collection[str]] | None = None,
    ) -> None:
        """Append ``message`` to the file of each of ``agent_ids`` that sees it
        (audiences.md; ``limits``: the roles' ``sees:``).

        Each append is one unbuffered ``write`` of a whole line to a file kept open (a
        few microseconds into the page cache), done right here on the event loop: a
        thread hand-off per message would cost far more than the writes. Appends to
        one file never interleave: the event loop runs one ``record`` at a time and
        readers take the file's thread lock.
        """
        lines: dict[str, bytes] = {}  # a message reads the same to every agent but its sender
        if message.audience is not None or limits:
            agent_ids = [
                a for a in agent_ids if can_see(a, message, limits.get(a) if limits else None)
            ]
        for agent in dict.fromkeys(agent_ids):
            path, slot = self._target(session_id, agent)
            key = "own" if agent == message.sender and message.kind != "system" else "other"
            line = lines.get(key)
            if line is None:
                line = lines[key] = _encode(memory_line(message, agent))
            with slot.thread_lock:
                self._append(path, line)

    def _target(self, session_id: str, agent_id: str) -> tuple[Path, _Slot]:
        """The file of an agent and its locks, computed once per session and agent."""
        key = (session_id, agent_id)
        found = self._targets.get(key)
        if found is None:
            path = self._path_of(session_id, agent_id)
            found = self._targets[key] = (path, self._slot(path))
        return found

    def _path_of(self, session_id: str, agent_id: str) -> Path:
        key = (session_id, agent_id)
        path = self._paths.get(key)
        if path is None:
            path = self._paths[key] = self.path(session_id, agent_id)
        return path

    def _handle(self, path: Path) -> IO[bytes]:
        """The open append handle of ``path``; opening it repairs a torn last line."""
        handle = self._handles.pop(path, None)
        if handle is None:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StorageError(
                    f"cannot create memory folder {path.parent}: {_cause(exc)}"
                ) from exc
            handle = open(path, "a+b", buffering=0)  # noqa: SIM115 - kept open on purpose
            try:
                self._repair(handle, path)
                self._ends[path] = handle.seek(0, os.SEEK_END)
            except BaseException:
                handle.close()
                raise
            while len(self._handles) >= _MAX_OPEN:
                evicted, oldest = self._handles.popitem(last=False)
                self._ends.pop(evicted, None)
                oldest.close()
        self._handles[path] = handle  # most recently used last
        return handle

    def _close(self, path: Path) -> None:
        handle = self._handles.pop(path, None)
        self._ends.pop(path, None)
        if handle is not None:
            handle.close()

    def close(self) -> None:
        """Close every file kept open (they reopen, and are checked, on the next append)."""
        _close_all(self._handles)

    def _append(self, path: Path, line: bytes) -> None:
        try:
            handle = self._handle(path)
            start = self._ends[path]
            try:
                _write_all(handle, line)
                if self.fsync:
                    os.fsync(handle.fileno())
                self._ends[path] = start + len(line)
            except OSError:
                # never leave our own partial line behind (disk full); if even the
                # truncate fails, the next open repairs it
                with suppress(OSError):
                    handle.truncate(start)
                self._close(path)
                raise
        except OSError as exc:
            raise StorageError(f"cannot append to memory file {path}: {_cause(exc)}") from exc

    def reconcile(self, session: Dialogue) -> int:
        """Append what each agent's file misses of the stored messages it saw.

        The store is the source of truth; after a failed append (disk full) or a session
        restored from a file, every agent's file ends with the messages it should hold,
        each once. Returns the number of lines appended.
        """
        added = 0
        messages = session.state.transcript.messages
        for agent in session.world.role_ids:
            have = {e.get("message_id") for e in self.read(session.session_id, agent)}
            start = session.state.memory_start.get(agent, 0)
            path = self._path_of(session.session_id, agent)
            slot = self._slot(path)
            with slot.thread_lock:
                for message in seen(messages, agent, start=start, limit=session.limits.get(agent)):
                    if message.id not in have:
                        self._append(path, _encode(memory_line(message, agent)))
                        added += 1
        if added:
            log.info("memory_reconciled", session=session.session_id, lines=added)
        return added

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
            self._close(path)  # the next message starts a new file
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


def _close_all(handles: OrderedDict[Path, IO[bytes]]) -> None:
    while handles:
        _, handle = handles.popitem()
        handle.close()


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
