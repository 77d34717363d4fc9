"""Termination rules of the debate and consensus presets (modes.md), as pure functions.

No I/O, no clock, no session: texts in, a :class:`Decision` (or a verdict) out.

Debate (keyword rules), checked after each debater turn once at least 4 exist, on the
last 4 debater turns; the first rule that fires wins:

1. ``concession``: the last turn contains a concession phrase, as a whole phrase,
   case-insensitive, not negated.
2. ``stalemate_repetition``: the average Jaccard overlap of the turns' keyword sets
   (lowercased words longer than 4 characters) over all pairs of the 4 turns is strictly
   above 0.6; pairs where either set is empty are skipped. Computed with exact fractions,
   so an average of exactly 0.6 never stops.
3. ``stalemate_disengagement``: the last two turns each have fewer than 20 words.

Otherwise ``max_turns`` once the debater turn count reaches ``max_turns``.

Consensus: a message *agrees* when it contains an agreement phrase (whole, not negated)
and no objection phrase (whole, not negated); consensus holds when, over the last full
round (the last N participant turns, one by each of the N participants), every message
agrees.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from itertools import combinations
from typing import Any, Final

# ---------------------------------------------------------------- vocabulary
CONCESSION_PHRASES: Final[tuple[str, ...]] = (
    "you're right",
    "you are right",
    "i agree",
    "fair point",
    "i concede",
    "you've convinced me",
    "you have convinced me",
    "i accept your argument",
    "you make a valid point",
)
"""The spec's concession phrases, plus the uncontracted spellings of two of them."""

AGREEMENT_PHRASES: Final[tuple[str, ...]] = (
    "i agree",
    "we agree",
    "i fully agree",
    "i completely agree",
    "i also agree",
    "i now agree",
    "i can agree",
    "i support",
    "i fully support",
    "i can support",
    "i'm on board",
    "i am on board",
    "count me in",
    "i endorse",
    "works for me",
    "i can live with",
    "no objection",
    "no objections",
    "no further objections",
)
"""Explicit agreement in a consensus round; ``Agreed`` also counts as a sentence's first word."""

OBJECTION_PHRASES: Final[tuple[str, ...]] = (
    "i disagree",
    "i object",
    "i still object",
    "i oppose",
    "i can't agree",
    "i cannot agree",
    "i don't agree",
    "i do not agree",
    "i can't support",
    "i cannot support",
    "i'm not convinced",
    "i am not convinced",
    "i'm not persuaded",
    "i am not persuaded",
    "i have an objection",
    "my objection",
    "one objection",
    "i have concerns",
    "i still have concerns",
    "my concern is",
    "my remaining concern",
    "i'm concerned",
    "i am concerned",
    "i'm worried",
    "i am worried",
    "my answer is no",
)
"""An open objection in a consensus round (it outweighs any agreement phrase)."""

NEGATORS: Final[frozenset[str]] = frozenset(
    ("not", "no", "never", "hardly", "barely", "nor", "neither", "cannot", "without")
)
"""Words that negate a phrase when one of them (or any word ending in ``n't``) stands
within the :data:`NEGATION_WINDOW` words before it, in the same clause."""

NEGATION_WINDOW: Final = 5
_NEGATION_CHARS: Final = 256  # the text read first before a phrase (widened when needed)
REPETITION_THRESHOLD: Final = Fraction(3, 5)
DISENGAGED_WORDS: Final = 20  # a turn of fewer words than this is disengaged
DEBATE_WINDOW: Final = 4  # debater turns the dynamic rules look at
JUDGE_AGREEMENT: Final = 0.8  # a judge's agreement at or above this is a concession

CONCESSION: Final = "concession"
REPETITION: Final = "stalemate_repetition"
DISENGAGEMENT: Final = "stalemate_disengagement"
MAX_TURNS: Final = "max_turns"
CONSENSUS: Final = "consensus"

_APOSTROPHES: Final = str.maketrans({"\u2019": "'", "\u2018": "'", "`": "'", "\u02bc": "'"})
_CLAUSE_BREAK: Final = re.compile(r"[.,;:!?()\[\]\"\u2014\u2013]|\s-\s|\bbut\b")
_WORD: Final = re.compile(r"[\w']+")


@dataclass(frozen=True)
class Decision:
    """Why a preset's dialogue stops: a reason (the stop reason) and a readable detail."""

    reason: str
    detail: str
    data: dict[str, Any] = field(default_factory=dict)


# ------------------------------------------------------------------- phrases
def normalize(text: str) -> str:
    """Lowercased, with typographic apostrophes made plain and whitespace collapsed."""
    return " ".join(text.translate(_APOSTROPHES).lower().split())


@cache
def _phrase_pattern(phrase: str) -> re.Pattern[str]:
    words = [re.escape(w) for w in phrase.split()]
    return re.compile(r"(?<![\w'])" + r"\s+".join(words) + r"(?![\w'])")


def _negated(text: str, start: int) -> bool:
    """A negator within the window of words before ``start``, in the same clause.

    ``text`` is normalized (single spaces). Only the text just before ``start`` is read,
    widened until it holds the clause's start or more words than the window: reading
    all of it for every phrase found made a long reply quadratic (a reply of 100 KB
    repeating a negated phrase held the event loop for half a minute).
    """
    reach = _NEGATION_CHARS
    while True:
        lo = 0 if start <= reach else text.rfind(" ", 0, start - reach) + 1  # a word's start
        before = text[lo:start]
        breaks = list(_CLAUSE_BREAK.finditer(before))
        if breaks:
            before = before[breaks[-1].end() :]
        words = _WORD.findall(before)
        if lo == 0 or breaks or len(words) > NEGATION_WINDOW:
            break
        reach *= 2
    return any(w.strip("'") in NEGATORS or w.endswith("n't") for w in words[-NEGATION_WINDOW:])


def find_phrase(text: str, phrases: Iterable[str]) -> str | None:
    """The first phrase (by position in ``text``) that occurs whole and not negated."""
    low = normalize(text)
    best: tuple[int, str] | None = None
    for phrase in phrases:
        for match in _phrase_pattern(phrase).finditer(low):
            if not _negated(low, match.start()):
                if best is None or match.start() < best[0]:
                    best = (match.start(), phrase)
                break
    return best[1] if best else None


def concession(text: str) -> str | None:
    """The concession phrase the text makes ("you're right", ...), or None."""
    return find_phrase(text, CONCESSION_PHRASES)


_AGREED_OPENER: Final = re.compile(r"(?:^|[.!?]\s+)agreed(?![\w'])")


def agreement(text: str) -> str | None:
    """The agreement phrase of a consensus turn, or None."""
    found = find_phrase(text, AGREEMENT_PHRASES)
    if found is None and _AGREED_OPENER.search(normalize(text)):
        return "agreed"
    return found


def objection(text: str) -> str | None:
    """The open objection a consensus turn raises, or None."""
    return find_phrase(text, OBJECTION_PHRASES)


# ----------------------------------------------------------- debate: metrics
def keywords(text: str) -> frozenset[str]:
    """The turn's keyword set: its lowercased words longer than 4 characters."""
    words = (w.strip("'") for w in _WORD.findall(text.translate(_APOSTROPHES).lower()))
    return frozenset(w for w in words if len(w) > 4)


def jaccard(a: frozenset[str], b: frozenset[str]) -> Fraction:
    union = a | b
    return Fraction(len(a & b), len(union)) if union else Fraction(0)


def repetition(turns: Sequence[str]) -> Fraction | None:
    """Average Jaccard overlap of keyword sets over all pairs; None when no pair counts."""
    sets = [keywords(t) for t in turns]
    scores = [jaccard(a, b) for a, b in combinations(sets, 2) if a and b]
    if not scores:
        return None
    return sum(scores, Fraction(0)) / len(scores)


def word_count(text: str) -> int:
    return len(text.split())


def disengaged(turns: Sequence[str]) -> bool:
    """The last two turns each have fewer than 20 words."""
    last = turns[-2:]
    return len(last) == 2 and all(word_count(t) < DISENGAGED_WORDS for t in last)


# ------------------------------------------------------- debate: the decision
def debate_decision(
    turns: Sequence[str], *, max_turns: int, dynamic: bool = True
) -> tuple[Decision | None, dict[str, Any]]:
    """Whether the debate stops after ``turns`` (every debater turn so far, in order).

    Returns the decision (None: the debate continues) and what each rule measured.
    """
    n = len(turns)
    checks: dict[str, Any] = {"turns": n, "max_turns": max_turns, "dynamic": dynamic}
    decision: Decision | None = None
    if dynamic and n >= DEBATE_WINDOW:
        window = turns[-DEBATE_WINDOW:]
        phrase = concession(window[-1])
        score = repetition(window)
        counts = [word_count(t) for t in window[-2:]]
        checks.update(
            concession=phrase,
            repetition=None if score is None else round(float(score), 4),
            last_word_counts=counts,
        )
        if phrase is not None:
            decision = Decision(
                CONCESSION, f"turn {n} concedes ({phrase!r})", {"phrase": phrase, "turn": n}
            )
        elif score is not None and score > REPETITION_THRESHOLD:
            decision = Decision(
                REPETITION,
                f"average keyword overlap of the last {DEBATE_WINDOW} turns is "
                f"{float(score):.3f} (above 0.6)",
                {"repetition": round(float(score), 4)},
            )
        elif disengaged(window):
            decision = Decision(
                DISENGAGEMENT,
                f"the last two turns have {counts[0]} and {counts[1]} words "
                f"(each under {DISENGAGED_WORDS})",
                {"word_counts": counts},
            )
    elif dynamic:
        checks["pending"] = f"dynamic rules start at {DEBATE_WINDOW} debater turns"
    if decision is None and n >= max_turns:
        decision = Decision(MAX_TURNS, f"{n} of {max_turns} debater turns", {"turns": n})
    return decision, checks


@dataclass(frozen=True)
class DebateVerdict:
    """What a debate judge said about one debater turn (its JSON, reduced to numbers)."""

    agreement: float
    new_arguments: int
    concessions: int


def judged_debate_decision(
    verdicts: Sequence[DebateVerdict | None], *, max_turns: int, dynamic: bool = True
) -> tuple[Decision | None, dict[str, Any]]:
    """Termination that follows a judge instead of the keyword rules.

    ``verdicts`` has one entry per debater turn (None where the judge's answer was
    ignored). From 4 debater turns on, looking at the latest verdicts:
    ``concession`` when the latest agreement is at least 0.8; ``stalemate_repetition``
    when the last two turns were both judged and neither brought a new argument.
    Otherwise ``max_turns`` at the cap. With ``dynamic`` false only ``max_turns`` stops
    the debate: the verdicts are still measured (``agreement`` in the checks), never acted on.
    """
    n = len(verdicts)
    latest = verdicts[-1] if verdicts else None
    checks: dict[str, Any] = {
        "turns": n,
        "max_turns": max_turns,
        "dynamic": dynamic,
        "judged": True,
    }
    decision: Decision | None = None
    if latest is not None and (n >= DEBATE_WINDOW or not dynamic):
        checks["agreement"] = latest.agreement
    if dynamic and n >= DEBATE_WINDOW:
        last_two = verdicts[-2:]
        if latest is not None and latest.agreement >= JUDGE_AGREEMENT:
            decision = Decision(
                CONCESSION,
                f"the judge puts agreement at {latest.agreement:g} (at least {JUDGE_AGREEMENT:g})",
                {"agreement": latest.agreement, "turn": n},
            )
        elif all(v is not None and v.new_arguments == 0 for v in last_two):
            decision = Decision(
                REPETITION,
                "the judge found no new argument in either of the last two turns",
                {"turn": n},
            )
    elif dynamic:
        checks["pending"] = f"judged rules start at {DEBATE_WINDOW} debater turns"
    if decision is None and n >= max_turns:
        decision = Decision(MAX_TURNS, f"{n} of {max_turns} debater turns", {"turns": n})
    return decision, checks


# ------------------------------------------------------------------ consensus
@dataclass(frozen=True)
class Stance:
    speaker: str
    agrees: bool
    agreement: str | None
    objection: str | None

    def describe(self) -> str:
        if self.objection is not None:
            return f"{self.speaker} objects ({self.objection!r})"
        if self.agreement is not None:
            return f"{self.speaker} agrees ({self.agreement!r})"
        return f"{self.speaker} states no explicit agreement"


def stance(speaker: str, text: str) -> Stance:
    agreed = agreement(text)
    objected = objection(text)
    return Stance(speaker, agreed is not None and objected is None, agreed, objected)


def consensus_decision(
    turns: Sequence[tuple[str, str]], participants: Sequence[str]
) -> tuple[bool, str, list[Stance]]:
    """Whether every participant agrees over the last full round.

    ``turns`` are the participant turns so far as ``(speaker, text)``; the last full round
    is the last ``len(participants)`` of them and must hold one turn by each participant.
    """
    k = len(participants)
    if len(turns) < k:
        return False, f"no full round yet ({len(turns)} of {k} turns)", []
    window = turns[-k:]
    if sorted(s for s, _ in window) != sorted(participants):
        return False, "the last turns are not one full round", []
    stances = [stance(s, t) for s, t in window]
    holds = all(s.agrees for s in stances)
    summary = "; ".join(s.describe() for s in stances)
    if holds:
        return True, f"every participant agrees over the last round: {summary}", stances
    return False, summary, stances
