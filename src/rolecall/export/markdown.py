"""Markdown, with user content quoted and neutralised (see the package docstring)."""

from __future__ import annotations

import json
import re
from typing import Any

from rolecall.export.citations import cited, sources_by_message
from rolecall.export.common import (
    doc_labels,
    role_names,
    row_cost,
    select,
    snippet,
    status,
    step_label,
    title,
    token_table,
    tokens_label,
    tool_calls_of,
    totals_row,
    visible,
    when_label,
    who_label,
)
from rolecall.money import money
from rolecall.storage.document import SessionDocument

# ------------------------------------------------------------------ markdown
_MD_INLINE = re.compile(r"([\\`*_\[\]<>|~&])")
_MD_ORDERED = re.compile(r"^(\d{1,9})([.)])")
_NBSP = "\u00a0"


def md_escape(text: str) -> str:
    """One line of user text, safe anywhere in Markdown (newlines become spaces)."""
    return _md_line(" ".join(visible(text).splitlines()))


def _md_line(line: str) -> str:
    body = line.lstrip(" \t")
    lead = line[: len(line) - len(body)]
    body = _MD_INLINE.sub(r"\\\1", body)
    ordered = _MD_ORDERED.match(body)
    if ordered:
        body = f"{ordered.group(1)}\\{ordered.group(2)}{body[ordered.end() :]}"
    elif body[:1] in ("#", "-", "+", "="):
        body = "\\" + body
    return _NBSP * len(lead.expandtabs(4)) + body


def md_quote(text: str) -> str:
    """A message body as a neutralised blockquote (see the module docstring)."""
    lines = [_md_line(line).rstrip() for line in visible(text).splitlines()]
    if not any(lines):
        return "> *(empty)*"
    out = []
    for i, line in enumerate(lines):
        if not line:
            out.append(">")
            continue
        # a hard line break (CommonMark: backslash at the end) keeps the message's lines
        follows = i + 1 < len(lines) and bool(lines[i + 1])
        out.append(f"> {line}\\" if follows else f"> {line}")
    return "\n".join(out)


def _tool_lines(ids: list[str], calls: dict[str, dict[str, Any]]) -> list[str]:
    """A message's tool calls as a collapsed block: the tool, its arguments, the result."""
    noun = "tool call" if len(ids) == 1 else "tool calls"
    out = ["<details><summary>" + f"{len(ids)} {noun}" + "</summary>", ""]
    for cid in ids:
        call = calls.get(cid)
        if call is None:
            out.append(f"- {md_escape(cid)}")
            continue
        arguments = json.dumps(call["arguments"], ensure_ascii=False)
        mark = "error: " if call.get("is_error") else ""
        result = snippet(str(call.get("content", "")))
        asked = call.get("asked")
        if isinstance(asked, dict):  # a person ran it with other arguments than the model's
            model = json.dumps(asked, ensure_ascii=False)
            arguments += f" (edited; the model asked {model})"
        out.append(
            f"- `{call['tool']}` {md_escape(arguments)} → {mark}{md_escape(result)}"
            f" ({call.get('duration_ms', 0)} ms)"
        )
    return [*out, "", "</details>", ""]


def to_markdown(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    seen_by: str | None = None,
) -> str:
    """The session as a Markdown document (see the module docstring for the escaping)."""
    sel = select(doc, role=role, search=search, seen_by=seen_by)
    world = doc.world
    e = md_escape
    out = [f"# {e(title(doc))}", ""]
    facts = [f"- **World:** {e(str(world.get('name', '?')))}"]
    if world.get("topic"):
        facts.append(f"- **Topic:** {e(str(world['topic']))}")
    facts += [
        f"- **Session:** {e(doc.session_id)}",
        f"- **Created:** {when_label(doc.created_at)} · **Updated:** {when_label(doc.updated_at)}",
        f"- **Status:** {e(status(doc))}",
        f"- **Messages:** {e(sel.describe())}",
    ]
    out += [*facts, ""]
    names = role_names(doc)
    if names:
        out += ["## Cast", ""]
        out += [f"- **{e(rid)}**: {e(name)}" for rid, name in names.items()]
        out.append("")

    rows = token_table(doc, sel.messages)
    out += ["## Tokens" + (" (messages shown)" if sel.filtered else ""), ""]
    if rows:
        out += [
            "| role | messages | input | output | total | cost (USD) |",
            "| --- | ---: | ---: | ---: | ---: | ---: |",
        ]
        for r in rows:
            out.append(
                f"| {e(r.sender)} | {r.messages} | {r.input_tokens:,} | {r.output_tokens:,} "
                f"| {r.total:,} | {row_cost(r)} |"
            )
        t = totals_row(rows)
        out.append(
            f"| **total** | **{t.messages}** | **{t.input_tokens:,}** | "
            f"**{t.output_tokens:,}** | **{t.total:,}** | **{money(t.cost_usd)}** |"
        )
    else:
        out.append("No messages.")
    out += ["", "## Transcript", ""]
    if not sel.messages:
        out += ["No messages match." if sel.filtered else "No messages yet.", ""]
    labels = doc_labels(doc)
    texts = {m.id: m.content for m in doc.messages}
    sources = sources_by_message(doc.events)
    calls = tool_calls_of(doc.events)
    for m in sel.messages:
        out.append(f"### {e(m.id)} · {e(who_label(doc, m, labels))}")
        out.append("")
        badges = []
        where = step_label(m.step_id, m.loop_iteration)
        if where:
            badges.append(f"*{e(where)}*")
        if m.reply_to:
            said = texts.get(m.reply_to)
            quoted = f' "{e(snippet(said))}"' if said is not None else ""
            badges.append(f"replying to {e(m.reply_to)}{quoted}")
        if tokens_label(m):
            badges.append(tokens_label(m))
        badges.append(when_label(m.ts))
        out += [" · ".join(badges), ""]
        if m.tool_calls:  # tools.md: collapsed, one line per call
            out += _tool_lines(m.tool_calls, calls)
        out += [md_quote(m.content), ""]
        citations = cited(m.content, sources.get(m.id))
        if citations:  # where each [kN] it cites comes from (knowledge.md)
            out += ["Sources:", "", *(f"- {e(c.label)}" for c in citations), ""]
    if sel.drafts:
        out += ["## Drafts (incomplete)", ""]
        out += ["Generations that did not complete; they are not part of the history.", ""]
        for d in sel.drafts:
            where = step_label(d.step_id, None)
            extra = f" · *{e(where)}*" if where else ""
            out.append(f"### {e(d.id)} · {e(d.sender)} (incomplete)")
            out += ["", f"{e(d.reason)}{extra} · {when_label(d.ts)}", "", md_quote(d.content), ""]
    return visible("\n".join(out)).rstrip("\n") + "\n"
