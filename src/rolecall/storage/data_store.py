"""The store a data directory's sessions live in: the one line that picks it.

Every entry point opens a data directory's store here: the command line
(``cli/wiring.py``'s ``open_store``, the management commands), the public API
(``rolecall.open_session(data_dir=...)``) and the web view. A new store is a module
with a class implementing :class:`DataStore` plus the line naming it in :data:`STORE`.

Two features read what only the SQLite store has: the batch tables
(``batch/tables.py``: ``rolecall batch``, ``sessions list --batch``) and the web
view's queries (``storage/browse.py``); with another store they say so
(:func:`sqlite_only`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, Self

from rolecall.errors import UsageError
from rolecall.storage.port import SessionStore
from rolecall.storage.sqlite import SqliteStore


class DataStore(SessionStore, Protocol):
    """A store kept in a data directory, opened with ``async with``."""

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, read_only: bool = False) -> Self:
        """The store of ``data_dir`` (created when first opened, unless ``read_only``:
        then it is only read, and works on a read-only archive)."""
        ...

    @classmethod
    def exists_in(cls, data_dir: Path) -> bool:
        """Whether ``data_dir`` holds this store (commands that only read never create it)."""
        ...

    async def resolve_id(self, text: str) -> str:
        """The full session id ``text`` stands for: itself, ``last`` or a unique prefix
        (unchanged when none matches; a UsageError naming them when several do)."""
        ...

    async def forks(self) -> dict[str, tuple[str, str]]:
        """Each forked session's id -> (parent id, fork point)."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(self, *exc: object) -> None: ...


STORE: type[DataStore] = SqliteStore
"""The store every data directory uses."""


def open_data_store(data_dir: Path, *, read_only: bool = False) -> DataStore:
    """``data_dir``'s store, to open with ``async with``."""
    return STORE.in_data_dir(data_dir, read_only=read_only)


def has_store(data_dir: Path) -> bool:
    """Whether anything was ever stored in ``data_dir``."""
    return STORE.exists_in(data_dir)


def sqlite_only(store: SessionStore, what: str) -> SqliteStore:
    """``store`` as the SQLite store, for ``what`` needs its own tables; another store
    is a usage error saying so."""
    if not isinstance(store, SqliteStore):
        raise UsageError(
            f"{what} needs the SQLite store; the sessions in {store.location} are kept "
            f"by {type(store).__name__}"
        )
    return store
