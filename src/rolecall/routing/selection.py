"""Who speaks next when a rule or a model chooses (selection.md): the pure core.

A choice is one value, :class:`Selection`: the candidates, who was chosen, by which rule
(``by``) and the selector's raw answer (an input, recorded like any model reply). The
I/O (asking the selector model) lives in :mod:`rolecall.floor.selector`; everything
here is a pure function of its arguments.

The guarantee every caller leans on: :func:`fallback` and :func:`read_answer` only ever
return a member of the candidates they are given, and :func:`candidates` never lists the
excluded speaker (the one that just spoke, unless ``allow_repeat``) nor a role at its
turn limit. So whatever the selector answers (garbage, the excluded speaker, two names,
nothing at all), the floor never goes to the excluded speaker.
"""

from __future__ import annotations

import random as _random
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "By",
    "Rule",
    "Selection",
    "candidates",
    "fallback",
    "random_choice",
    "read_answer",
    "round_robin",
]

Rule = Literal["mentions", "round_robin", "random", "model"]
By = Literal["model", "mention", "round_robin", "random", "fallback"]


@dataclass(frozen=True, slots=True)
class Selection:
    """One choice of the next speaker.

    ``chosen`` is None when there is no candidate at all (every role excluded or at its
    turn limit): nobody speaks. ``answer`` is the selector's raw text (the last one asked
    when it was asked twice), None when no model was asked. ``answers`` holds every
    answer it gave, in order.
    """

    candidates: tuple[str, ...]
    chosen: str | None
    by: By
    answer: str | None = None
    answers: tuple[str, ...] = ()


def candidates(
    role_ids: Sequence[str],
    last_speaker: str | None,
    *,
    allowed: Collection[str] | None = None,
    allow_repeat: bool = False,
    at_limit: Collection[str] = (),
) -> tuple[str, ...]:
    """The roles that may be chosen, in role order.

    ``allowed`` narrows them (a step's ``candidates:``; None: every role); the speaker
    that just spoke is left out unless ``allow_repeat``; roles at their turn limit are
    always left out.
    """
    return tuple(
        rid
        for rid in role_ids
        if (allowed is None or rid in allowed)
        and (allow_repeat or rid != last_speaker)
        and rid not in at_limit
    )


def _after(role_ids: Sequence[str], options: Sequence[str], last_speaker: str | None) -> str | None:
    """The first of ``options`` in role order after ``last_speaker`` (cyclically)."""
    if not options:
        return None
    order = list(role_ids)
    start = order.index(last_speaker) + 1 if last_speaker in order else 0
    rotated = order[start:] + order[:start]
    for rid in rotated:
        if rid in options:
            return rid
    return options[0]  # a candidate outside role_ids (never given by candidates())


def fallback(
    role_ids: Sequence[str], options: Sequence[str], last_speaker: str | None
) -> str | None:
    """The next candidate in role order after the last speaker; None without candidates.

    It only ever returns a member of ``options``, so it cannot return a speaker that
    :func:`candidates` excluded.
    """
    return _after(role_ids, options, last_speaker)


def round_robin(
    role_ids: Sequence[str], options: Sequence[str], last_speaker: str | None
) -> str | None:
    """``round_robin``: the next candidate in role order after the last speaker."""
    return _after(role_ids, options, last_speaker)


def random_choice(options: Sequence[str], seed: int | None, index: int) -> str | None:
    """``random``: a candidate drawn by a generator seeded with ``seed`` and the number of
    the choice (``index``), so a resumed or replayed session draws the same ones."""
    if not options:
        return None
    return _random.Random(f"{seed}:{index}").choice(list(options))


def read_answer(answer: str, options: Sequence[str], names: Mapping[str, str]) -> str | None:
    """The candidate the selector's ``answer`` names: the first candidate id or name in
    it (case-insensitive, as a whole word; an ``@`` before it is fine); None when it
    names none. ``names`` maps role ids to their display names."""
    best: tuple[int, int, str] | None = None  # (position, -length, candidate)
    lowered = answer.lower()
    for rid in options:
        for label in {rid, rid.replace("_", " "), names.get(rid, "")}:
            label = label.strip().lower()
            if not label:
                continue
            found = re.search(rf"(?<![\w-]){re.escape(label)}(?![\w-])", lowered)
            if found is not None:
                key = (found.start(), -len(label), rid)
                if best is None or key < best:
                    best = key
    return best[2] if best is not None else None
