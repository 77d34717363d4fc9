"""What every rendering shares: the message selection, the token table, the facts."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rolecall.badges import NONE, Labels, labels_of
from rolecall.money import money
from rolecall.session.audience import HUMAN, audience_label, seen
from rolecall.session.state import Draft, TranscriptMessage
from rolecall.storage.document import SessionDocument

# A palette readable on white; role colours are picked by the role's position.
PALETTE = (
    "#1f6feb",
    "#b35900",
    "#1a7f37",
    "#8250df",
    "#cf222e",
    "#0a7480",
    "#9a6700",
    "#bf3989",
)
GREY = "#6e7781"


# ------------------------------------------------------------------ control characters
# every C0 control but tab and newline, DEL and the C1 controls (a terminal obeys ESC,
# CSI (U+009B), OSC, BEL, CR, backspace: model text could rewrite what a reader sees)
CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _picture(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0x20:
        return chr(0x2400 + code)  # the Control Pictures block: ␀ ␇ ␈ ␍ ␛ ...
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"  # C1 controls have no pictures


def visible(text: str) -> str:
    """``text`` with its control characters shown instead of obeyed: ESC as ``␛``, BEL
    as ``␇``, NUL as ``␀``, a C1 control as ``<U+009B>``; newlines and tabs are kept (a
    Windows line end ``\\r\\n`` is a newline). For anything model or user text reaches
    a terminal or a document through."""
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    return CONTROLS.sub(_picture, text)


# ------------------------------------------------------------------ selection
@dataclass(frozen=True)
class TokenRow:
    sender: str
    name: str
    messages: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None = None  # its agent messages' cost; None: unknown or none

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens


def cost_of(messages: list[TranscriptMessage]) -> float | None:
    """The summed cost of the agent messages; None when one of them has no known cost."""
    total = 0.0
    for m in messages:
        if m.kind != "agent":
            continue
        if m.cost_usd is None:
            return None
        total += m.cost_usd
    return total


@dataclass(frozen=True)
class Selection:
    """The messages and drafts a rendering shows, and how they were chosen."""

    messages: list[TranscriptMessage]
    drafts: list[Draft]
    total_messages: int
    role: str | None
    search: str | None
    seen_by: str | None = None  # audiences.md: the session as this role saw it

    @property
    def filtered(self) -> bool:
        return self.role is not None or self.search is not None or self.seen_by is not None

    def describe(self) -> str:
        """``3 of 8 messages (role a; search "x")``, or ``8 messages``."""
        shown = len(self.messages)
        noun = "message" if self.total_messages == 1 else "messages"
        if not self.filtered:
            return f"{shown} {noun}"
        parts = []
        if self.seen_by is not None:
            parts.append(f"as seen by {self.seen_by}")
        if self.role is not None:
            parts.append(f"role {self.role}")
        if self.search is not None:
            parts.append(f'search "{self.search}"')
        return f"{shown} of {self.total_messages} {noun} ({'; '.join(parts)})"


def _matches(sender: str, content: str, role: str | None, needle: str | None) -> bool:
    if role is not None and sender != role:
        return False
    return needle is None or needle in content.casefold()


def select(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    seen_by: str | None = None,
) -> Selection:
    """The messages (and drafts) of ``doc`` kept by the filters, in session order;
    ``seen_by``: only what that role saw (audiences.md; its own drafts only)."""
    needle = search.casefold() if search is not None else None
    messages = doc.messages
    drafts = doc.drafts
    if seen_by is not None and seen_by != HUMAN:
        messages = seen(messages, seen_by, limit=sees_of(doc, seen_by))
        drafts = [d for d in drafts if d.sender == seen_by]
    return Selection(
        messages=[m for m in messages if _matches(m.sender, m.content, role, needle)],
        drafts=[d for d in drafts if _matches(d.sender, d.content, role, needle)],
        total_messages=len(doc.messages),
        role=role,
        search=search,
        seen_by=seen_by,
    )


def sees_of(doc: SessionDocument, role: str) -> list[str] | None:
    """The ``sees:`` list of ``role`` in the session's world (None: it has none)."""
    for r in roles_of(doc):
        if r.get("id") == role and isinstance(r.get("sees"), list):
            return [str(x) for x in r["sees"]]
    return None


def private_label(message: TranscriptMessage) -> str:
    """``to a, b only`` for a private message (audiences.md), ``""`` otherwise."""
    return audience_label(message.audience)


def roles_of(doc: SessionDocument) -> list[dict[str, Any]]:
    roles = doc.world.get("roles")
    return [r for r in roles if isinstance(r, dict)] if isinstance(roles, list) else []


def role_names(doc: SessionDocument) -> dict[str, str]:
    out: dict[str, str] = {}
    for role in roles_of(doc):
        rid = str(role.get("id", ""))
        out[rid] = str(role.get("name") or rid.replace("_", " ").title())
    return out


def sender_order(doc: SessionDocument, senders: list[str]) -> list[str]:
    """World roles in their order, then anyone else (human, system) as first seen."""
    order = [str(r.get("id", "")) for r in roles_of(doc)]
    for sender in senders:
        if sender not in order:
            order.append(sender)
    return order


def token_table(doc: SessionDocument, messages: list[TranscriptMessage]) -> list[TokenRow]:
    """One row per sender with messages among ``messages``: count, input and output tokens."""
    counts: dict[str, list[int]] = {}
    by_sender: dict[str, list[TranscriptMessage]] = {}
    for m in messages:
        row = counts.setdefault(m.sender, [0, 0, 0])
        row[0] += 1
        row[1] += m.input_tokens
        row[2] += m.output_tokens
        by_sender.setdefault(m.sender, []).append(m)
    names = role_names(doc)
    return [
        TokenRow(
            sender,
            names.get(sender, sender),
            counts[sender][0],
            counts[sender][1],
            counts[sender][2],
            cost_of(by_sender[sender]),
        )
        for sender in sender_order(doc, list(counts))
        if sender in counts
    ]


def row_cost(row: TokenRow) -> str:
    return money(row.cost_usd) if row.cost_usd is not None or row.sender != "human" else "-"


def totals_row(rows: list[TokenRow]) -> TokenRow:
    costs = [r.cost_usd for r in rows if r.sender not in ("human", "system")]
    return TokenRow(
        "total",
        "total",
        sum(r.messages for r in rows),
        sum(r.input_tokens for r in rows),
        sum(r.output_tokens for r in rows),
        None if any(c is None for c in costs) else sum(c for c in costs if c is not None),
    )


# ------------------------------------------------------------------ facts
def title(doc: SessionDocument) -> str:
    world = doc.world
    return str(world.get("title") or world.get("name") or doc.session_id)


def status(doc: SessionDocument) -> str:
    """How the session stands: ``finished: flow_end (after the last step 'four')``, ...

    A forked session adds where it came from: ``· forked from ID at m5``.
    """
    from rolecall.storage.fork import fork_info

    found = fork_info(doc)
    text = _state(doc)
    return f"{text} · forked from {found[0]} at {found[1]}" if found else text


def _state(doc: SessionDocument) -> str:
    s = doc.state
    if s.state == "finished":
        text = f"finished: {s.stop_reason or 'unknown reason'}"
        return f"{text} ({s.stop_detail})" if s.stop_detail else text
    if s.state == "paused":
        return f"paused ({s.pause_reason})" if s.pause_reason else "paused"
    if s.state == "running":
        return "running (not finished; if its process ended, resume continues it)"
    return "created (nothing has run yet)"


def target_of(doc: SessionDocument, message: TranscriptMessage) -> str | None:
    if message.target:
        return message.target
    if message.reply_to:
        for m in doc.messages:
            if m.id == message.reply_to:
                return m.sender
    return None


def doc_labels(doc: SessionDocument) -> Labels:
    """Chat-style labels of the session's world (a debate's ``#3 PRO · Name``)."""
    return labels_of(doc.world_model()) if doc.world.get("mode") == "debate" else NONE


def sender_label(labels: Labels, message: TranscriptMessage) -> str:
    return labels.label(message.sender, message.turn) or message.sender


def who_label(doc: SessionDocument, message: TranscriptMessage, labels: Labels = NONE) -> str:
    target = target_of(doc, message)
    sender = sender_label(labels, message)
    who = f"{sender} → {target}" if target else sender
    private = private_label(message)
    return f"{who} ({private})" if private else who


def step_label(step: str | None, iteration: int | None) -> str:
    if not step:
        return ""
    where = "interjection" if step == "interjection" else f"step {step}"
    if iteration:
        where += f" · loop {iteration}"
    return where


def when_label(value: datetime) -> str:
    zone = value.strftime("%Z") if value.tzinfo else ""
    return value.strftime("%Y-%m-%d %H:%M:%S") + (f" {zone}" if zone else "")


def tokens_label(m: TranscriptMessage) -> str:
    if not (m.input_tokens or m.output_tokens):
        return ""
    return f"↑{m.input_tokens:,} ↓{m.output_tokens:,}"


SNIPPET = 40  # characters of the answered message shown beside a reply


def snippet(text: str, width: int = SNIPPET) -> str:
    """``text`` on one line, cut to ``width`` characters with an ellipsis."""
    one = " ".join(text.split())
    return one if len(one) <= width else one[: width - 1].rstrip() + "…"


def answered(message_id: str, text: str | None) -> str:
    """``↩ m7 "what would you build first?"``: which message a reply answers, shortened
    (the terminal, the REPL and the exports show it alike)."""
    return f'↩ {message_id} "{snippet(text)}"' if text is not None else f"↩ {message_id}"


def pretty_data(data: object) -> str:
    """A structured reply's data as the displays show it: indented JSON, its keys in the
    order the reply gave them, control characters made visible (selection.md)."""
    return visible(json.dumps(data, ensure_ascii=False, indent=2))


def chosen_note(by: str, answer: str | None, asked: bool) -> str:
    """Who chose a speaker and why (a ``system/selection`` event, selection.md), as the
    terminal, the REPL and the web view show it on the speaker's line; ``asked``: the
    selector model was asked."""
    quoted = f' ("{snippet(answer)}")' if answer else ""
    if by == "model":
        return f"chosen by the selector{quoted}"
    if by == "fallback":
        if asked:
            return f"chosen by fallback: the selector named no candidate{quoted}"
        return "chosen by fallback (next in role order)"
    if by == "mention":
        return "chosen by mention"
    if by == "random":
        return "chosen at random"
    return "chosen in turn (round_robin)"


# ------------------------------------------------------------------ tool calls
def short_arguments(arguments: Mapping[str, Any], width: int = 60) -> str:
    """``a=1, b="x"`` cut to ``width`` characters (a tool call's arguments on one line)."""
    text = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in arguments.items())
    return text if len(text) <= width else text[: width - 1] + "…"


def tool_calls_of(events: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each tool call of the stored events by its id: tool, arguments, result, error,
    duration, decision and who decided (tools.md); a call without a result yet has no
    ``content``. A call a person approved with edited arguments has those as
    ``arguments`` (what ran) and the model's as ``asked``."""
    calls: dict[str, dict[str, Any]] = {}
    for event in events:
        kind = event.get("type")
        if kind == "tool_call":
            calls[str(event.get("call_id"))] = {
                "tool": event.get("tool"),
                "arguments": event.get("arguments") or {},
                "sender": event.get("sender"),
                "message_id": event.get("message_id"),
            }
        elif kind == "tool_result" and str(event.get("call_id")) in calls:
            calls[str(event.get("call_id"))].update(
                content=event.get("content", ""),
                is_error=bool(event.get("is_error")),
                duration_ms=event.get("duration_ms", 0),
            )
        elif kind == "tool_approval" and str(event.get("call_id")) in calls:
            call = calls[str(event.get("call_id"))]
            call.update(decision=event.get("decision"), by=event.get("by"))
            edited = event.get("arguments")
            if isinstance(edited, dict) and edited:  # a person's edit: the call ran with these
                call.update(asked=call["arguments"], arguments=edited)
    return calls


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """``1 message``, ``2 messages`` (``nouns``: the plural when it is not noun + s)."""
    return f"{count:,} {noun if count == 1 else (nouns or noun + 's')}"


def summary_lines(role: str, from_id: str, to_id: str, text: str, *, full: bool) -> list[str]:
    """A role's older messages folded into its running summary (knowledge.md, Long
    sessions), as every rendering says it: one line, and with ``full`` the summary under
    it, indented."""
    words = plural(len(text.split()), "word")
    head = (
        f"  ≡ {role} now reads a summary of {from_id}–{to_id} ({words}) in place of those messages"
    )
    return [head, *(f"    {line}" for line in text.splitlines() if full and line.strip())]


def edited_note(call: Mapping[str, Any], width: int = 40) -> str:
    """`` · edited (the model asked a=1)`` for a call a person ran with other arguments
    than the model's (``asked`` in :func:`tool_calls_of`), else ''."""
    asked = call.get("asked")
    if not isinstance(asked, Mapping):
        return ""
    return f" · edited (the model asked {short_arguments(asked, width) or 'nothing'})"


def tool_line(call: Mapping[str, Any]) -> str:
    """One tool call on one line, as the plain-text renderings show it:
    ``tool(a=1) → result · 12 ms`` (``→ error: reason`` when it failed; ``→ no result``
    for a call cut before it had one). Control characters are the caller's to show."""
    head = f"{call.get('tool')}({short_arguments(call.get('arguments') or {})})"
    head += edited_note(call)
    if "content" not in call:
        return f"{head} → no result"
    mark = "error: " if call.get("is_error") else ""
    return f"{head} → {mark}{snippet(str(call['content']))} · {call.get('duration_ms', 0)} ms"
