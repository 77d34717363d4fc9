"""What the pages show of a message: safe Markdown, colours, badges, short texts.

LLM text is Markdown. It is rendered with markdown-it-py in CommonMark mode with raw
HTML disabled (``<script>`` in a message is shown as text), and links are kept only
when they point to ``http:``, ``https:`` or ``mailto:`` addresses or to an anchor of
the page: ``javascript:``, ``data:``, ``vbscript:`` and every other scheme stay plain
text. Images never load anything (they are rendered as a link to their address, or as
their alt text inside a link).
A message id cited in square brackets (``[m3]``, as presets ask closing turns to cite)
is a link to that message on the page; a passage cited (``[k1]``, knowledge.md) is a
link to its source, listed under the message.
Every other string a page shows goes through Jinja2's autoescape.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from html import escape
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml

from rolecall.export.citations import CITATION
from rolecall.export.common import PALETTE, visible  # one palette for the exports and the web view

__all__ = ["color_of", "markdown", "short"]

_SAFE_LINK = re.compile(r"^(https?://|mailto:|#)", re.IGNORECASE)
_GREY = "#6e7781"


def _valid_link(url: str) -> bool:
    return bool(_SAFE_LINK.match(url.strip()))


def _inside_link(tokens: Any, idx: int) -> bool:
    depth = 0
    for token in tokens[:idx]:
        if token.type == "link_open":
            depth += 1
        elif token.type == "link_close":
            depth -= 1
    return depth > 0


def _image_as_link(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """An image as a link to its address (its alt text the label): nothing loads.

    markdown-it binds a render rule to its renderer, so the renderer comes first. An
    image inside a link is only its label (a link in a link is not HTML)."""
    token = tokens[idx]
    src = str(token.attrGet("src") or "")
    alt = renderer.renderInlineAsText(token.children or [], options, env)
    label = escape(alt or "image")
    if not _valid_link(src) or _inside_link(tokens, idx):
        return label
    title = token.attrGet("title")
    title_attr = f' title="{escape(str(title))}"' if title else ""
    return f'<a href="{escape(src)}"{title_attr} rel="{REL}">{label}</a>'


REL = "nofollow noopener noreferrer"  # a page it opens gets no handle on this one


def _link_open(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """A link out of the page (not a ``#`` anchor of it) is ``rel="nofollow noopener
    noreferrer"``."""
    token = tokens[idx]
    if not str(token.attrGet("href") or "").startswith("#"):
        token.attrSet("rel", REL)
    return str(renderer.renderToken(tokens, idx, options, env))


_CITED = re.compile(r"\[(m[1-9][0-9]{0,8})\]")


def _text_with_citations(renderer: Any, tokens: Any, idx: int, options: Any, env: Any) -> str:
    """Plain text, each ``[mN]`` in it a link to message mN and each ``[kN]`` the
    message was given (``env["passages"]``) a link to its source under the message
    (``#mK-kN``); not inside another link."""
    text = escapeHtml(tokens[idx].content)
    if "[" not in text or _inside_link(tokens, idx):
        return text
    if "[m" in text:
        text = _CITED.sub(r'<a class="cite" href="#\1">[\1]</a>', text)
    passages = env.get("passages") if isinstance(env, dict) else None
    if passages and "[k" in text:
        anchor = escape(str(env.get("message_id", "")))

        def link(found: re.Match[str]) -> str:
            kid = found.group(1)
            if kid not in passages:
                return found.group(0)
            return f'<a class="cite" href="#{anchor}-{kid}">[{kid}]</a>'

        text = CITATION.sub(link, text)
    return text


@lru_cache(maxsize=1)
def _parser() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False})
    md.validateLink = _valid_link  # type: ignore[method-assign]
    md.add_render_rule("image", _image_as_link)
    md.add_render_rule("text", _text_with_citations)
    md.add_render_rule("link_open", _link_open)
    return md


def markdown(text: str, message_id: str = "", passages: Iterable[str] = ()) -> str:
    """``text`` as safe HTML (see the module docstring); each ``[kN]`` of ``passages``
    (the ids of the passages the message cites) links to ``#<message_id>-kN``."""
    text = visible(text)  # a terminal control (a tool's output quoted) shown, not kept raw
    given = frozenset(passages)
    if not given:
        return str(_parser().render(text))
    return str(_parser().render(text, {"message_id": message_id, "passages": given}))


def color_of(role_ids: list[str], sender: str) -> str:
    """The role's colour: by its position in the world, grey for the human and system."""
    if sender in role_ids:
        return PALETTE[role_ids.index(sender) % len(PALETTE)]
    return _GREY


def short(text: str, width: int = 80) -> str:
    """One line of at most ``width`` characters (an ellipsis marks a cut)."""
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 1].rstrip() + "…"
