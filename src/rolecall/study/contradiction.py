"""Contradiction detection between statements (pure; deterministic; no model, no network).

A message contradicts an earlier one when one of its sentences and one of the earlier
message's sentences are about the same thing and say opposite things of it:

* *about the same thing*: after removing negations and the words of antonym pairs, the
  two sentences share at least :data:`MIN_SHARED` key stems (words of 4 letters or more
  outside the stop lists and the participants' names, reduced to their Snowball English
  stems), and the shared stems are at least half of all the key stems of the two;
* *opposite*: exactly one of the two sentences is negated (an odd number of negation
  words: *not*, *no*, *never*, *n't*, *cannot*, ...), or one uses a word of an antonym
  pair (:data:`ANTONYMS`, e.g. *increases* / *decreases*) and the other its opposite.

Questions (sentences ending in ``?``) state nothing and are skipped. The most recent
earlier message is checked first; the first contradicting pair found is reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from rolecall.study.cohesion import STOP, stemmer, words_of

__all__ = [
    "ANTONYMS",
    "MIN_SHARED",
    "NEGATIONS",
    "Contradiction",
    "Statement",
    "find_contradiction",
    "sentences",
]

MIN_SHARED: Final = 2

NEGATIONS: Final[frozenset[str]] = frozenset(
    {
        "not", "no", "never", "none", "neither", "nor", "cannot", "nothing", "nobody",
        "isn't", "aren't", "wasn't", "weren't", "doesn't", "don't", "didn't", "won't",
        "wouldn't", "can't", "couldn't", "shouldn't", "hasn't", "haven't", "hadn't",
    }
)  # fmt: skip

_PAIRS: Final[tuple[tuple[str, str], ...]] = (
    ("increase", "decrease"),
    ("increases", "decreases"),
    ("improve", "worsen"),
    ("improves", "worsens"),
    ("help", "hurt"),
    ("helps", "hurts"),
    ("true", "false"),
    ("always", "never"),
    ("more", "less"),
    ("better", "worse"),
    ("faster", "slower"),
    ("stronger", "weaker"),
    ("higher", "lower"),
    ("easier", "harder"),
    ("effective", "ineffective"),
    ("correct", "incorrect"),
    ("possible", "impossible"),
    ("supports", "contradicts"),
    ("strengthens", "weakens"),
    ("rises", "falls"),
    ("before", "after"),
    ("early", "late"),
    ("short", "long"),
    ("many", "few"),
)
ANTONYMS: Final[dict[str, str]] = {a: b for a, b in _PAIRS} | {b: a for a, b in _PAIRS}

_SMALL_STOP: Final = frozenset(
    {
        "this", "that", "with", "from", "they", "them", "then", "than", "have", "been",
        "were", "will", "what", "when", "your", "ours", "also", "just", "very", "much",
        "does", "into", "onto", "some", "such", "each", "only", "over", "here", "more",
    }
)  # fmt: skip
_SENTENCE = re.compile(r"[^.!?]+[.!?]*")


@dataclass(frozen=True)
class Statement:
    """A message as the check sees it."""

    id: str
    speaker: str
    text: str


@dataclass(frozen=True)
class Contradiction:
    """``later`` (a sentence of message ``message_id``) says the opposite of ``earlier``."""

    message_id: str
    speaker: str
    sentence: str
    earlier_id: str
    earlier_speaker: str
    earlier_sentence: str
    shared: tuple[str, ...]  # the key stems both sentences are about
    kind: str  # "negation" or "antonym"
    detail: str  # e.g. "not" or "increases/decreases"

    def to_dict(self) -> dict[str, object]:
        return {
            "message_id": self.message_id,
            "speaker": self.speaker,
            "sentence": self.sentence,
            "earlier_id": self.earlier_id,
            "earlier_speaker": self.earlier_speaker,
            "earlier_sentence": self.earlier_sentence,
            "shared": list(self.shared),
            "kind": self.kind,
            "detail": self.detail,
        }


@dataclass(frozen=True)
class _Sentence:
    text: str
    keys: frozenset[str]
    negations: tuple[str, ...]
    opposites: frozenset[str]  # antonym-pair words it uses


def sentences(text: str) -> list[str]:
    """The text's sentences, stripped, questions left out."""
    found = (s.strip() for s in _SENTENCE.findall(text.replace("\n", " ")))
    return [s for s in found if s and not s.endswith("?")]


def _analyse(sentence: str, ignore: frozenset[str]) -> _Sentence:
    words = words_of(sentence.replace("’", "'"))
    negations = tuple(w for w in words if w in NEGATIONS or w.endswith("n't"))
    opposites = frozenset(w for w in words if w in ANTONYMS)
    plain = [
        w
        for w in words
        if len(w) >= 4
        and w.isalpha()
        and w not in STOP
        and w not in _SMALL_STOP
        and w not in NEGATIONS
        and w not in ANTONYMS
        and w not in ignore
    ]
    return _Sentence(sentence, frozenset(stemmer().stemWords(plain)), negations, opposites)


def _opposed(a: _Sentence, b: _Sentence) -> tuple[str, str] | None:
    if (len(a.negations) % 2) != (len(b.negations) % 2):
        return "negation", (a.negations or b.negations)[0]
    for word in sorted(a.opposites):
        other = ANTONYMS[word]
        if other in b.opposites and word not in b.opposites:
            return "antonym", f"{word}/{other}"
    return None


def _same_subject(a: _Sentence, b: _Sentence) -> tuple[str, ...] | None:
    shared = a.keys & b.keys
    if len(shared) >= MIN_SHARED and 2 * len(shared) >= len(a.keys | b.keys):
        return tuple(sorted(shared))
    return None


def find_contradiction(
    message: Statement, earlier: Sequence[Statement], names: Sequence[str] = ()
) -> Contradiction | None:
    """The first contradiction between ``message`` and an earlier statement (latest first).

    ``names`` are the participants' names and ids: their words are not what a sentence is
    about (``Explainer, I'm not convinced...`` is not about explaining).
    """
    ignore = frozenset(w for name in names for w in words_of(name.replace("_", " ")))
    mine = [_analyse(s, ignore) for s in sentences(message.text)]
    if not mine:
        return None
    for before in reversed(earlier):
        if before.id == message.id:
            continue
        for theirs in (_analyse(s, ignore) for s in sentences(before.text)):
            for sentence in mine:
                shared = _same_subject(sentence, theirs)
                if shared is None:
                    continue
                opposed = _opposed(sentence, theirs)
                if opposed is not None:
                    return Contradiction(
                        message_id=message.id,
                        speaker=message.speaker,
                        sentence=sentence.text,
                        earlier_id=before.id,
                        earlier_speaker=before.speaker,
                        earlier_sentence=theirs.text,
                        shared=shared,
                        kind=opposed[0],
                        detail=opposed[1],
                    )
    return None
