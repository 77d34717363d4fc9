"""What the thread shows beside a message's text: the tool calls of its turn (tools.md)
and the sources of the passages it cites (knowledge.md).

Both come from the session's events, not its messages: ``messages/tool_call``,
``messages/tool_result`` and ``system/tool_approval`` by call id, and each turn's
``system/knowledge`` passages by message id. Only those events are read (the store's
rows of other kinds are skipped in SQL), so a long session's page reads few of them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from rolecall.export.citations import Cited, cited, sources_by_message
from rolecall.export.common import chosen_note, short_arguments, tool_calls_of, visible
from rolecall.storage.browse import events_of_types
from rolecall.storage.sqlite import SqliteStore

__all__ = ["Asides", "ToolCallView", "asides_of_lines", "stored_asides"]

KINDS = frozenset({"tool_call", "tool_result", "tool_approval", "knowledge", "selection"})
ARGUMENTS_WIDTH = 60


@dataclass(frozen=True)
class ToolCallView:
    """One call as the thread shows it: a line (tool, short arguments, duration, how it
    was decided), its result collapsed under it."""

    call_id: str
    tool: str
    arguments: dict[str, Any]
    content: str | None  # None: no result yet
    is_error: bool
    duration_ms: int
    decision: str  # allow, deny, or '' (not decided yet)
    by: str
    asked: dict[str, Any] | None = None  # the model's arguments, when a person edited them

    @property
    def short_arguments(self) -> str:
        """``a=1, b="x"``, cut to a line (as the terminal shows a call)."""
        return visible(short_arguments(self.arguments, ARGUMENTS_WIDTH))

    @property
    def full_arguments(self) -> str:
        return _json(self.arguments)

    @property
    def asked_arguments(self) -> str:
        return _json(self.asked or {})

    @property
    def result(self) -> str:
        """The result's text with its control characters shown, not obeyed."""
        return visible(self.content or "")

    @property
    def state(self) -> str:
        """``refused``, ``error``, ``done`` or ``running``."""
        if self.decision == "deny":
            return "refused"
        if self.content is None:
            return "running"
        return "error" if self.is_error else "done"

    @property
    def decided(self) -> str:
        """Who allowed or refused it, when a person or a flag did (a policy's allow is
        the usual case and says nothing)."""
        if self.decision == "deny":
            return f"refused by {self.by}" if self.by else "refused"
        if self.decision == "allow" and self.by and self.by != "policy":
            if self.by != "human":
                return f"allowed by {self.by}"
            return "approved with edited arguments" if self.asked is not None else "approved"
        return ""


def _json(value: Any) -> str:
    return visible(json.dumps(value, ensure_ascii=False, indent=2))


@dataclass
class Asides:
    """A session's tool calls by call id, and each message's passages by id."""

    calls: dict[str, ToolCallView] = field(default_factory=dict)
    sources: dict[str, dict[str, Any]] = field(default_factory=dict)
    # (speaker, the message it answers) -> why a rule chose it (system/selection)
    chosen: dict[tuple[str, str], str] = field(default_factory=dict)

    def why_chosen(self, sender: str, reply_to: str | None) -> str:
        """Who chose ``sender`` to answer ``reply_to``, and why; "" when no rule did."""
        return self.chosen.get((sender, reply_to or ""), "")

    def calls_of(self, ids: Iterable[str]) -> list[ToolCallView]:
        return [self.calls[cid] for cid in ids if cid in self.calls]

    def cited(self, message_id: str, content: str) -> list[Cited]:
        return cited(content, self.sources.get(message_id))


def asides_of(records: list[dict[str, Any]]) -> Asides:
    """The asides of a session's event records (in seq order)."""
    raw = tool_calls_of(records)
    decisions = {str(r.get("call_id")): r for r in records if r.get("type") == "tool_approval"}
    calls = {}
    for cid, call in raw.items():
        approval = decisions.get(cid, {})
        arguments = call.get("arguments")
        asked = call.get("asked")  # the model's, when a person edited them (these ran)
        calls[cid] = ToolCallView(
            call_id=cid,
            tool=str(call.get("tool") or "?"),
            arguments=arguments if isinstance(arguments, dict) else {},
            content=str(call["content"]) if "content" in call else None,
            is_error=bool(call.get("is_error")),
            duration_ms=int(call.get("duration_ms") or 0),
            decision=str(approval.get("decision", "")),
            by=str(approval.get("by", "")),
            asked=asked if isinstance(asked, dict) else None,
        )
    chosen = {
        (str(r["chosen"]), str(r.get("message_id") or "")): visible(
            chosen_note(str(r.get("by")), r.get("answer"), r.get("model") is not None)
        )
        for r in records
        if r.get("type") == "selection" and r.get("chosen")
    }
    return Asides(calls=calls, sources=sources_by_message(records), chosen=chosen)


def asides_of_lines(lines: Iterable[tuple[int, str]]) -> Asides:
    """The asides of a session's event lines (a cluster session's feed)."""
    records = []
    for _, line in lines:
        if '"tool_' in line or '"knowledge"' in line or '"selection"' in line:
            record = json.loads(line)
            if record.get("type") in KINDS:
                records.append(record)
    return asides_of(records)


async def stored_asides(store: SqliteStore, session_id: str) -> Asides:
    """The asides of a stored session: only its events of those kinds are read."""
    return asides_of(await events_of_types(store, session_id, KINDS))
