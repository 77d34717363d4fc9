"""Rendering a stored session for people: plain text, Markdown and one HTML page.

Pure functions of a :class:`~rolecall.session.document.SessionDocument`; nothing here
reads or writes files. Every rendering shows who answers whom (``teacher → student``),
the step and loop iteration of each message, how the session stands (the stop reason, or
paused/running), a per-role token table and, separately, the drafts (generations that did
not complete). Two filters narrow the messages shown: ``role`` keeps that sender's
messages, ``search`` keeps messages containing the text (case-insensitive); both together
keep messages matching both. The token table counts the messages shown.

Loop badges follow the terminal display: ``loop N`` is the message's ``loop_iteration``
(how many times its step ran before in the session); the first run of a step has none.

Safety of user content (message text, names, titles, topics):

* HTML: every piece goes through :func:`html.escape`; message bodies are shown with
  ``white-space: pre-wrap``. The page is self-contained (inline CSS, no scripts, no
  external assets).
* Markdown: message bodies are quoted (every line starts with ``> ``) and neutralised,
  so a message can never create document structure or markup: the characters
  ``\\ ` * _ [ ] < > | ~ &`` are backslash-escaped everywhere, and a line starting with
  ``#``, ``-``, ``+``, ``=`` or ``1.``/``1)`` has that marker escaped too (no headings,
  rules, setext underlines, lists, fences, tables, links or HTML). Leading spaces become
  no-break spaces, so indentation shows but never makes a code block, and each line but
  the last of a paragraph ends with a backslash (a CommonMark hard line break), so the
  message keeps its lines. A renderer shows the message text literally. Names, titles
  and topics get the same escaping, on one line.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rolecall.money import money
from rolecall.session.document import SessionDocument
from rolecall.session.state import Draft, Message

__all__ = [
    "Selection",
    "TokenRow",
    "md_escape",
    "md_quote",
    "select",
    "status",
    "to_html",
    "to_markdown",
    "to_text",
    "to_trace",
    "token_table",
]

# A palette readable on white; role colours are picked by the role's position.
_PALETTE = (
    "#1f6feb",
    "#b35900",
    "#1a7f37",
    "#8250df",
    "#cf222e",
    "#0a7480",
    "#9a6700",
    "#bf3989",
)
_GREY = "#6e7781"


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


def cost_of(messages: list[Message]) -> float | None:
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

    messages: list[Message]
    drafts: list[Draft]
    total_messages: int
    role: str | None
    search: str | None

    @property
    def filtered(self) -> bool:
        return self.role is not None or self.search is not None

    def describe(self) -> str:
        """``3 of 8 messages (role a; search "x")``, or ``8 messages``."""
        shown = len(self.messages)
        noun = "message" if self.total_messages == 1 else "messages"
        if not self.filtered:
            return f"{shown} {noun}"
        parts = []
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
    doc: SessionDocument, *, role: str | None = None, search: str | None = None
) -> Selection:
    """The messages (and drafts) of ``doc`` kept by the filters, in session order."""
    needle = search.casefold() if search is not None else None
    return Selection(
        messages=[m for m in doc.messages if _matches(m.sender, m.content, role, needle)],
        drafts=[d for d in doc.drafts if _matches(d.sender, d.content, role, needle)],
        total_messages=len(doc.messages),
        role=role,
        search=search,
    )


def _roles(doc: SessionDocument) -> list[dict[str, Any]]:
    roles = doc.world.get("roles")
    return [r for r in roles if isinstance(r, dict)] if isinstance(roles, list) else []


def _role_names(doc: SessionDocument) -> dict[str, str]:
    out: dict[str, str] = {}
    for role in _roles(doc):
        rid = str(role.get("id", ""))
        out[rid] = str(role.get("name") or rid.replace("_", " ").title())
    return out


def _sender_order(doc: SessionDocument, senders: list[str]) -> list[str]:
    """World roles in their order, then anyone else (human, system) as first seen."""
    order = [str(r.get("id", "")) for r in _roles(doc)]
    for sender in senders:
        if sender not in order:
            order.append(sender)
    return order


def token_table(doc: SessionDocument, messages: list[Message]) -> list[TokenRow]:
    """One row per sender with messages among ``messages``: count, input and output tokens."""
    counts: dict[str, list[int]] = {}
    by_sender: dict[str, list[Message]] = {}
    for m in messages:
        row = counts.setdefault(m.sender, [0, 0, 0])
        row[0] += 1
        row[1] += m.input_tokens
        row[2] += m.output_tokens
        by_sender.setdefault(m.sender, []).append(m)
    names = _role_names(doc)
    return [
        TokenRow(
            sender,
            names.get(sender, sender),
            counts[sender][0],
            counts[sender][1],
            counts[sender][2],
            cost_of(by_sender[sender]),
        )
        for sender in _sender_order(doc, list(counts))
        if sender in counts
    ]


def _row_cost(row: TokenRow) -> str:
    return money(row.cost_usd) if row.cost_usd is not None or row.sender != "human" else "-"


def _totals(rows: list[TokenRow]) -> TokenRow:
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
    """How the session stands: ``finished: flow_end (after the last step 'four')``, ..."""
    s = doc.state
    if s.state == "finished":
        text = f"finished: {s.stop_reason or 'unknown reason'}"
        return f"{text} ({s.stop_detail})" if s.stop_detail else text
    if s.state == "paused":
        return f"paused ({s.pause_reason})" if s.pause_reason else "paused"
    if s.state == "running":
        return "running (not finished; if its process ended, resume continues it)"
    return "created (nothing has run yet)"


def _target(doc: SessionDocument, message: Message) -> str | None:
    if message.target:
        return message.target
    if message.reply_to:
        for m in doc.messages:
            if m.id == message.reply_to:
                return m.sender
    return None


def _who(doc: SessionDocument, message: Message) -> str:
    target = _target(doc, message)
    return f"{message.sender} → {target}" if target else message.sender


def _where(step: str | None, iteration: int | None) -> str:
    if not step:
        return ""
    where = "interjection" if step == "interjection" else f"step {step}"
    if iteration:
        where += f" · loop {iteration}"
    return where


def _when(value: datetime) -> str:
    zone = value.strftime("%Z") if value.tzinfo else ""
    return value.strftime("%Y-%m-%d %H:%M:%S") + (f" {zone}" if zone else "")


def _tokens(m: Message) -> str:
    if not (m.input_tokens or m.output_tokens):
        return ""
    return f"↑{m.input_tokens:,} ↓{m.output_tokens:,}"


# ------------------------------------------------------------------ text
def to_text(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    times: bool = False,
) -> str:
    """The transcript as plain text (``rolecall sessions show``)."""
    sel = select(doc, role=role, search=search)
    world = doc.world
    head = f"{title(doc)} — world {world.get('name', '?')} · session {doc.session_id}"
    lines = [head]
    if world.get("topic"):
        lines.append(f"topic: {world['topic']}")
    lines.append(f"status: {status(doc)}")
    lines.append(f"{_when(doc.created_at)} → {_when(doc.updated_at)} · {sel.describe()}")
    for m in sel.messages:
        lines.append("")
        parts = [f"[{m.id}] {_who(doc, m)}"]
        where = _where(m.step_id, m.loop_iteration)
        if where:
            parts.append(f"[{where}]")
        if _tokens(m):
            parts.append(_tokens(m))
        if times:
            parts.append(_when(m.ts))
        lines.append("  ".join(parts))
        lines.extend(f"  {line}" for line in (m.content.splitlines() or [""]))
    if sel.drafts:
        lines.append("")
        lines.append(f"drafts (incomplete, not part of the history): {len(sel.drafts)}")
        for d in sel.drafts:
            where = _where(d.step_id, None)
            lines.append(
                f"  [{d.message_id}] {d.sender} ({d.reason}{', ' + where if where else ''})"
            )
            lines.extend(f"    {line}" for line in (d.content.splitlines() or [""]))
    rows = token_table(doc, sel.messages)
    if rows:
        total = _totals(rows)
        lines.append("")
        lines.append(
            f"tokens: ↑{total.input_tokens:,} ↓{total.output_tokens:,} in "
            f"{total.messages} message{'' if total.messages == 1 else 's'} · "
            f"cost {money(total.cost_usd)}"
        )
    return "\n".join(lines) + "\n"


def to_trace(doc: SessionDocument) -> str:
    """The execution log as a table (``rolecall sessions trace``)."""
    head = f"{title(doc)} — session {doc.session_id} · {status(doc)}"
    if not doc.execution_log:
        return f"{head}\nno steps executed (a chat session, or the flow has not started)\n"
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
                _when(r.started_at),
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
    lines.append(f"{len(rows)} steps · tokens ↑{total_in:,} ↓{total_out:,}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------ markdown
_MD_INLINE = re.compile(r"([\\`*_\[\]<>|~&])")
_MD_ORDERED = re.compile(r"^(\d{1,9})([.)])")
_NBSP = "\u00a0"


def md_escape(text: str) -> str:
    """One line of user text, safe anywhere in Markdown (newlines become spaces)."""
    return _md_line(" ".join(text.splitlines()))


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
    lines = [_md_line(line).rstrip() for line in text.splitlines()]
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


def to_markdown(doc: SessionDocument, *, role: str | None = None, search: str | None = None) -> str:
    """The session as a Markdown document (see the module docstring for the escaping)."""
    sel = select(doc, role=role, search=search)
    world = doc.world
    e = md_escape
    out = [f"# {e(title(doc))}", ""]
    facts = [f"- **World:** {e(str(world.get('name', '?')))}"]
    if world.get("topic"):
        facts.append(f"- **Topic:** {e(str(world['topic']))}")
    facts += [
        f"- **Session:** {e(doc.session_id)}",
        f"- **Created:** {_when(doc.created_at)} · **Updated:** {_when(doc.updated_at)}",
        f"- **Status:** {e(status(doc))}",
        f"- **Messages:** {e(sel.describe())}",
    ]
    out += [*facts, ""]
    names = _role_names(doc)
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
                f"| {r.total:,} | {_row_cost(r)} |"
            )
        t = _totals(rows)
        out.append(
            f"| **total** | **{t.messages}** | **{t.input_tokens:,}** | "
            f"**{t.output_tokens:,}** | **{t.total:,}** | **{money(t.cost_usd)}** |"
        )
    else:
        out.append("No messages.")
    out += ["", "## Transcript", ""]
    if not sel.messages:
        out += ["No messages match." if sel.filtered else "No messages yet.", ""]
    for m in sel.messages:
        out.append(f"### {e(m.id)} · {e(_who(doc, m))}")
        out.append("")
        badges = []
        where = _where(m.step_id, m.loop_iteration)
        if where:
            badges.append(f"*{e(where)}*")
        if m.reply_to:
            badges.append(f"replying to {e(m.reply_to)}")
        if _tokens(m):
            badges.append(_tokens(m))
        badges.append(_when(m.ts))
        out += [" · ".join(badges), "", md_quote(m.content), ""]
    if sel.drafts:
        out += ["## Drafts (incomplete)", ""]
        out += ["Generations that did not complete; they are not part of the history.", ""]
        for d in sel.drafts:
            where = _where(d.step_id, None)
            extra = f" · *{e(where)}*" if where else ""
            out.append(f"### {e(d.message_id)} · {e(d.sender)} (incomplete)")
            out += ["", f"{e(d.reason)}{extra} · {_when(d.ts)}", "", md_quote(d.content), ""]
    return "\n".join(out).rstrip("\n") + "\n"


# ------------------------------------------------------------------ html
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_CSS = """
:root { color-scheme: light; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif;
  color: #1f2328; background: #f6f8fa; margin: 0; }
main { max-width: 860px; margin: 0 auto; padding: 24px 16px 48px; }
h1 { font-size: 1.6em; margin: 0 0 8px; }
h2 { font-size: 1.2em; margin: 32px 0 12px; border-bottom: 1px solid #d0d7de; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 12px; margin: 0; }
dl.facts dt { color: #59636e; } dl.facts dd { margin: 0; }
.status { display: inline-block; padding: 2px 10px; border-radius: 12px; font-weight: 600; }
.status.finished { background: #dafbe1; color: #1a7f37; }
.status.paused, .status.running { background: #fff8c5; color: #7d4e00; }
.status.created { background: #eaeef2; color: #59636e; }
table { border-collapse: collapse; background: #fff; }
th, td { border: 1px solid #d0d7de; padding: 4px 10px; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.total td { font-weight: 600; background: #f6f8fa; }
.msg { background: #fff; border: 1px solid #d0d7de; border-left: 4px solid var(--c);
  border-radius: 6px; margin: 0 0 12px; padding: 8px 12px; }
.msg.draft { border-style: dashed; border-left-style: solid; opacity: 0.85; }
.head { display: flex; flex-wrap: wrap; align-items: baseline; gap: 6px 8px;
  font-size: 0.9em; color: #59636e; }
.who { font-weight: 600; color: var(--c); }
.id { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 0.85em; }
.badge { border-radius: 10px; padding: 0 8px; font-size: 0.85em; background: #eaeef2; }
.badge.loop { background: #ddf4ff; color: #0550ae; }
.badge.draft { background: #ffebe9; color: #cf222e; }
.tokens, time { font-variant-numeric: tabular-nums; }
.body { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: 4px; }
a { color: inherit; }
footer { margin-top: 40px; color: #59636e; font-size: 0.85em; }
"""


def _h(text: object) -> str:
    return html.escape(_CONTROL.sub("\ufffd", str(text)), quote=True)


def _colors(doc: SessionDocument, senders: list[str]) -> dict[str, str]:
    order = _sender_order(doc, senders)
    agents = [str(r.get("id", "")) for r in _roles(doc)]
    return {s: _PALETTE[i % len(_PALETTE)] if s in agents else _GREY for i, s in enumerate(order)}


def _who_span(sender: str, color: str) -> str:
    return f'<span class="who" style="--c:{color}">{_h(sender)}</span>'


def to_html(doc: SessionDocument, *, role: str | None = None, search: str | None = None) -> str:
    """The session as one self-contained HTML page (every piece of content escaped)."""
    from rolecall import __version__

    sel = select(doc, role=role, search=search)
    world = doc.world
    senders = [m.sender for m in doc.messages] + [d.sender for d in doc.drafts]
    colors = _colors(doc, senders)
    ids = {m.id for m in sel.messages}
    out = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="generator" content="rolecall">',
        f"<title>{_h(title(doc))} · {_h(doc.session_id)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        "<main>",
        "<header>",
        f"<h1>{_h(title(doc))}</h1>",
        f'<p><span class="status {_h(doc.state.state)}">{_h(status(doc))}</span></p>',
        '<dl class="facts">',
        f"<dt>World</dt><dd>{_h(world.get('name', '?'))}</dd>",
    ]
    if world.get("topic"):
        out.append(f"<dt>Topic</dt><dd>{_h(world['topic'])}</dd>")
    out += [
        f'<dt>Session</dt><dd class="id">{_h(doc.session_id)}</dd>',
        f"<dt>Created</dt><dd><time>{_h(_when(doc.created_at))}</time></dd>",
        f"<dt>Updated</dt><dd><time>{_h(_when(doc.updated_at))}</time></dd>",
        f"<dt>Messages</dt><dd>{_h(sel.describe())}</dd>",
    ]
    names = _role_names(doc)
    if names:
        cast = ", ".join(
            f'<span class="who" style="--c:{colors.get(rid, _GREY)}">{_h(rid)}</span> ({_h(name)})'
            for rid, name in names.items()
        )
        out.append(f"<dt>Cast</dt><dd>{cast}</dd>")
    out += ["</dl>", "</header>"]

    rows = token_table(doc, sel.messages)
    out.append(f"<h2>Tokens{' (messages shown)' if sel.filtered else ''}</h2>")
    if rows:
        out += [
            '<table class="tokens">',
            '<thead><tr><th>role</th><th class="n">messages</th><th class="n">input</th>'
            '<th class="n">output</th><th class="n">total</th><th class="n">cost (USD)</th>'
            "</tr></thead>",
            "<tbody>",
        ]
        for r in rows:
            out.append(
                f'<tr><td><span class="who" style="--c:{colors.get(r.sender, _GREY)}">'
                f"{_h(r.sender)}</span></td>"
                f'<td class="n">{r.messages}</td><td class="n">{r.input_tokens:,}</td>'
                f'<td class="n">{r.output_tokens:,}</td><td class="n">{r.total:,}</td>'
                f'<td class="n cost">{_h(_row_cost(r))}</td></tr>'
            )
        t = _totals(rows)
        out += [
            "</tbody>",
            f'<tfoot><tr class="total"><td>total</td><td class="n">{t.messages}</td>'
            f'<td class="n">{t.input_tokens:,}</td><td class="n">{t.output_tokens:,}</td>'
            f'<td class="n">{t.total:,}</td><td class="n cost">{_h(money(t.cost_usd))}</td>'
            "</tr></tfoot>",
            "</table>",
        ]
    else:
        out.append("<p>No messages.</p>")

    out.append("<h2>Transcript</h2>")
    if not sel.messages:
        out.append(f"<p>{'No messages match.' if sel.filtered else 'No messages yet.'}</p>")
    for m in sel.messages:
        color = colors.get(m.sender, _GREY)
        head = [f'<span class="id">{_h(m.id)}</span>', _who_span(m.sender, color)]
        target = _target(doc, m)
        if target:
            head.append(f"→ {_who_span(target, colors.get(target, _GREY))}")
        if m.step_id:
            label = "interjection" if m.step_id == "interjection" else f"step {m.step_id}"
            head.append(f'<span class="badge step">{_h(label)}</span>')
        if m.loop_iteration:
            head.append(f'<span class="badge loop">loop {m.loop_iteration}</span>')
        if m.reply_to:
            ref = _h(m.reply_to)
            link = f'<a href="#{ref}">{ref}</a>' if m.reply_to in ids else ref
            head.append(f"<span>replying to {link}</span>")
        if _tokens(m):
            head.append(f'<span class="tokens">{_h(_tokens(m))}</span>')
        head.append(f'<time datetime="{_h(m.ts.isoformat())}">{_h(_when(m.ts))}</time>')
        out += [
            f'<article class="msg" id="{_h(m.id)}" style="--c:{color}">',
            f'<div class="head">{" ".join(head)}</div>',
            f'<div class="body">{_h(m.content)}</div>',
            "</article>",
        ]

    if sel.drafts:
        out += [
            "<h2>Drafts (incomplete)</h2>",
            "<p>Generations that did not complete; they are not part of the history.</p>",
        ]
        for d in sel.drafts:
            color = colors.get(d.sender, _GREY)
            head = [f'<span class="id">{_h(d.message_id)}</span>', _who_span(d.sender, color)]
            head.append(f'<span class="badge draft">incomplete: {_h(d.reason)}</span>')
            if d.step_id:
                head.append(f'<span class="badge step">step {_h(d.step_id)}</span>')
            head.append(f'<time datetime="{_h(d.ts.isoformat())}">{_h(_when(d.ts))}</time>')
            out += [
                f'<article class="msg draft" style="--c:{color}">',
                f'<div class="head">{" ".join(head)}</div>',
                f'<div class="body">{_h(d.content)}</div>',
                "</article>",
            ]
    out += [
        f"<footer>Exported by rolecall {_h(__version__)} from session "
        f"{_h(doc.session_id)}.</footer>",
        "</main>",
        "</body>",
        "</html>",
    ]
    return "\n".join(out) + "\n"
