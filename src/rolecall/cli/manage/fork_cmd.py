"""``rolecall sessions fork`` and ``sessions list --tree`` (sessions.md, Forking)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from rolecall.api.fork import fork_session
from rolecall.cli.manage.common import confirm, data_dir_of, resolve_session_id, with_store

if TYPE_CHECKING:
    from rolecall.cli.options import SessionsOptions
    from rolecall.storage.catalog import SessionRow
    from rolecall.storage.data_store import DataStore
    from rolecall.storage.fork import ForkPlan


def sessions_fork(opts: SessionsOptions) -> int:
    from rolecall.memory import MemoryFiles

    parent = resolve_session_id(opts.session)
    memory = MemoryFiles.in_data_dir(data_dir_of(opts))

    async def body(store: DataStore) -> ForkPlan:
        return await fork_session(store, memory, parent, opts.at, edit=opts.edit, model=opts.model)

    try:
        new = with_store(opts, body, missing=f"no session '{parent}'", read_only=False)
    finally:
        memory.close()
    if opts.json:
        print(json.dumps({"session_id": new.new_id, "parent": parent, "at": opts.at}))
    else:
        print(new.new_id)
        from rolecall.cli.hints import resume_command

        resume = resume_command(new.new_id, opts)
        confirm(opts, f"forked {parent} at {opts.at}: `{resume}` continues it")
    return 0


def tree_order(rows: list[SessionRow], forks: dict[str, tuple[str, str]]) -> list[SessionRow]:
    """Sessions in their listed order, each fork right under its parent (depth first)."""
    by_id = {r.id: r for r in rows}
    children: dict[str, list[SessionRow]] = {}
    roots: list[SessionRow] = []
    for r in rows:
        parent = forks.get(r.id, (None, ""))[0]
        if parent is not None and parent in by_id and parent != r.id:
            children.setdefault(parent, []).append(r)
        else:
            roots.append(r)
    out: list[SessionRow] = []
    seen: set[str] = set()

    def walk(row: SessionRow) -> None:
        if row.id in seen:
            return
        seen.add(row.id)
        out.append(row)
        for child in children.get(row.id, []):
            walk(child)

    for root in roots:
        walk(root)
    out.extend(r for r in rows if r.id not in seen)  # a cycle of forks cannot happen; be safe
    return out
