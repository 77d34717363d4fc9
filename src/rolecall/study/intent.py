"""Classifying a learner's interruption (pure; no I/O).

A human message during a study run is one of ``clarification``, ``objection``,
``depth_request``, ``example_request``, ``summary_request`` or ``other``.

Cues are whole words or phrases (:data:`CUES`), matched case-insensitively on the
message's words, longest cue first and without overlaps (``for instance`` counts once, not
also as ``instance``); every occurrence counts. The class with the most cue hits wins:
confidence 0.8 for one hit, 1.0 for two or more. When two or more classes share the top
count it is a tie: the first of them in :data:`INTENTS` order wins and the confidence
drops by 0.15 (0.65 or 0.85). No cue at all: ``other`` with confidence 0.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, Literal

from rolecall.study.segment import words_of

__all__ = ["CUES", "INTENTS", "Classification", "Intent", "classify"]

Intent = Literal[
    "clarification", "objection", "depth_request", "example_request", "summary_request", "other"
]
INTENTS: Final[tuple[Intent, ...]] = (
    "clarification",
    "objection",
    "depth_request",
    "example_request",
    "summary_request",
)
ONE_CUE: Final = 0.8
TWO_CUES: Final = 1.0
TIE_PENALTY: Final = 0.15

CUES: Final[dict[Intent, tuple[str, ...]]] = {
    "clarification": (
        "what do you mean",
        "what does that mean",
        "what does",
        "what is",
        "what's",
        "clarify",
        "clarification",
        "confused",
        "confusing",
        "don't understand",
        "do not understand",
        "didn't understand",
        "unclear",
        "rephrase",
        "explain again",
        "lost me",
        "meaning",
    ),
    "objection": (
        "disagree",
        "i doubt",
        "doubt",
        "not convinced",
        "not true",
        "that's wrong",
        "wrong",
        "incorrect",
        "object",
        "objection",
        "contradicts",
        "contradiction",
        "not so sure",
        "isn't right",
        "mistaken",
    ),
    "depth_request": (
        "more detail",
        "more details",
        "in depth",
        "in more depth",
        "deeper",
        "go deeper",
        "elaborate",
        "expand on",
        "tell me more",
        "more about",
        "dig into",
        "how exactly",
        "why exactly",
        "why",
        "detail",
        "details",
    ),
    "example_request": (
        "example",
        "examples",
        "for instance",
        "e g",
        "illustrate",
        "illustration",
        "concrete",
        "show me",
        "demonstrate",
        "case study",
        "real world",
    ),
    "summary_request": (
        "summary",
        "summarize",
        "summarise",
        "sum up",
        "sum it up",
        "recap",
        "tl dr",
        "tldr",
        "in short",
        "key points",
        "main points",
        "in a nutshell",
        "overview",
    ),
}


@dataclass(frozen=True)
class Classification:
    intent: Intent
    confidence: float
    cues: dict[str, list[str]] = field(default_factory=dict)  # intent -> matched cues
    tie: list[str] = field(default_factory=list)  # the tied intents, when there was a tie

    @property
    def reasons(self) -> str:
        if self.intent == "other":
            return "no keyword cue of any class"
        hits = len(self.cues.get(self.intent, []))
        found = ", ".join(repr(c) for c in self.cues[self.intent])
        text = f"{hits} cue{'s' if hits != 1 else ''} of {self.intent} ({found})"
        text += f": confidence {ONE_CUE if hits == 1 else TWO_CUES}"
        if self.tie:
            text += f", minus {TIE_PENALTY} for a tie between {', '.join(self.tie)}"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "intent": self.intent,
            "confidence": self.confidence,
            "cues": self.cues,
            "tie": self.tie,
            "reasons": self.reasons,
        }


def _tokens(text: str) -> list[str]:
    # "e.g." -> "e g", "tl;dr" -> "tl dr": punctuation separates words
    return words_of(text.replace("’", "'"))


_ORDERED: Final[list[tuple[int, str, Intent]]] = sorted(
    ((len(cue.split()), cue, intent) for intent in INTENTS for cue in CUES[intent]),
    key=lambda item: (-item[0], INTENTS.index(item[2]), item[1]),
)


def classify(text: str) -> Classification:
    """The interruption's intent and confidence (see the module docstring)."""
    words = _tokens(text)
    used = [False] * len(words)
    found: dict[str, list[str]] = {}
    for size, cue, intent in _ORDERED:
        parts = cue.split()
        for start in range(len(words) - size + 1):
            if words[start : start + size] == parts and not any(used[start : start + size]):
                for k in range(start, start + size):
                    used[k] = True
                found.setdefault(intent, []).append(cue)
    if not found:
        return Classification("other", 0.0)
    counts = {intent: len(found.get(intent, [])) for intent in INTENTS}
    top = max(counts.values())
    tied = [intent for intent in INTENTS if counts[intent] == top]
    winner = tied[0]
    confidence = ONE_CUE if top == 1 else TWO_CUES
    if len(tied) > 1:
        confidence -= TIE_PENALTY
    cues: dict[str, list[str]] = {i: found[i] for i in INTENTS if i in found}
    return Classification(winner, round(confidence, 2), cues, list(tied) if len(tied) > 1 else [])
