"""Helpers shared by the management commands: parser pieces, the store, tables, files."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TypeVar

from rolecall.cli.flags import add_common_flags

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable
    from pathlib import Path

    from rolecall.cli.options import Options
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument


T = TypeVar("T")


def add_manage_flags(p: argparse.ArgumentParser) -> None:
    """The common flags a management command takes: ``--data-dir -q -v --log-file``."""
    add_common_flags(
        p,
        run_flags=False,
        data_dir_help="where sessions and roles are stored (env ROLECALL_HOME)",
        quiet_help="print only the result itself",
    )


def confirm(opts: Options, text: str) -> None:
    """A confirmation (not the command's result): silent with -q."""
    if not opts.quiet:
        print(text, flush=True)


def data_dir_of(opts: Options) -> Path:
    from rolecall.paths import data_dir

    return data_dir(opts.data_dir)


def resolve_session_id(value: str, opts: Options | None = None) -> str:
    """The session id ``value`` stands for: checked safe, then (with ``opts``) resolved in
    the data directory's store: ``last`` or a unique prefix names the whole id."""
    from rolecall.paths import db_path, safe_id

    sid = safe_id(value, "session id")
    if opts is None or not db_path(data_dir_of(opts)).is_file():
        return sid

    async def body(store: DataStore) -> str:
        return await store.resolve_id(sid)

    return with_store(opts, body, missing=f"no session '{sid}'")


def with_store(
    opts: Options,
    body: Callable[[DataStore], Awaitable[T]],
    *,
    missing: str,
    read_only: bool = True,
) -> T:
    """Run ``body`` with the data directory's store open; ``missing`` if there is none.

    A command that reads never creates the data directory or the database, and opens the
    store read-only (so it works on a read-only archive); ``read_only=False`` for those
    that write.
    """
    import anyio

    from rolecall.errors import UsageError
    from rolecall.storage.data_store import has_store, open_data_store

    data = data_dir_of(opts)
    store = open_data_store(data, read_only=read_only)
    if not has_store(data):
        raise UsageError(f"{missing} in {store.location} (no sessions stored yet)")

    async def main() -> T:
        async with store:
            return await body(store)

    return anyio.run(main)


def text_table(header: tuple[str, ...], rows: list[tuple[str, ...]], right: set[int]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        out = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([fmt(header), *(fmt(r) for r in rows)])


def clip_cell(text: str, width: int) -> str:
    from rolecall.export.common import visible

    text = " ".join(visible(text).split())  # a table cell: an ESC shown as ␛, never obeyed
    return text if len(text) <= width else text[: width - 1] + "…"


def write_file(path: Path, text: str | bytes) -> None:
    """Write ``text`` to ``path`` atomically; StorageError naming the file on failure."""
    from pathlib import Path as _Path

    from rolecall.errors import StorageError, UsageError
    from rolecall.paths import write_atomically

    if _Path(path).is_dir():
        raise UsageError(f"{path} is a folder: give the path of a file to write")
    try:
        write_atomically(_Path(path), text)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc.strerror or exc}") from exc


def role_ids_of(doc: SessionDocument) -> list[str]:
    roles = doc.world.get("roles")
    if not isinstance(roles, list):
        return []
    return [str(r["id"]) for r in roles if isinstance(r, dict) and "id" in r]


def check_role_filter(doc: SessionDocument, role: str | None) -> None:
    from rolecall.errors import UsageError
    from rolecall.world.library import suggest

    if role is None:
        return
    known = list(dict.fromkeys([*role_ids_of(doc), *(m.sender for m in doc.messages)]))
    if role not in known:
        raise UsageError(
            f"session {doc.session_id} has no role '{role}'{suggest(role, known, listing=True)}"
        )
