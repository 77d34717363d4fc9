"""Rendering a stored session for people: plain text, Markdown and one HTML page.

Pure functions of a :class:`~rolecall.storage.document.SessionDocument`; nothing here
reads or writes files. Every rendering shows who answers whom (``teacher → student``),
the step and loop iteration of each message, how the session stands (the stop reason, or
paused/running), a per-role token table and, separately, the drafts (generations that did
not complete). Two filters narrow the messages shown: ``role`` keeps that sender's
messages, ``search`` keeps messages containing the text (case-insensitive); both together
keep messages matching both. The token table counts the messages shown.

Loop badges follow the terminal display: ``loop N`` is the message's ``loop_iteration``
(how many times its step ran before in the session); the first run of a step has none.

Safety of user content (message text, names, titles, topics):

* Every rendering (text, Markdown, HTML, PDF) shows control characters instead of
  passing them on: ESC as ``␛``, BEL as ``␇``, NUL as ``␀``, a C1 control as
  ``<U+009B>`` (:func:`~rolecall.export.common.visible`); newlines and tabs are kept. A
  model's reply cannot move the cursor, retitle or clear the reader's terminal.

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

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rolecall.export.common import (
        Selection,
        TokenRow,
        select,
        status,
        title,
        token_table,
        visible,
    )
    from rolecall.export.html import to_html
    from rolecall.export.markdown import md_escape, md_quote, to_markdown
    from rolecall.export.text import to_text, to_trace

# each name's module, imported on first use: the terminal display imports
# export.common's helpers at every start, and none of the renderers (html costs 2-3 ms)
_MODULES = {
    "Selection": "common",
    "TokenRow": "common",
    "select": "common",
    "status": "common",
    "title": "common",
    "token_table": "common",
    "visible": "common",
    "to_html": "html",
    "md_escape": "markdown",
    "md_quote": "markdown",
    "to_markdown": "markdown",
    "to_text": "text",
    "to_trace": "text",
}

__all__ = [
    "Selection",
    "TokenRow",
    "md_escape",
    "md_quote",
    "select",
    "status",
    "title",
    "to_html",
    "to_markdown",
    "to_text",
    "to_trace",
    "token_table",
    "visible",
]


def __getattr__(name: str) -> Any:
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module 'rolecall.export' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"rolecall.export.{module}"), name)
    globals()[name] = value
    return value
