"""Reply hygiene (real-models.md): a pure filter over a reply's streamed text.

A real model's reply may begin with its speaker's tag (``[pro] ...``, ``Pro:``), go on
as another participant (``\\nSam: ...``), or repeat itself until its cap. :func:`scan`
reads the text received so far and says how much of it may be shown, whether a tag
was removed from its start, and where (if anywhere) the reply is cut; :func:`step` is
the same as a function of (participants, text so far, new chunk) to (text to emit,
text held back, cut or not). Nothing here does I/O; ``generation.py`` applies it to
every model's stream, and the tests drive it without a model.

Rules (docs/real-models.md, Reply hygiene):

- **tag**: the reply's start loses its speaker's tag in any form (``[id]``, ``[Name]``,
  ``id:``, ``Name:``, ``**Name:**``, ``**Name**:``, ``Name (id):``, ``@id:``; case and
  whitespace ignored) and a bracketed tag of any participant (``[planner]``), with the
  whitespace after it.
- **other_speaker**: the reply is cut at the line break before a line (after the
  first) that begins with another participant's tag in any of those forms, or the
  human's (``human:``, ``[human]``, ``User:``).
- **repetition**: the reply is cut where a sentence or line (of at least
  :data:`MIN_SENTENCE_WORDS` words) begins for the third time, or where a run of
  words repeated back to back, covering at least :data:`RUN_WORDS` of its last
  :data:`WINDOW_WORDS` words, begins its third occurrence: the first two are kept.

The start of each line is held back until it cannot be a tag (the text grows past
every tag it could begin, or the line ends), so a tag or another speaker's line is
never shown; repeated text is only known once it has been shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal

TrimKind = Literal["tag", "other_speaker", "repetition"]
CUT_REASONS: Final = ("other_speaker", "repetition")  # a cut ends the reply (finish_reason)
HUMAN_LABELS: Final = ("human", "user")
MIN_SENTENCE_WORDS: Final = 3  # shorter sentences ("Yes.", "---") may recur freely
WINDOW_WORDS: Final = 200
RUN_WORDS: Final = WINDOW_WORDS // 2  # "covering half of its last 200 words"


@dataclass(frozen=True, slots=True)
class Participants:
    """The tags one speaker's reply is checked against, lower-cased without whitespace.

    ``lead``: the tags removed from the reply's start (its own in every form, anyone's
    bracketed); ``others``: the tags that start another participant's turn.
    """

    lead: tuple[str, ...]
    others: tuple[str, ...]
    longest: int  # the longest tag, in normalised characters


@dataclass(frozen=True, slots=True)
class Cut:
    """The reply ends at ``at`` (an index into the text received): ``kind`` says why."""

    kind: Literal["other_speaker", "repetition"]
    at: int


@dataclass(frozen=True, slots=True)
class Verdict:
    """What :func:`scan` decided: ``text[:lead]`` is a removed tag; ``text[lead:safe]``
    may be shown; ``cut``, when set, ends the reply at ``cut.at`` (``<= len(text)``)."""

    lead: int
    safe: int
    cut: Cut | None
    lines_done: int = 0  # the line starts before this index are decided
    settled: bool = True  # False: the start may still grow into (another) tag


@dataclass(frozen=True, slots=True)
class Trim:
    """One removal: ``removed`` is the text taken out, ``shown`` how many of its leading
    characters had already been emitted (a live display marks those)."""

    kind: TrimKind
    removed: str
    shown: int = 0


@dataclass(frozen=True, slots=True)
class Step:
    """One chunk's outcome: the text to emit now, the text held back, the cut (if the
    reply ends here), and the removals found by this chunk."""

    emit: str
    held: str
    cut: Cut | None
    trims: tuple[Trim, ...]


def _norm(label: str) -> str:
    return "".join(label.lower().split())


def _forms(label: str) -> list[str]:
    return [f"[{label}]", f"{label}:", f"**{label}:**", f"**{label}**:", f"@{label}:"]


def participants(speaker: tuple[str, str], others: tuple[tuple[str, str], ...]) -> Participants:
    """The tags for ``speaker`` (its id and name) among ``others`` (each id and name;
    the human's tags are added here)."""
    return _participants(speaker, others)


@lru_cache(maxsize=256)
def _participants(speaker: tuple[str, str], others: tuple[tuple[str, str], ...]) -> Participants:
    def labels(pair: tuple[str, str]) -> list[str]:
        return [n for n in dict.fromkeys(_norm(x) for x in pair) if n]

    def every_form(pair: tuple[str, str]) -> list[str]:
        out: list[str] = []
        names = labels(pair)
        for label in names:
            out.extend(_forms(label))
            out.extend(f"{label}({ident}):" for ident in names)  # Name (id):
        return out

    own = labels(speaker)
    lead = every_form(speaker)
    for pair in (*others, *((h, h) for h in HUMAN_LABELS)):
        lead.extend(f"[{label}]" for label in labels(pair))
    other_tags: list[str] = []
    for pair in (*others, *((h, h) for h in HUMAN_LABELS)):
        if set(labels(pair)) & set(own):
            continue  # a name shared with the speaker is its own
        other_tags.extend(every_form(pair))
    lead_t = tuple(sorted(set(lead), key=len, reverse=True))
    other_t = tuple(sorted(set(other_tags), key=len, reverse=True))
    longest = max((len(t) for t in (*lead_t, *other_t)), default=0)
    return Participants(lead_t, other_t, longest)


_HOLD: Final = -1
_NONSPACE = re.compile(r"\S")


def _tag_at(
    text: str, pos: int, tags: tuple[str, ...], longest: int, final: bool, *, lead: bool
) -> int | None:
    """Where a tag starting at ``pos`` (after any whitespace) ends; at the reply's start
    (``lead``) with the whitespace after it. ``_HOLD`` while the text could still grow
    into one (or, at the start, while only whitespace follows it); None when it cannot."""
    norm: list[str] = []
    where: list[int] = []
    i, n = pos, len(text)
    while i < n and len(norm) < longest:
        c = text[i]
        if c.isspace():
            if c == "\n" and norm:
                break  # a tag is on one line
        else:
            for lc in c.lower():
                norm.append(lc)
                where.append(i)
        i += 1
    head = "".join(norm)
    for tag in tags:
        if head.startswith(tag):
            end = where[len(tag) - 1] + 1
            if not lead:
                return end
            while end < n and text[end].isspace():
                end += 1
            return _HOLD if end == n and not final else end
    if not final and i == n and any(t.startswith(head) for t in tags):
        return _HOLD
    return None


_SEGMENT = re.compile(r"[^.!?\n]+(?:[.!?]+|\n|$)")
_ENDS = re.compile(r"[.!?\n]")
_WORD = re.compile(r"\S+")
_STRIP = ".,;:!?\"'()[]*_`"
_RUN_CHARS: Final = WINDOW_WORDS * 40  # the tail searched for the last 200 words


@dataclass(slots=True)
class Sentences:
    """What :func:`_sentence_cut` counted of a growing reply: the complete sentences of
    ``text[start:pos]`` and how often each came. A stream's filter keeps one, so each
    sentence is read once however many chunks follow it (else a long reply would be read
    again at every chunk); a verdict with or without it is the same."""

    start: int = -1
    pos: int = 0
    seen: dict[str, int] = field(default_factory=dict)
    looked: int = 0  # the text before this holds no sentence end after ``pos``


def _sentence_cut(
    text: str, start: int, end: int, final: bool, memo: Sentences | None = None
) -> int | None:
    """Where a sentence or line (of enough words) begins for the third time."""
    if memo is None or memo.start != start or memo.pos > end or memo.looked > end:
        memo = Sentences(start, start) if memo is None else memo
        memo.start, memo.pos, memo.seen, memo.looked = start, start, {}, start
    if not final and _ENDS.search(text, max(memo.looked, memo.pos), end) is None:
        memo.looked = end  # no sentence ended since: nothing new to count
        return None
    memo.looked = end
    seen = memo.seen
    for m in _SEGMENT.finditer(text, memo.pos, end):
        body = m.group()
        complete = final or m.end() < end or body[-1] in ".!?\n"
        if not complete:
            break  # the last one, still growing: read again with the next chunk
        memo.pos = m.end()
        key = " ".join(body.lower().strip(_STRIP + " \t\n").split())
        if key.count(" ") + 1 < MIN_SENTENCE_WORDS:
            continue
        count = seen.get(key, 0) + 1
        seen[key] = count
        if count == 3:
            return m.start() + (len(body) - len(body.lstrip()))
    return None


@dataclass(slots=True)
class Words:
    """What :func:`_run_cut` read of a growing reply: the complete words of
    ``text[start:pos]``, each with its place, lower-cased and stripped (the last
    :data:`WINDOW_WORDS` of them). A stream's filter keeps one, so each word is read
    once; a verdict with or without it is the same."""

    start: int = -1
    pos: int = 0
    read: list[tuple[int, str]] = field(default_factory=list)


def _words_of(text: str, start: int, end: int, final: bool, memo: Words | None) -> Words:
    """``memo`` brought up to ``text[:end]`` (a new one when it read another start or
    past ``end``)."""
    if memo is None or memo.start != start or memo.pos > end:
        memo = Words() if memo is None else memo
        memo.start, memo.pos, memo.read = start, start, []
    for m in _WORD.finditer(text, memo.pos, end):
        if not final and m.end() == end:
            break  # the last word may still be growing: read again with the next chunk
        memo.read.append((m.start(), m.group().lower().strip(_STRIP)))
        memo.pos = m.end()
    if len(memo.read) > 2 * WINDOW_WORDS:
        del memo.read[:-WINDOW_WORDS]
    return memo


def _run_cut(text: str, start: int, end: int, final: bool, memo: Words | None = None) -> int | None:
    """Where a run of words repeated back to back (covering half of the last 200 words)
    begins its third occurrence."""
    low = max(start, end - _RUN_CHARS)
    read = _words_of(text, start, end, final, memo).read[-WINDOW_WORDS:]
    if read and read[0][0] < low:  # words more than _RUN_CHARS back are out of the window
        read = [w for w in read if w[0] >= low]
    n = len(read)
    if n <= RUN_WORDS:
        return None
    words = [w for _, w in read]
    for p in range(1, n // 2 + 1):
        run = 0
        i = n - 1
        while i - p >= 0 and words[i] == words[i - p]:
            run += 1
            i -= 1
        if run > p and run + p >= RUN_WORDS:
            first = n - run - p
            return read[first + 2 * p][0]
    return None


def _back_over_space(text: str, at: int, floor: int) -> int:
    while at > floor and text[at - 1].isspace():
        at -= 1
    return at


def scan(
    p: Participants,
    text: str,
    *,
    final: bool = False,
    lines_from: int = 0,
    sentences: Sentences | None = None,
    words: Words | None = None,
    lead_from: int | None = None,
) -> Verdict:
    """The verdict on ``text``, the reply received so far (``final``: all of it).

    ``lines_from``: the ``lines_done`` of an earlier verdict on the start of ``text``
    (the line starts before it were decided, and stay so); ``sentences`` and ``words``:
    what earlier scans of the start of ``text`` read (updated here); ``lead_from``: the
    ``lead`` of an earlier *settled* verdict on the start of ``text`` (no tag could begin
    where its tags ended, whatever follows: :func:`_tag_at` said None, which more text
    never turns into a tag). Shortcuts, same result.
    """
    lead = 0 if lead_from is None else lead_from
    while lead_from is None:
        end = _tag_at(text, lead, p.lead, p.longest, final, lead=True)
        if end is None:
            break
        if end == _HOLD:
            return Verdict(lead, lead, None, lead, settled=False)
        lead = end
    first = _NONSPACE.search(text, lead)
    limit = safe = len(text)
    cut: Cut | None = None
    line = text.find("\n", max(first.start() if first else len(text), lines_from))
    done = line if line != -1 else len(text)
    while line != -1:
        end = _tag_at(text, line + 1, p.others, p.longest, final, lead=False)
        if end == _HOLD:
            safe = done = line
            break
        if end is not None:
            cut = Cut("other_speaker", _back_over_space(text, line, lead))
            limit = safe = cut.at
            done = line
            break
        line = text.find("\n", line + 1)
        done = line if line != -1 else len(text)
    if limit > lead:
        ended = final or cut is not None
        found = [
            at
            for at in (
                _sentence_cut(text, lead, limit, ended, sentences),
                _run_cut(text, lead, limit, ended, words),
            )
            if at is not None
        ]
        if found:
            at = _back_over_space(text, min(found), lead)
            cut = Cut("repetition", at)
            safe = min(safe, at)
    return Verdict(lead, safe, cut, done)


def step(p: Participants, so_far: str, chunk: str, *, final: bool = False) -> Step:
    """The pure step: what ``chunk`` (after ``so_far``) lets through, holds back, cuts.

    ``final``: the stream ended after ``chunk`` (every held text is decided). Once a cut
    is in ``so_far`` the reply has ended; ``chunk`` is then all removed (and ignored).
    """
    before = scan(p, so_far)
    shown = before.safe if before.cut is None else max(before.lead, min(before.safe, before.cut.at))
    return _advance(p, so_far + chunk, before, shown, final)[0]


def _advance(
    p: Participants,
    text: str,
    before: Verdict,
    shown: int,
    final: bool,
    sentences: Sentences | None = None,
    words: Words | None = None,
) -> tuple[Step, Verdict, int]:
    """The step from ``before`` (emitted up to ``shown``) to ``text``: the step, the new
    verdict and the new index emitted up to."""
    if before.cut is not None:  # ended already
        return Step("", "", before.cut, ()), before, shown
    after = scan(
        p,
        text,
        final=final,
        lines_from=before.lines_done,
        sentences=sentences,
        words=words,
        lead_from=before.lead if before.settled else None,
    )
    start = max(shown, after.lead)
    upto = after.safe if after.cut is None else min(after.safe, after.cut.at)
    emit = text[start:upto] if upto > start else ""
    now = max(start, upto)
    held = "" if after.cut is not None else text[now:]
    found: list[Trim] = []
    if after.lead and after.settled and not before.settled:
        found.append(Trim("tag", text[: after.lead]))  # the start's tags, once known
    if after.cut is not None:
        at = after.cut.at
        found.append(Trim(after.cut.kind, text[at:], max(0, shown - at)))
    return Step(emit, held, after.cut, tuple(found)), after, now


class ReplyFilter:
    """:func:`step` over a stream, keeping the text so far, the last verdict and the
    index emitted up to (so each chunk is scanned once). ``message``: the reply as it
    is stored; ``removed``: every removal so far."""

    def __init__(self, p: Participants) -> None:
        self.p = p
        self.text = ""
        self.verdict = Verdict(0, 0, None, 0, settled=False)
        self.shown = 0
        self.removed: list[Trim] = []
        self.sentences = Sentences()
        self.words = Words()

    @property
    def cut(self) -> Cut | None:
        return self.verdict.cut

    @property
    def message(self) -> str:
        v = self.verdict
        end = len(self.text) if v.cut is None else v.cut.at
        return self.text[v.lead : max(v.lead, end)]

    def feed(self, chunk: str, *, final: bool = False) -> Step:
        if self.verdict.cut is not None:
            return Step("", "", self.verdict.cut, ())
        self.text += chunk
        out, self.verdict, self.shown = _advance(
            self.p, self.text, self.verdict, self.shown, final, self.sentences, self.words
        )
        self.removed.extend(out.trims)
        return out

    def close(self) -> Step:
        """The stream ended: everything held back is decided."""
        return self.feed("", final=True)
