"""Reading input lines without parking a thread on a blocking read.

A thread blocked in ``readline`` cannot be cancelled and keeps the process alive
after Ctrl-C; instead we wait until the descriptor is readable (pipes and
terminals) and read what is there. Regular files never block and are read directly,
and so are descriptors the event loop cannot watch (``/dev/null``: epoll refuses it
with EPERM; its reads never block either). A closed descriptor is an empty input.
"""

from __future__ import annotations

import os
import stat
from typing import Any

import anyio


class LineReader:
    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer = b""
        self._eof = False
        try:
            self._regular = stat.S_ISREG(os.fstat(fd).st_mode)
        except OSError:  # closed (`<&-`): nothing to read
            self._regular, self._eof = True, True

    async def readline(self) -> str:
        """The next line with its newline; ``""`` at end of input. Cancellable."""
        while b"\n" not in self._buffer and not self._eof:
            if not self._regular:
                try:
                    await anyio.wait_readable(self.fd)
                except PermissionError:  # not pollable (/dev/null): reads do not block
                    self._regular = True
            try:
                chunk = os.read(self.fd, 65536)
            except BlockingIOError:  # woken without data after all: wait again
                continue
            except OSError:  # closed or unreadable: the input ends here
                chunk = b""
            if chunk:
                self._buffer += chunk
            else:
                self._eof = True
        if b"\n" in self._buffer:
            line, self._buffer = self._buffer.split(b"\n", 1)
            return (line + b"\n").decode("utf-8", errors="replace")
        line, self._buffer = self._buffer, b""
        return line.decode("utf-8", errors="replace")


class KeyReader:
    """Single keys from a terminal in cbreak mode (no echo, no line editing).

    Used as a context manager: the terminal's settings are restored on exit whatever
    happens. Signals (Ctrl-C) still work. :meth:`read` returns one key: a character,
    or a whole escape sequence (``"\\x1b[A"`` for ↑), ``""`` at end of input.
    """

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._saved: list[Any] | None = None

    def __enter__(self) -> KeyReader:
        import termios
        import tty

        self._saved = termios.tcgetattr(self.fd)
        tty.setcbreak(self.fd, termios.TCSANOW)
        return self

    def __exit__(self, *exc: object) -> None:
        import termios

        if self._saved is not None:
            termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    async def read(self) -> str:
        await anyio.wait_readable(self.fd)
        chunk = os.read(self.fd, 64)
        return chunk.decode("utf-8", errors="replace")
