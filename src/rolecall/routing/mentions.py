"""The ``@mention`` grammar and the text rewrites of chat replies (chat.md).

Pure functions over strings: no I/O, no state. All patterns are compiled once here.

Grammar
-------
A mention is ``@name``. The name starts with a letter or digit, continues with letters,
digits, ``_`` or ``-``, and ends with a letter or digit; a ``_``/``-`` run at its end is
not part of it (``@alice-`` and ``@alice_`` name ``alice``). Names are returned
lowercased (``@ALICE`` is ``alice``).

``@`` preceded by a letter, digit, ``.``, ``_``, ``-`` or another ``@`` starts no mention,
so ``bob@alice.com`` and ``@@alice`` mention nobody. Anything else may precede it:
start of text, whitespace, ``*``, ``>``, ``(``, ``[``, a backtick, ``/``, ... Trailing
punctuation ends the name (``@alice,`` ``@alice:`` ``(@alice)`` ``@alice's``).

Decisions where chat.md is silent:

* "Letter" and "digit" are Unicode letters and digits (Python's ``\\w`` minus ``_``).
  So ``é@alice`` is not a mention (a letter precedes ``@``), ``—@alice`` is one, and
  ``@aliceé`` names ``aliceé`` (an unknown name), never ``alice``. A fullwidth ``＠``
  is not ``@``. A combining mark is not a letter: it ends the name.
* The rule is applied literally, with no Markdown parsing: ``_@alice_`` is *not* a
  mention (``_`` precedes ``@``); ``**@alice**``, ``> @alice``, ``~~@alice~~`` and
  ``\\`@alice\\``` (inline code) *are* mentions.
* Names may start with a digit (``@3po`` names ``3po``). Role ids start with a letter,
  so such a name is always unknown.
* Lowercasing is ``str.lower``.

Pass
----
``<world>pass</world>`` in any case, anywhere, any number of times, with whitespace
tolerated inside the tags (``<world> pass </world>``, ``< WORLD >PASS</ world >``).
"""

from __future__ import annotations

import itertools
import re

__all__ = [
    "RESERVED",
    "auto_mention",
    "extract_pass",
    "find_mentions",
    "first_mention",
    "strip_self_mentions",
]

#: Mention names that are not role ids: ``@human`` (the floor) and ``@all`` (everyone).
RESERVED: frozenset[str] = frozenset({"human", "all"})

# ``@`` comes first so the regex engine can jump between ``@`` characters; the lookbehind
# then checks the two characters ending at the ``@``: the one before it must not be a
# letter, digit, ``.``, ``_``, ``-`` or ``@``. The name is alnum runs joined by ``_``/``-``
# runs; possessive quantifiers keep a long ``_``/``-`` tail from backtracking.
_MENTION = re.compile(r"@(?<![\w.@-]@)([^\W_]++(?:[_-]++[^\W_]++)*+)")

# A mention at a known start of text (nothing before it counts): for stripping a reply.
_MENTION_AT_START = re.compile(r"@([^\W_]++(?:[_-]++[^\W_]++)*+)")

# What follows a self-mention that is stripped with it: a ``_``/``-`` tail, attached
# punctuation, whitespace, and a dash standing on its own (``@alice - hi``).
_SELF_MENTION_TAIL = re.compile(r"[_\-,:;.!?]*\s*(?:[-–—](?:\s+|\Z))?")

_PASS_TAG = re.compile(r"<\s*world\s*>\s*pass\s*<\s*/\s*world\s*>", re.IGNORECASE)

_HORIZONTAL_SPACE = " \t"


def find_mentions(text: str) -> list[str]:
    """Return every valid mention name in ``text``, in order, lowercased (duplicates kept)."""
    return [match.group(1).lower() for match in _MENTION.finditer(text)]


def first_mention(text: str) -> str | None:
    """Return the first valid mention name in ``text``, lowercased, or ``None``.

    Scanning stops at the first valid mention, so this is cheap on long messages.
    """
    match = _MENTION.search(text)
    return match.group(1).lower() if match else None


def strip_self_mentions(text: str, agent_id: str) -> str:
    """Remove ``agent_id``'s own mentions from the start of ``text`` (case-insensitive).

    Each removed mention takes with it a ``_``/``-`` tail, directly attached punctuation
    (``, : ; . ! ?``), the whitespace after it and a free-standing dash, so
    ``"@alice, @ALICE: hi"`` from alice becomes ``"hi"``. Leading whitespace goes with
    the first removed mention. Stripping stops at the first thing that is not a mention
    of ``agent_id`` (another name, Markdown such as ``**@alice**``, plain text). Each
    step looks at the text as it would be published, so the result never starts with a
    mention of ``agent_id`` (``"@alice.@alice x"`` becomes ``"x"``). Text that does not
    start with a self-mention is returned unchanged.
    """
    own = agent_id.lower()
    pos = len(text) - len(text.lstrip())
    stripped_to = 0
    while (end := _self_mention_end(text, pos, own)) is not None:
        pos = stripped_to = _end_of_tail(text, end)
    return text[stripped_to:] if stripped_to else text


def _self_mention_end(text: str, pos: int, own: str) -> int | None:
    """Where a mention of ``own`` (lowercased) starting exactly at ``pos`` ends, if any."""
    match = _MENTION_AT_START.match(text, pos)
    if match is None or match.group(1).lower() != own:
        return None
    return match.end()


def _end_of_tail(text: str, pos: int) -> int:
    """Where the separator after a stripped self-mention ending at ``pos`` ends."""
    tail = _SELF_MENTION_TAIL.match(text, pos)
    return tail.end() if tail is not None else pos


def auto_mention(reply: str, answering: str | None, replier: str) -> str:
    """Prefix ``@<answering> `` to an agent's reply to another agent that mentions nobody.

    ``answering`` is the sender of the message being answered. The reply is returned
    unchanged when:

    * ``answering`` is ``None``, ``"human"``, ``"system"`` or ``replier`` itself
      (replies to the human get no auto-mention);
    * the reply is empty or only whitespace (the caller publishes no such reply);
    * the reply's first mention names anyone but ``replier``: ``@human``, ``@all``,
      another agent (a redirect), or a name no agent has (nobody answers it, with the
      unknown-name warning: chat.md's "first mention names no agent").

    Otherwise (no mention, or a first mention of the replier itself) the result is
    ``f"@{answering} {reply.lstrip()}"``. Apply it to the text left after
    :func:`strip_self_mentions` and :func:`extract_pass`, and never to a pass.
    """
    if answering is None or answering in ("human", "system") or answering == replier:
        return reply
    if not reply.strip():
        return reply
    first = first_mention(reply)
    if first is not None and first != replier.lower():
        return reply
    return f"@{answering} {reply.lstrip()}"


def extract_pass(text: str) -> tuple[str, bool]:
    """Remove every ``<world>pass</world>`` tag; return ``(remaining text, passed)``.

    Without a tag the text comes back unchanged with ``False``. With one, the tags are
    cut out together with the spaces and tabs beside them (one space is kept where a
    tag sat between two words), and the rest is stripped: ``"<world>pass</world>"``
    gives ``("", True)`` and ``"ok <WORLD>Pass</WORLD> thanks"`` gives
    ``("ok thanks", True)``.
    """
    parts = _PASS_TAG.split(text)
    if len(parts) == 1:
        return text, False
    last = len(parts) - 1
    pieces = [_trim_beside_tags(part, index > 0, index < last) for index, part in enumerate(parts)]
    kept = [piece for piece in pieces if piece]
    if not kept:
        return "", True
    out = [kept[0]]
    for left, right in itertools.pairwise(kept):
        if not left[-1].isspace() and not right[0].isspace():
            out.append(" ")
        out.append(right)
    return "".join(out).strip(), True


def _trim_beside_tags(part: str, tag_before: bool, tag_after: bool) -> str:
    """Cut the spaces and tabs of ``part`` that touch a removed tag."""
    if tag_before:
        part = part.lstrip(_HORIZONTAL_SPACE)
    if tag_after:
        part = part.rstrip(_HORIZONTAL_SPACE)
    return part
