"""One writer per session: a claim is an exclusive lock on a file next to the store.

Two processes that went on with one stored session (``rolecall resume`` twice, a REPL's
``/load`` while a run goes on, the web view and a script) would both append its next
message: the second's commit then failed on a duplicate key, and a REPL that had been
idle found its session no longer written to. A session is claimed when a live session
is attached to the store, and released when it is closed; a second claim is refused at
once with :class:`SessionInUse`, naming the process that holds it.

The lock is the operating system's (``flock`` on POSIX, ``msvcrt.locking`` on Windows),
on ``<store>-claims/<session id>``: it ends with the process however the process ends
(``kill -9`` too), so a claim is never stale. The file holds the holder's pid, command
and start, for the message. A released claim removes its file while still holding the
lock; a claim re-checks, once it has the lock, that its file is still the one at that
path (the inode), so that a process that opened the file just before it was removed
does not hold a claim on a file nobody else can see.

Not a dependency: ``filelock`` (installed with litellm) does the same in 17 ms of
imports at each start, against the first offline message's 0.3 s budget.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rolecall.errors import SessionInUse

__all__ = ["Claim", "FileClaims"]

_WINDOWS_OFFSET = 1 << 20  # Windows locks a byte range: one byte far past the holder's text
_BINARY = getattr(os, "O_BINARY", 0)  # Windows opens in text mode otherwise


class Claim:
    """A session claimed by this process; :meth:`release` ends it (idempotent)."""

    def __init__(self, session_id: str, release: Callable[[], None] | None = None) -> None:
        self.session_id = session_id
        self._release = release

    def release(self) -> None:
        release, self._release = self._release, None
        if release is not None:
            release()


def _lock(fd: int) -> bool:
    """Take the exclusive lock of ``fd`` without waiting: False when another holds it."""
    if sys.platform == "win32":
        import msvcrt

        os.lseek(fd, _WINDOWS_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def _holder_text(session_id: str) -> bytes:
    command = " ".join([Path(sys.argv[0]).name or "python", *sys.argv[1:2]])
    return json.dumps(
        {
            "session_id": session_id,
            "pid": os.getpid(),
            "command": command,
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
    ).encode()


def describe_holder(path: Path) -> str:
    """Who holds the claim at ``path``, as its file says (``another process`` when it
    cannot be read: the holder may be writing it)."""
    try:
        data = json.loads(path.read_bytes().split(b"\0", 1)[0] or b"{}")
        pid = int(data["pid"])
        command, since = str(data["command"]), str(data["since"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
    where = "this process" if pid == os.getpid() else "another process"
    return f"{where} (pid {pid}, `{command}`, since {since})"


class FileClaims:
    """The claims of one store: a folder of lock files (created on the first claim).

    The claims still held when the store closes are released with it
    (:meth:`release_all`): a closed store writes nothing.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._held: dict[str, int] = {}  # session id -> the descriptor holding its lock

    def path_of(self, session_id: str) -> Path:
        return self.folder / session_id

    def claim(self, session_id: str) -> Claim:
        """Claim ``session_id`` (a safe id) for this process; SessionInUse when another
        live session holds it. OSError when the folder cannot be written."""
        path = self.path_of(session_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | _BINARY, 0o644)
            try:
                if not _lock(fd):
                    raise SessionInUse.held_by(session_id, describe_holder(path))
                try:
                    same = os.path.samestat(os.fstat(fd), os.stat(path))
                except FileNotFoundError:
                    same = False
                if not same:  # released and removed after we opened it: open the new one
                    os.close(fd)
                    continue
                os.lseek(fd, 0, os.SEEK_SET)
                os.write(fd, _holder_text(session_id) + b"\0")  # a killed holder's may follow
            except BaseException:
                with contextlib.suppress(OSError):
                    os.close(fd)
                raise
            self._held[session_id] = fd
            return Claim(session_id, functools.partial(self._release, session_id, fd))

    def holds(self, session_id: str) -> bool:
        """Whether a claim of this store (not yet released) has ``session_id``."""
        return session_id in self._held

    def release_all(self) -> None:
        for session_id, fd in list(self._held.items()):
            self._release(session_id, fd)

    def _release(self, session_id: str, fd: int) -> None:
        if self._held.get(session_id) != fd:
            return  # released already (with the store)
        del self._held[session_id]
        with contextlib.suppress(OSError):  # Windows cannot remove a file open here: kept
            self.path_of(session_id).unlink()
        os.close(fd)  # and with it the lock
