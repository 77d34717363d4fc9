"""Whether a call runs (tools.md, Approval): the role's ``approve:`` policy, and who
answers an ``ask``: a person (the REPL, the web view) or the ``--approve`` flag."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from rolecall.tools.names import matches
from rolecall.world.models import Approve, Role


@dataclass(frozen=True)
class PendingCall:
    """A call waiting for a decision."""

    call_id: str
    sender: str
    tool: str
    arguments: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Decision:
    decision: Literal["allow", "deny"]
    by: str  # policy, human, or the flag that decided (--approve auto)
    reason: str = ""
    arguments: dict[str, Any] | None = None  # edited by the person who allowed it


Approver = Callable[[PendingCall], Awaitable[Decision]]
"""Answers an ``ask`` call (a person, or a flag); installed on the session."""


def policy(role: Role, tool: str) -> Approve:
    """The role's ``approve`` for ``tool``: the first pattern that matches, else auto."""
    approve = role.approve
    if isinstance(approve, str):
        return approve
    for pattern, value in approve.items():
        if matches(pattern, tool):
            return value
    return "auto"


def flag_approver(value: Literal["auto", "deny"]) -> Approver:
    """``--approve auto|deny``: every ``ask`` call allowed, or refused, by the flag."""

    async def answer(call: PendingCall) -> Decision:
        if value == "auto":
            return Decision("allow", "--approve auto")
        return Decision(
            "deny",
            "--approve deny",
            f"{call.tool} needs approval (approve: ask) and this run has no person to ask "
            "(--approve deny); run with --approve auto to allow it",
        )

    return answer


async def decide(role: Role, call: PendingCall, approver: Approver | None) -> Decision:
    """The decision on ``call``: by policy (auto, deny), else the approver's."""
    rule = policy(role, call.tool)
    if rule == "auto":
        return Decision("allow", "policy")
    if rule == "deny":
        return Decision("deny", "policy", f"{role.id} may not call {call.tool} (approve: deny)")
    if approver is None:
        return Decision(
            "deny",
            "--approve deny",
            f"{call.tool} needs approval (approve: ask) and nobody can answer here "
            "(the default is --approve deny); run with --approve auto to allow it",
        )
    return await approver(call)
