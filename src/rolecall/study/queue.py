"""Role queues per unit (pure; no I/O).

Every unit is discussed by the five study roles, one turn each, in the order of its
queue. A role's score for a unit is::

    score = 0.4 * structural + 0.3 * lexical + 0.3 * topic      (each part in 0..1)

* structural: how well the role fits the unit's kind (:data:`STRUCTURAL`), e.g. the
  summarizer leads a conclusion and the challenger a methodology section.
* lexical: the role's cue words (:data:`ROLE_CUES`) in the unit's heading and text,
  whole words or phrases, longest first, no overlaps: ``min(hits, 3) / 3``.
* topic: the overlap between the unit's content words and the role's own profile (its
  description and system prompt as configured in the world): ``min(shared, 4) / 4``,
  where content words are lowercased words of 5 letters or more outside a short stop
  list. A persona you rewrite therefore steers the queue towards the units it is about.

Scores are rounded to 6 decimals; the queue is by descending score, ties by role id, then
scaffolded: in every unit the explainer speaks before the challenger (when the challenger
scores higher, the explainer moves to just before it). The document's first unit always
opens with the explainer. A study run is complete when
every (unit, role) slot has spoken.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from rolecall.study.cohesion import content_words
from rolecall.study.segment import Kind, Unit, segment_document, words_of

__all__ = [
    "ROLES",
    "ROLE_CUES",
    "STRUCTURAL",
    "RoleScore",
    "StudyPlan",
    "build_plan",
    "content_words",
    "is_complete",
    "lexical_score",
    "score_roles",
    "topic_score",
    "unit_queue",
]

ROLES: Final[tuple[str, ...]] = (
    "explainer",
    "challenger",
    "summarizer",
    "example_generator",
    "misconception_spotter",
)
OPENER: Final = "explainer"
CHALLENGER: Final = "challenger"  # never before the explainer in a unit (scaffolding)
W_STRUCTURAL: Final = 0.4
W_LEXICAL: Final = 0.3
W_TOPIC: Final = 0.3
_LEXICAL_CAP: Final = 3
_TOPIC_CAP: Final = 4

STRUCTURAL: Final[dict[Kind, dict[str, float]]] = {
    "introduction": {
        "explainer": 1.0,
        "summarizer": 0.6,
        "example_generator": 0.5,
        "misconception_spotter": 0.4,
        "challenger": 0.3,
    },
    "body": {
        "explainer": 0.9,
        "example_generator": 0.8,
        "challenger": 0.7,
        "misconception_spotter": 0.6,
        "summarizer": 0.4,
    },
    "methodology": {
        "challenger": 1.0,
        "explainer": 0.8,
        "misconception_spotter": 0.6,
        "example_generator": 0.5,
        "summarizer": 0.4,
    },
    "conclusion": {
        "summarizer": 1.0,
        "challenger": 0.6,
        "misconception_spotter": 0.5,
        "explainer": 0.4,
        "example_generator": 0.3,
    },
}

ROLE_CUES: Final[dict[str, tuple[str, ...]]] = {
    "explainer": (
        "define",
        "defined",
        "definition",
        "means",
        "concept",
        "principle",
        "mechanism",
        "because",
        "theory",
        "explain",
        "explains",
        "refers to",
        "in other words",
    ),
    "challenger": (
        "however",
        "although",
        "claim",
        "claims",
        "argue",
        "argues",
        "assume",
        "assumes",
        "assumption",
        "evidence",
        "limitation",
        "limitations",
        "controversial",
        "uncertain",
        "critics",
        "whereas",
    ),
    "summarizer": (
        "summary",
        "in short",
        "overall",
        "in conclusion",
        "to conclude",
        "key",
        "main",
        "finally",
        "therefore",
        "thus",
        "takeaway",
        "recap",
    ),
    "example_generator": (
        "example",
        "examples",
        "for example",
        "for instance",
        "such as",
        "imagine",
        "suppose",
        "consider",
        "illustrate",
        "illustrates",
        "case",
        "e g",
    ),
    "misconception_spotter": (
        "misconception",
        "misconceptions",
        "myth",
        "myths",
        "mistake",
        "mistaken",
        "mistakenly",
        "wrong",
        "wrongly",
        "confuse",
        "confused",
        "misunderstand",
        "misunderstood",
        "contrary",
        "actually",
        "fallacy",
        "popular belief",
    ),
}


@dataclass(frozen=True)
class RoleScore:
    role: str
    structural: float
    lexical: float
    topic: float

    @property
    def score(self) -> float:
        total = W_STRUCTURAL * self.structural + W_LEXICAL * self.lexical + W_TOPIC * self.topic
        return round(total, 6)

    def to_dict(self) -> dict[str, float | str]:
        return {
            "role": self.role,
            "score": self.score,
            "structural": self.structural,
            "lexical": self.lexical,
            "topic": self.topic,
        }


def count_cues(words: Sequence[str], cues: Sequence[str]) -> int:
    """Occurrences of the cue words/phrases in ``words``: longest first, no overlaps."""
    used = [False] * len(words)
    hits = 0
    for cue in sorted(cues, key=lambda c: (-len(c.split()), c)):
        parts = cue.split()
        size = len(parts)
        for start in range(len(words) - size + 1):
            if list(words[start : start + size]) == parts and not any(used[start : start + size]):
                for k in range(start, start + size):
                    used[k] = True
                hits += 1
    return hits


def lexical_score(words: Sequence[str], role: str) -> float:
    hits = count_cues(words, ROLE_CUES.get(role, ()))
    return round(min(hits, _LEXICAL_CAP) / _LEXICAL_CAP, 6)


def topic_score(unit_words: frozenset[str], profile: str) -> float:
    shared = len(unit_words & content_words(profile))
    return round(min(shared, _TOPIC_CAP) / _TOPIC_CAP, 6)


def _unit_text(unit: Unit) -> str:
    return f"{unit.heading or ''}\n{unit.text}"


def score_roles(
    unit: Unit, profiles: Mapping[str, str], roles: Sequence[str] = ROLES
) -> list[RoleScore]:
    """Each role's score parts for ``unit``, in ``roles`` order."""
    text = _unit_text(unit)
    words = words_of(text)
    unit_words = content_words(text)
    return [
        RoleScore(
            role=role,
            structural=STRUCTURAL[unit.kind].get(role, 0.0),
            lexical=lexical_score(words, role),
            topic=topic_score(unit_words, profiles.get(role, "")),
        )
        for role in roles
    ]


def scaffold(order: Sequence[str]) -> list[str]:
    """Explainer before Challenger: when both are in ``order`` and the challenger comes
    first, the explainer moves to just before it (the rest keep their places)."""
    out = list(order)
    if OPENER in out and CHALLENGER in out and out.index(CHALLENGER) < out.index(OPENER):
        out.remove(OPENER)
        out.insert(out.index(CHALLENGER), OPENER)
    return out


def unit_queue(scores: Sequence[RoleScore], *, first_unit: bool = False) -> list[str]:
    """The roles by descending score, ties by role id, scaffolded (explainer before
    challenger); the first unit opens with the explainer."""
    order = scaffold([s.role for s in sorted(scores, key=lambda s: (-s.score, s.role))])
    if first_unit and OPENER in order:
        order.remove(OPENER)
        order.insert(0, OPENER)
    return order


def is_complete(spoken: Sequence[Sequence[str]], units: int, roles: Sequence[str] = ROLES) -> bool:
    """Every (unit, role) slot has spoken."""
    if len(spoken) < units:
        return False
    return all(set(roles) <= set(spoken[i]) for i in range(units))


@dataclass(frozen=True)
class StudyPlan:
    """A document's units with each unit's role scores and queue (same text, same plan)."""

    units: tuple[Unit, ...]
    scores: tuple[tuple[RoleScore, ...], ...]
    queues: tuple[tuple[str, ...], ...]
    fingerprint: str  # sha256 of the document text

    @property
    def weights(self) -> list[dict[str, float]]:
        """Per unit, each role's score (the ``weight`` of a reallocation)."""
        return [{s.role: s.score for s in unit_scores} for unit_scores in self.scores]

    @property
    def slots(self) -> int:
        return sum(len(q) for q in self.queues)


def fingerprint(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def build_plan(text: str, profiles: Mapping[str, str], roles: Sequence[str] = ROLES) -> StudyPlan:
    """Segment ``text`` and score every role for every unit."""
    units = tuple(segment_document(text))
    scores = tuple(tuple(score_roles(unit, profiles, roles)) for unit in units)
    queues = tuple(
        tuple(unit_queue(unit_scores, first_unit=unit.index == 0))
        for unit, unit_scores in zip(units, scores, strict=True)
    )
    return StudyPlan(units, scores, queues, fingerprint(text))
