"""Plain text and the execution-log trace."""

from __future__ import annotations

from typing import Any

from rolecall.export.citations import cited, sources_by_message
from rolecall.export.common import (
    answered,
    doc_labels,
    plural,
    select,
    short_arguments,
    snippet,
    status,
    step_label,
    summary_lines,
    title,
    token_table,
    tokens_label,
    tool_calls_of,
    tool_line,
    totals_row,
    visible,
    when_label,
    who_label,
)
from rolecall.money import money
from rolecall.storage.document import SessionDocument


# ------------------------------------------------------------------ text
def to_text(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    seen_by: str | None = None,
    times: bool = False,
    summaries: bool = False,
) -> str:
    """The transcript as plain text (``rolecall sessions show``); control characters
    (an ESC in a model's reply) are shown as symbols, never obeyed (:func:`visible`).
    Where a role began to read a running summary in place of older messages, a line says
    so, before the message whose turn it preceded; ``summaries``: the summary under it."""
    sel = select(doc, role=role, search=search, seen_by=seen_by)
    world = doc.world
    head = f"{title(doc)} — world {world.get('name', '?')} · session {doc.session_id}"
    lines = [head]
    if world.get("topic"):
        lines.append(f"topic: {world['topic']}")
    lines.append(f"status: {status(doc)}")
    lines.append(f"{when_label(doc.created_at)} → {when_label(doc.updated_at)} · {sel.describe()}")
    labels = doc_labels(doc)
    texts = {m.id: m.content for m in doc.messages}
    sources = sources_by_message(doc.events)
    calls = tool_calls_of(doc.events)
    folds, late = _summaries_before(doc.events)
    for m in sel.messages:
        for fold in folds.get(m.id, ()):
            lines.append("")
            lines.extend(_summary_lines(fold, summaries))
        lines.append("")
        parts = [f"[{m.id}] {who_label(doc, m, labels)}"]
        where = step_label(m.step_id, m.loop_iteration)
        if where:
            parts.append(f"[{where}]")
        if m.reply_to:
            parts.append(answered(m.reply_to, texts.get(m.reply_to)))
        if tokens_label(m):
            parts.append(tokens_label(m))
        if times:
            parts.append(when_label(m.ts))
        lines.append("  ".join(parts))
        # tools.md: the calls the speaker made for this message, one line each
        lines.extend(
            f"  ⚙ {tool_line(calls[cid])}" if cid in calls else f"  ⚙ {cid}"
            for cid in m.tool_calls or ()
        )
        lines.extend(f"  {line}" for line in (visible(m.content).splitlines() or [""]))
        lines.extend(f"    {c.label}" for c in cited(m.content, sources.get(m.id)))
    for fold in late if not sel.filtered else ():
        lines.append("")
        lines.extend(_summary_lines(fold, summaries))
    if sel.drafts:
        lines.append("")
        lines.append(f"drafts (incomplete, not part of the history): {len(sel.drafts)}")
        for d in sel.drafts:
            where = step_label(d.step_id, None)
            lines.append(f"  [{d.id}] {d.sender} ({d.reason}{', ' + where if where else ''})")
            lines.extend(f"    {line}" for line in (visible(d.content).splitlines() or [""]))
    rows = token_table(doc, sel.messages)
    if rows:
        total = totals_row(rows)
        lines.append("")
        lines.append(
            f"tokens: ↑{total.input_tokens:,} ↓{total.output_tokens:,} in "
            f"{total.messages} message{'' if total.messages == 1 else 's'} · "
            f"cost {money(total.cost_usd)}"
        )
    return visible("\n".join(lines)) + "\n"  # names, titles, quotes: shown, never obeyed


def to_trace(doc: SessionDocument) -> str:
    """The execution log as a table (``rolecall sessions trace``)."""
    head = f"{title(doc)} — session {doc.session_id} · {status(doc)}"
    if not doc.execution_log:
        none = "no steps executed (a chat session, or the flow has not started)"
        more = [*_tool_calls(doc), *_summaries(doc), *_study_turns(doc)]
        return visible("\n".join([head, none, *more])) + "\n"
    header = ("#", "step", "speaker", "message", "loop", "result", "in", "out", "started", "took")
    rows: list[tuple[str, ...]] = []
    for r in doc.execution_log:
        took = (r.ended_at - r.started_at).total_seconds()
        rows.append(
            (
                str(r.execution_order),
                r.step_id,
                r.speaker,
                r.message_id or "-",
                str(r.loop_iteration),
                r.result,
                f"{r.input_tokens:,}",
                f"{r.output_tokens:,}",
                when_label(r.started_at),
                f"{took:.2f}s",
            )
        )
    right = {0, 4, 6, 7, 9}
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        out = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(out).rstrip()

    total_in = sum(r.input_tokens for r in doc.execution_log)
    total_out = sum(r.output_tokens for r in doc.execution_log)
    lines = [head, "", fmt(header), *(fmt(row) for row in rows), ""]
    lines.append(f"{plural(len(rows), 'step')} · tokens ↑{total_in:,} ↓{total_out:,}")
    lines += _tool_calls(doc)
    lines += _summaries(doc)
    lines += _study_turns(doc)
    return visible("\n".join(lines)) + "\n"


def _summaries_before(
    events: list[dict[str, Any]],
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """The ``system/summary`` records by the message whose turn each came before (a
    summary is made as a role's prompt is built), and those after the last message."""
    before: dict[str, list[dict[str, Any]]] = {}
    pending: list[dict[str, Any]] = []
    for e in events:
        kind = e.get("type")
        if kind == "summary" and e.get("topic") == "system":
            pending.append(e)
        elif kind == "message" and e.get("topic") == "messages" and pending:
            before.setdefault(str(e.get("message_id")), []).extend(pending)
            pending = []
    return before, pending


def _summary_lines(record: dict[str, Any], with_text: bool) -> list[str]:
    return summary_lines(
        str(record.get("role")),
        str(record.get("from_id")),
        str(record.get("to_id")),
        str(record.get("text") or ""),
        full=with_text,
    )


def _summaries(doc: SessionDocument) -> list[str]:
    """The running summaries made (knowledge.md, Long sessions), one row each: the
    role, the messages it stands for, its length and what making it cost."""
    records = [e for e in doc.events if e.get("type") == "summary" and e.get("topic") == "system"]
    if not records:
        return []
    header = ("role", "stands for", "words", "in", "out", "model")
    rows = [
        (
            str(r.get("role")),
            f"{r.get('from_id')}–{r.get('to_id')}",
            str(len(str(r.get("text") or "").split())),
            f"{int(r.get('input_tokens') or 0):,}",
            f"{int(r.get('output_tokens') or 0):,}",
            str(r.get("model") or "-"),
        )
        for r in records
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        right = {2, 3, 4}
        out = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ]
        return "  ".join(out).rstrip()

    title_line = (
        f"summaries: {plural(len(rows), 'summary', 'summaries')} "
        "(the roles read these in place of older messages; `sessions show --summaries`)"
    )
    return ["", title_line, fmt(header), *(fmt(row) for row in rows)]


def _approval(call: dict[str, Any]) -> str:
    """The approval column: the decision, who made it when a person or a flag did, and
    ``edited`` when a person ran the call with other arguments (``allow · human, edited``)."""
    decision = str(call.get("decision") or "-")
    by = str(call.get("by") or "")
    if by in ("", "policy"):
        return decision
    return f"{decision} · {by}" + (", edited" if "asked" in call else "")


def _tool_calls(doc: SessionDocument) -> list[str]:
    """The session's tool calls (tools.md), one row each: the message it served, who
    called, the tool, short arguments, the decision, the result and how long it took."""
    calls = tool_calls_of(doc.events)
    if not calls:
        return []
    header = ("call", "message", "speaker", "tool", "arguments", "approval", "result", "took")
    rows = []
    for cid, c in calls.items():
        if "content" in c:
            result = ("error: " if c.get("is_error") else "") + snippet(str(c["content"]), 50)
            took = f"{c.get('duration_ms', 0)} ms"
        else:
            result, took = "no result", "-"
        rows.append(
            (
                cid,
                str(c.get("message_id") or "-"),
                str(c.get("sender") or "-"),
                str(c.get("tool")),
                short_arguments(c.get("arguments") or {}, 40),
                _approval(c),
                result,
                took,
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        out = [c.rjust(widths[i]) if i == 7 else c.ljust(widths[i]) for i, c in enumerate(cells)]
        return "  ".join(out).rstrip()

    noun = "tool call" if len(rows) == 1 else "tool calls"
    return ["", f"{len(rows)} {noun}:", fmt(header)] + [fmt(row) for row in rows]


def _study_turns(doc: SessionDocument) -> list[str]:
    """A study session's per-turn history (its ``study/turn`` records), as a table."""
    records = [
        e.get("data") or {}
        for e in doc.events
        if e.get("type") == "mode" and e.get("mode") == "study" and e.get("name") == "turn"
    ]
    if not records:
        return []
    header = ("turn", "message", "speaker", "unit", "intent", "realloc", "queue before → after")
    rows = []
    for r in records:
        intent = f"{r['intent']} {r['confidence']:.2f}" if r.get("intent") else "-"
        queues = f"{' '.join(r.get('queue_before') or [])} → {' '.join(r.get('queue_after') or [])}"
        rows.append(
            (
                str(r.get("turn", "")),
                str(r.get("message_id", "")),
                str(r.get("speaker", "")),
                str(r.get("unit", "")),
                intent,
                "yes" if r.get("reallocation") else "-",
                queues,
            )
        )
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]

    def fmt(cells: tuple[str, ...]) -> str:
        return "  ".join(c.ljust(widths[i]) for i, c in enumerate(cells)).rstrip()

    return ["", "study turns (intent, reallocation, the unit's queue):", fmt(header)] + [
        fmt(row) for row in rows
    ]
