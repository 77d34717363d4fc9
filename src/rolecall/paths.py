"""Where a run's files live, and ids that are safe to use in paths.

The data directory is ``--data-dir``, else ``$ROLECALL_HOME``, else the platform's
user data directory. Nothing is created until something is written.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from pathlib import Path

from rolecall.errors import NotTextError, UnsafeIdError

_SAFE_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")  # fullmatch: no trailing newline


def data_dir(explicit: str | os.PathLike[str] | None = None) -> Path:
    if explicit:
        return Path(explicit).expanduser()
    env = os.environ.get("ROLECALL_HOME")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("rolecall", appauthor=False))


def db_path(data: Path) -> Path:
    """The SQLite store inside a data directory."""
    return data / "rolecall.db"


def knowledge_path(data: Path) -> Path:
    """The knowledge index inside a data directory (knowledge.md), beside the store."""
    return data / "knowledge.db"


def data_dir_flag(db: Path) -> str:
    """`` --data-dir DIR`` for a command printed about the store ``db`` (``DIR/rolecall.db``),
    so it works pasted in any shell; empty for a store outside a data directory."""
    if db.name != db_path(Path()).name:
        return ""
    import shlex

    return f" --data-dir {shlex.quote(str(db.parent.absolute()))}"


def safe_id(value: str, what: str = "id") -> str:
    """``value`` if it can name a file or folder without escaping; UnsafeIdError otherwise.

    Refused: empty, ``.``/``..``, path separators, NUL and other control characters,
    leading dots or dashes, more than 128 characters.
    """
    if not isinstance(value, str) or not _SAFE_ID.fullmatch(value) or ".." in value:
        raise UnsafeIdError(
            f"{what} {value!r} is not safe in a file name "
            "(letters, digits, '.', '_' and '-' only, not starting with '.' or '-', no '..')"
        )
    return value


def read_text(path: Path, source: str | None = None) -> str:
    """The text of a file the user gave (a world, a role, a session file, ``@FILE``),
    read as UTF-8: the one place such files are read.

    Raises ``OSError`` when it cannot be read (each caller words that its own way) and
    :class:`NotTextError` naming ``source`` (default: the path) and where the first
    byte that is not UTF-8 is.
    """
    return decode_text(path.read_bytes(), source or str(path))


def decode_text(data: bytes, source: str, encoding: str = "utf-8") -> str:
    """``data`` decoded (``utf-8``, or ``utf-8-sig`` to drop a byte-order mark), or
    :class:`NotTextError` saying where it is not UTF-8."""
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        # exc.object, not data: utf-8-sig reports where in the text after the mark
        raise NotTextError(source, not_utf8(bytes(exc.object), exc.start)) from None


def not_utf8(data: bytes, start: int) -> str:
    """``not UTF-8 text: byte 0xff at line L, column C`` for the bad byte at ``start``
    (the column counts characters, as an editor shows it)."""
    line_start = data.rfind(b"\n", 0, start) + 1
    line = data.count(b"\n", 0, start) + 1
    column = len(data[line_start:start].decode("utf-8", "replace")) + 1
    return f"not UTF-8 text: byte 0x{data[start]:02x} at line {line}, column {column}"


def current_umask() -> int:
    """The process umask, read without changing it (Linux: /proc), else set and restored."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def write_atomically(path: Path, text: str | bytes, *, replace: bool = True) -> None:
    """Write ``text`` to ``path`` so that readers see the old file or the new one, never half.

    A temporary file beside ``path``, fsynced, then renamed over it; with
    ``replace=False`` it is linked in place instead, which raises ``FileExistsError``
    when ``path`` exists (creation that never clobbers). Raises ``OSError``.

    An existing special file (``/dev/null``, ``/dev/stdout``, a named pipe) is written
    to directly: renaming over it would replace the device with a regular file.
    """
    data = text.encode() if isinstance(text, str) else text
    if replace and _is_special(path):
        with path.open("wb") as out:
            out.write(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file 0600; the result follows the umask like any new file
        os.chmod(tmp, 0o666 & ~current_umask())
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(tmp, path)
            return
        os.link(tmp, path)  # atomic, and fails if path exists
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    Path(tmp).unlink(missing_ok=True)


def _is_special(path: Path) -> bool:
    """An existing file that is neither regular nor a directory (a device, a pipe)."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))
