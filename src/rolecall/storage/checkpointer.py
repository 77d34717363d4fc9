"""Checkpoints of the store's WAL on a thread of their own, never waited for by a turn.

A checkpoint copies the pages the turns appended to the WAL back into the database file
(and syncs it): tens of milliseconds after 500 turns. The store asks for one
(:meth:`Checkpointer.request`) and goes on; this thread runs ``PRAGMA
wal_checkpoint(PASSIVE)`` on its own connection, which never blocks the writer. Turns
committed while it runs stay in the WAL, so it checkpoints again (a few passes, each
shorter than the last). The WAL starts over from its beginning only when a commit begins
with every frame copied, which commits following each other without a pause (a scripted
model, a batch of many sessions) seldom find while a checkpoint races with them: so once
at most :data:`FINISH_FRAMES` frames are left, :attr:`Checkpointer.finish_wanted` is set
and the store copies that short tail itself before its next commit, under its lock (a
few milliseconds instead of the whole checkpoint's tens; holding the database's write
lock, so that another process sharing it cannot add frames meanwhile), and that commit
starts the WAL over: the file stays about as small as one checkpoint interval's writes
(plus what the turns add while a pass runs, more when the disk is slow).

Why a thread owned by the store rather than a task: the store is opened and closed by
plain calls (``open()``/``close()``), not inside a task group of its own, and a
checkpoint is blocking C code either way. Its lifetime is the store's: started by
``open()``, joined by ``close()``.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path
from typing import Final

from rolecall.log import get_logger

__all__ = ["FINISH_FRAMES", "PASSES", "Checkpointer", "finish"]

log = get_logger(__name__)

PASSES: Final = 8  # checkpoints in a row at most, while turns keep adding frames
FINISH_FRAMES: Final = 64  # a tail this short is copied by the store, between commits
SLOW_PASS_S: Final = 0.015  # a pass this long leaves a long tail behind it: another pass


class Checkpointer:
    """One thread that checkpoints ``path``'s WAL whenever asked (see the module)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.done = 0  # checkpoints run (diagnostics and tests)
        self.last: tuple[int, int, int] | None = None  # (busy, WAL frames, copied)
        self.finish_wanted = False  # the store copies the last frames before its next commit
        # held by the thread's passes, and by the store while it copies the tail: a pass
        # that began meanwhile (asked for while the last one ran) made the store's copy
        # find the checkpoint busy, and the WAL went on growing until the next checkpoint
        self.busy = threading.Lock()
        self._wanted = threading.Event()
        self._stopping = False
        self._conn = sqlite3.connect(path, timeout=0, check_same_thread=False)
        self._thread = threading.Thread(target=self._run, name="rolecall-checkpoint", daemon=True)
        self._thread.start()

    def request(self) -> None:
        """Checkpoint soon, on the thread; returns at once."""
        self._wanted.set()

    def close(self) -> None:
        """Finish a checkpoint under way, stop the thread and close its connection."""
        self._stopping = True
        self._wanted.set()
        self._thread.join()
        self._conn.close()

    def _run(self) -> None:
        while True:
            self._wanted.wait()
            self._wanted.clear()
            if self._stopping:
                return
            self._checkpoint()

    def _checkpoint(self) -> None:
        try:
            with self.busy:
                if self.finish_wanted:  # the store has yet to copy the last one's tail
                    return
                stalled = False
                for _ in range(PASSES):
                    started = time.monotonic()
                    (row,) = self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    self.last = (int(row[0]), int(row[1]), int(row[2]))
                    self.done += 1
                    if self._stopping:
                        break
                    # a pass copies the frames there were when it began; what the turns
                    # add while it runs is left for the next pass, or for the store's copy
                    # of the tail, inside a turn. A pass that stalled (the disk's sync can
                    # take 70 ms on a busy machine, against 5 usually) left that many
                    # more: one more pass (one, so that the WAL still starts over soon)
                    # copies them here instead
                    slow = not stalled and time.monotonic() - started > SLOW_PASS_S
                    stalled = stalled or slow
                    if not slow and self.last[1] - self.last[2] <= FINISH_FRAMES:
                        break
        except sqlite3.Error as exc:  # the rows are in the WAL: a later one will do
            log.info("checkpoint_skipped", path=str(self.path), error=str(exc))
            return
        # the tail is short now (or the turns outran every pass: the store copies the
        # rest all the same, so that the WAL is started over and cannot grow unbounded)
        self.finish_wanted = True


def finish(conn: sqlite3.Connection) -> None:
    """Copy the WAL's last frames on ``conn`` (the store's writer, between two commits),
    so that its next commit starts the WAL over.

    ``FULL``, not ``PASSIVE``: it holds the database's write lock while it copies, so
    another process sharing the database cannot append frames between the copy and
    this store's next commit. With ``PASSIVE`` it always did (the copy ends with a sync,
    a few milliseconds, while the other commits every few tenths of one): the WAL was
    never started over, and two processes running 3,000 turns each left it at 230 MB
    instead of about 45. The writer waits for nobody (``busy_timeout`` 0): when another
    connection holds the lock, ``FULL`` copies what it can, as ``PASSIVE`` does, and a
    later checkpoint finishes the job.
    """
    try:
        conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
    except sqlite3.Error as exc:  # another process is writing: a later one will do
        log.info("checkpoint_skipped", error=str(exc))
