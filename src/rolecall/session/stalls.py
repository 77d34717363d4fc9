"""Stalls (real-models.md): an agent's reply nearly identical to a recent message.

Pure reads of the transcript. A reply is *near* a message when the similarity of the
two is at least :data:`SIMILARITY` (0.9): difflib's ratio over their words (lower-cased,
punctuation at the ends of words dropped; a reply of fewer than :data:`MIN_WORDS`
words is never near), ``2·M / T`` where ``M`` counts the words
matched in order and ``T`` the words of both; cheap for replies of a few hundred
words, and blind to case, spacing and punctuation. The reply is compared with each of
the :data:`WINDOW` (4) messages before it. A second near reply in a row (the message
just before it was a near reply too) is a stall: the runtime ends the exchange (chat)
or the run (flows, stop reason ``stalled``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Final

from rolecall.session.state import TranscriptMessage

SIMILARITY: Final = 0.9
WINDOW: Final = 4
MIN_WORDS: Final = 8  # shorter replies ("I agree.", canned answers) may recur freely
STALLED: Final = "stalled"  # the stop reason of a flow that stalled
_PUNCT = ".,;:!?\"'()[]*_`-"


@dataclass(frozen=True, slots=True)
class Near:
    """``message`` is nearly identical to ``like`` (``score``, 0..1)."""

    message: TranscriptMessage
    like: TranscriptMessage
    score: float

    def describe(self) -> str:
        m, o = self.message, self.like
        return (
            f"{m.id} ({m.sender}) is nearly identical to {o.id} ({o.sender}): "
            f"similarity {self.score:.2f}"
        )


@dataclass(frozen=True, slots=True)
class Stall:
    """A near reply; ``before``: the near reply just before it (then it is a stall)."""

    near: Near
    before: Near | None

    @property
    def stalled(self) -> bool:
        return self.before is not None

    def detail(self) -> str:
        """The two near replies in a row, named (a stop's ``detail``)."""
        first = self.before
        assert first is not None
        return (
            f"two replies in a row nearly identical to earlier messages: "
            f"{first.describe()}; then {self.near.describe()}"
        )


def _words(text: str) -> list[str]:
    return [w for w in (w.strip(_PUNCT) for w in text.lower().split()) if w]


def similarity(a: str, b: str) -> float:
    """The word-level similarity of ``a`` and ``b`` (0 when either is shorter than
    :data:`MIN_WORDS` words)."""
    wa, wb = _words(a), _words(b)
    if len(wa) < MIN_WORDS or len(wb) < MIN_WORDS:
        return 0.0
    matcher = SequenceMatcher(None, wa, wb, autojunk=False)
    if matcher.real_quick_ratio() < SIMILARITY or matcher.quick_ratio() < SIMILARITY:
        return matcher.quick_ratio()  # an upper bound, already below the threshold
    return matcher.ratio()


def near(earlier: Sequence[TranscriptMessage], message: TranscriptMessage) -> Near | None:
    """The most similar of the last :data:`WINDOW` of ``earlier`` that ``message`` is
    near to (None when none is)."""
    best: Near | None = None
    for other in earlier[-WINDOW:]:
        score = similarity(message.content, other.content)
        if score >= SIMILARITY and (best is None or score > best.score):
            best = Near(message, other, score)
    return best


def assess(earlier: Sequence[TranscriptMessage], message: TranscriptMessage) -> Stall | None:
    """Whether agent ``message`` (about to follow ``earlier``) is a near reply, and
    whether the message before it was one too."""
    if message.kind != "agent":
        return None
    found = near(earlier, message)
    if found is None or not earlier:
        return None if found is None else Stall(found, None)
    last = earlier[-1]
    before = near(earlier[-WINDOW - 1 : -1], last) if last.kind == "agent" else None
    return Stall(found, before)
