"""One self-contained HTML page (inline CSS, no scripts, escaped content)."""

from __future__ import annotations

import html
import json
from typing import Any

from rolecall.export.citations import CITATION, Sources, cited, sources_by_message
from rolecall.export.common import (
    GREY,
    PALETTE,
    doc_labels,
    private_label,
    role_names,
    roles_of,
    row_cost,
    select,
    sender_label,
    sender_order,
    snippet,
    status,
    target_of,
    title,
    token_table,
    tokens_label,
    tool_calls_of,
    totals_row,
    visible,
    when_label,
)
from rolecall.money import money
from rolecall.storage.document import SessionDocument

# ------------------------------------------------------------------ html

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
.badge.private { background: #fff8c5; color: #7d4e00; }
.tokens, time { font-variant-numeric: tabular-nums; }
.body { white-space: pre-wrap; overflow-wrap: anywhere; margin-top: 4px; }
a { color: inherit; }
ol.sources { margin: 6px 0 0; padding-left: 0; list-style: none; font-size: 0.85em;
  color: #59636e; }
a.cite { color: #0550ae; }
details.tools { margin-top: 4px; font-size: 0.85em; color: #59636e; }
details.tools ul { margin: 4px 0 0; padding-left: 18px; }
details.tools code { color: #1f2328; }
details.tools .error { color: #cf222e; }
footer { margin-top: 40px; color: #59636e; font-size: 0.85em; }
"""


def _h(text: object) -> str:
    return html.escape(visible(str(text)), quote=True)


def _colors(doc: SessionDocument, senders: list[str]) -> dict[str, str]:
    order = sender_order(doc, senders)
    agents = [str(r.get("id", "")) for r in roles_of(doc)]
    return {s: PALETTE[i % len(PALETTE)] if s in agents else GREY for i, s in enumerate(order)}


def _who_span(sender: str, color: str) -> str:
    return f'<span class="who" style="--c:{color}">{_h(sender)}</span>'


def _body_with_sources(message_id: str, content: str, sources: Sources | None) -> list[str]:
    """A message's body; each ``[kN]`` it cites linked to its source, listed below it."""
    citations = cited(content, sources)
    body = _h(content)
    if not citations:
        return [f'<div class="body">{body}</div>']
    anchors = {c.id: f"{_h(message_id)}-{c.id}" for c in citations}
    body = CITATION.sub(
        lambda found: (
            f'<a class="cite" href="#{anchors[found.group(1)]}">{found.group(0)}</a>'
            if found.group(1) in anchors
            else found.group(0)
        ),
        body,  # "[k1]" is left as it is by the escaping
    )
    items = "".join(
        f'<li id="{anchors[c.id]}">[{_h(c.id)}] <code>{_h(c.source)}</code></li>' for c in citations
    )
    return [f'<div class="body">{body}</div>', f'<ol class="sources">{items}</ol>']


def _tool_block(ids: list[str], calls: dict[str, dict[str, Any]]) -> list[str]:
    """A message's tool calls, collapsed (tools.md): one line each with the tool, its
    arguments, the result (shortened) and how long it took."""
    noun = "tool call" if len(ids) == 1 else "tool calls"
    items = []
    for cid in ids:
        call = calls.get(cid)
        if call is None:
            items.append(f"<li>{_h(cid)}</li>")
            continue
        arguments = json.dumps(call["arguments"], ensure_ascii=False)
        if "content" not in call:
            result = "no result"
        elif call.get("is_error"):
            result = f'<span class="error">error: {_h(snippet(str(call["content"])))}</span>'
        else:
            result = _h(snippet(str(call["content"])))
        took = f" ({call.get('duration_ms', 0)} ms)" if "content" in call else ""
        tool = f"<code>{_h(call['tool'])}</code> <code>{_h(arguments)}</code>"
        asked = call.get("asked")
        if isinstance(asked, dict):  # a person ran it with other arguments than the model's
            model = json.dumps(asked, ensure_ascii=False)
            tool += (
                f' <span class="edited">(edited; the model asked <code>{_h(model)}</code>)</span>'
            )
        items.append(f"<li>{tool} → {result}{took}</li>")
    return [
        f'<details class="tools"><summary>{len(ids)} {noun}</summary>',
        f"<ul>{''.join(items)}</ul>",
        "</details>",
    ]


def to_html(
    doc: SessionDocument,
    *,
    role: str | None = None,
    search: str | None = None,
    seen_by: str | None = None,
) -> str:
    """The session as one self-contained HTML page (every piece of content escaped)."""
    from rolecall.version import __version__

    sel = select(doc, role=role, search=search, seen_by=seen_by)
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
        f"<dt>Created</dt><dd><time>{_h(when_label(doc.created_at))}</time></dd>",
        f"<dt>Updated</dt><dd><time>{_h(when_label(doc.updated_at))}</time></dd>",
        f"<dt>Messages</dt><dd>{_h(sel.describe())}</dd>",
    ]
    names = role_names(doc)
    if names:
        cast = ", ".join(
            f'<span class="who" style="--c:{colors.get(rid, GREY)}">{_h(rid)}</span> ({_h(name)})'
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
                f'<tr><td><span class="who" style="--c:{colors.get(r.sender, GREY)}">'
                f"{_h(r.sender)}</span></td>"
                f'<td class="n">{r.messages}</td><td class="n">{r.input_tokens:,}</td>'
                f'<td class="n">{r.output_tokens:,}</td><td class="n">{r.total:,}</td>'
                f'<td class="n cost">{_h(row_cost(r))}</td></tr>'
            )
        t = totals_row(rows)
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
    labels = doc_labels(doc)
    texts = {m.id: m.content for m in doc.messages}
    sources = sources_by_message(doc.events)
    calls = tool_calls_of(doc.events)
    for m in sel.messages:
        color = colors.get(m.sender, GREY)
        head = [f'<span class="id">{_h(m.id)}</span>', _who_span(sender_label(labels, m), color)]
        target = target_of(doc, m)
        if target:
            head.append(f"→ {_who_span(target, colors.get(target, GREY))}")
        if m.step_id:
            label = "interjection" if m.step_id == "interjection" else f"step {m.step_id}"
            head.append(f'<span class="badge step">{_h(label)}</span>')
        if m.loop_iteration:
            head.append(f'<span class="badge loop">loop {m.loop_iteration}</span>')
        if m.audience is not None:  # audiences.md
            head.append(f'<span class="badge private">{_h(private_label(m))}</span>')
        if m.reply_to:
            ref = _h(m.reply_to)
            link = f'<a href="#{ref}">{ref}</a>' if m.reply_to in ids else ref
            said = texts.get(m.reply_to)
            quoted = f' <span class="answered">“{_h(snippet(said))}”</span>' if said else ""
            head.append(f"<span>↩ replying to {link}{quoted}</span>")
        if tokens_label(m):
            head.append(f'<span class="tokens">{_h(tokens_label(m))}</span>')
        head.append(f'<time datetime="{_h(m.ts.isoformat())}">{_h(when_label(m.ts))}</time>')
        out += [
            f'<article class="msg" id="{_h(m.id)}" style="--c:{color}">',
            f'<div class="head">{" ".join(head)}</div>',
            *(_tool_block(m.tool_calls, calls) if m.tool_calls else ()),
            *_body_with_sources(m.id, m.content, sources.get(m.id)),
            "</article>",
        ]

    if sel.drafts:
        out += [
            "<h2>Drafts (incomplete)</h2>",
            "<p>Generations that did not complete; they are not part of the history.</p>",
        ]
        for d in sel.drafts:
            color = colors.get(d.sender, GREY)
            head = [f'<span class="id">{_h(d.id)}</span>', _who_span(d.sender, color)]
            head.append(f'<span class="badge draft">incomplete: {_h(d.reason)}</span>')
            if d.step_id:
                head.append(f'<span class="badge step">step {_h(d.step_id)}</span>')
            head.append(f'<time datetime="{_h(d.ts.isoformat())}">{_h(when_label(d.ts))}</time>')
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
