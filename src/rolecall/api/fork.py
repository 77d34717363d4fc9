"""Forking a stored session (sessions.md, Forking): the store copies its rows up to a
message, the memory files are cut from the parent's. Shared by ``rolecall sessions
fork``, the REPL's ``/fork`` and ``/retry``, and the web view's Fork and Retry."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rolecall.memory import MemoryFiles
    from rolecall.storage.fork import ForkPlan
    from rolecall.storage.port import SessionStore


async def fork_session(
    store: SessionStore,
    memory: MemoryFiles,
    parent: str,
    at: str,
    *,
    edit: str | None = None,
    model: str | None = None,
) -> ForkPlan:
    """Store a fork of ``parent`` after ``at`` (the store copies the rows) and its memory
    files (cut from the parent's, or rebuilt from the messages when those do not match).
    What the fork holds."""
    from rolecall.bus.bus import utc_now
    from rolecall.session.ids import new_session_id

    plan = await store.fork_copy(
        parent, at, new_id=new_session_id(), now=utc_now(), edit=edit, model=model
    )
    role_ids = [r["id"] for r in plan.world.get("roles", [])]
    starts = plan.state.memory_start
    if not memory.fork(parent, plan.new_id, role_ids, starts, plan.last, edited=plan.edited):
        new = await store.load(plan.new_id, with_events=False)
        limits = {
            r["id"]: r["sees"] for r in plan.world.get("roles", []) if r.get("sees") is not None
        }
        memory.rebuild(plan.new_id, role_ids, new.messages, starts, limits)
    return plan
