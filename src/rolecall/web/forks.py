"""A session's fork tree (``/s/ID/forks``): the session it was forked from, up to the
first one, and every fork under it, each with the message it was forked at.

The tree is read from each stored session's ``extra.fork`` link (``sessions list
--tree`` reads the same, storage ``forks()``): the page shows the whole family the
session belongs to, the session itself marked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response

from rolecall.storage.browse import message_of, previews, rows_of, state_of
from rolecall.storage.catalog import SessionRow
from rolecall.storage.sqlite import SqliteStore
from rolecall.web.context import WebContext
from rolecall.web.pages import MESSAGES_PER_PAGE

_MK = re.compile(r"^m(\d+)$")
BATCH = 500  # sessions read in one query


@dataclass
class Node:
    """One session of the tree, its forks under it."""

    row: SessionRow
    at: str = ""  # the message of its parent it was forked at (the root: "")
    said: str = ""  # that message as the fork holds it (edited, maybe)
    parent: str = ""
    children: list[Node] = field(default_factory=list)

    @property
    def at_page(self) -> int:
        """The page of the parent's thread that shows the fork point."""
        found = _MK.match(self.at)
        return (int(found.group(1)) - 1) // MESSAGES_PER_PAGE + 1 if found else 1

    @property
    def size(self) -> int:
        return 1 + sum(child.size for child in self.children)


async def root_of(store: SqliteStore, sid: str, links: dict[str, tuple[str, str]]) -> str:
    """The first session of ``sid``'s family: up the parent links while the parent is
    stored (a deleted parent leaves its forks the first of theirs)."""
    seen = {sid}
    while sid in links:
        parent = links[sid][0]
        if parent in seen or await state_of(store, parent) is None:
            break
        sid = parent
        seen.add(sid)
    return sid


def family(root: str, links: dict[str, tuple[str, str]]) -> list[str]:
    """``root`` and every session forked from it, or from one of those (depth first)."""
    children: dict[str, list[str]] = {}
    for child, (parent, _) in sorted(links.items()):
        children.setdefault(parent, []).append(child)
    out: list[str] = []
    seen: set[str] = set()
    todo = [root]
    while todo:
        sid = todo.pop()
        if sid in seen:
            continue
        seen.add(sid)
        out.append(sid)
        todo.extend(reversed(children.get(sid, [])))
    return out


async def fork_tree(request: Request) -> Response:
    """``GET /s/ID/forks``."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    if await state_of(ctx.store, sid) is None:
        raise HTTPException(404, f"no session {sid!r} stored here")
    links = await ctx.store.forks()
    root = await root_of(ctx.store, sid, links)
    members = family(root, links)
    rows: dict[str, SessionRow] = {}
    for start in range(0, len(members), BATCH):  # (a query's parameters are limited)
        rows.update(await rows_of(ctx.store, members[start : start + BATCH]))
    ids = [i for i in members if i in rows]
    nodes = {i: Node(row=rows[i]) for i in ids}
    for i in ids:
        parent, at = links.get(i, ("", ""))
        if i == root or parent not in nodes:  # (a parent deleted meanwhile)
            continue
        node = nodes[i]
        node.parent, node.at = parent, at
        said = await message_of(ctx.store, i, at)
        node.said = said.content if said is not None else ""
        nodes[parent].children.append(node)
    for node in nodes.values():  # oldest fork first, as they were made
        node.children.sort(key=lambda n: (n.row.created_at, n.row.id))
    return ctx.page(
        request,
        "forks.html",
        sid=sid,
        tree=nodes[root],
        live=set(ctx.runs.runs),
        latest=await previews(ctx.store, ids),  # where each branch has got to
        gone=links.get(root),  # the first one's own parent, deleted: (its id, the point)
    )
