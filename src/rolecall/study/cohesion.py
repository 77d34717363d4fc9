"""Lexical cohesion between paragraphs, and cuts of a section where it is weakest (pure).

Cohesion of two paragraphs is the cosine of their content-word counts (lowercased words
of 5 letters or more outside a short stop list, reduced to their Snowball English stems,
so that *schedule* and *schedules* count as one word): 1.0 when they use the same words in the
same proportions, 0.0 when they share none. Values are rounded to 2 decimals, so that
differences too small to mean anything count as ties.

A section of ``n`` paragraphs becomes ``ceil(n / 5)`` units of 1 to 5 paragraphs each.
Of all ways to cut it so, :func:`cut_points` picks the one whose cuts fall where adjacent
paragraphs are least cohesive (smallest sum of cohesion across the cuts); among equal
sums, the most balanced sizes (smallest sum of squares), then earlier units larger. A
section whose paragraphs are evenly cohesive is therefore cut into balanced units
(12 paragraphs: 4 + 4 + 4), and one that changes topic is cut where it changes.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import Any, Final

__all__ = [
    "MAX_PARAGRAPHS",
    "STOP",
    "adjacent_cohesion",
    "cohesion",
    "content_words",
    "cut_points",
    "stemmer",
    "unit_cohesion",
    "words_of",
]

MAX_PARAGRAPHS: Final = 5
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# fmt: off
STOP: Final[frozenset[str]] = frozenset({
    "about", "after", "again", "against", "also", "always", "among", "another", "because",
    "before", "being", "below", "between", "could", "every", "first", "itself", "might", "never",
    "often", "other", "quite", "rather", "shall", "should", "since", "still", "their",
    "themselves", "there", "these", "those", "through", "under", "until", "where", "which",
    "while", "whose", "within", "without", "would",
})
# fmt: on


@functools.cache
def stemmer() -> Any:
    """The Snowball English stemmer (imported on first use: not every run studies)."""
    import snowballstemmer

    return snowballstemmer.stemmer("english")


def words_of(text: str) -> list[str]:
    """Lowercased words (letters, digits, inner apostrophes), in order."""
    return _WORD.findall(text.lower())


def _content(text: str) -> list[str]:
    words = [w for w in words_of(text) if len(w) >= 5 and w.isalpha() and w not in STOP]
    return [str(stem) for stem in stemmer().stemWords(words)]


def content_words(text: str) -> frozenset[str]:
    """The distinct content words of ``text`` (whole words, not stems)."""
    return frozenset(w for w in words_of(text) if len(w) >= 5 and w.isalpha() and w not in STOP)


def cohesion(a: str, b: str) -> float:
    """Cosine of the texts' content-word counts, to 2 decimals (0.0 if they share none)."""
    ca, cb = Counter(_content(a)), Counter(_content(b))
    dot = sum(n * cb[w] for w, n in ca.items())
    if not dot:
        return 0.0
    norm = math.sqrt(sum(n * n for n in ca.values()) * sum(n * n for n in cb.values()))
    return round(dot / norm, 2)


def adjacent_cohesion(paragraphs: Sequence[str]) -> list[float]:
    """Cohesion of each paragraph with the next: ``len(paragraphs) - 1`` values."""
    return [cohesion(a, b) for a, b in pairwise(paragraphs)]


def unit_cohesion(links: Sequence[float]) -> float:
    """A unit's cohesion: the mean of its adjacent links; 1.0 for a single paragraph."""
    return round(sum(links) / len(links), 2) if links else 1.0


def cut_points(links: Sequence[float]) -> list[int]:
    """Where to cut ``len(links) + 1`` paragraphs into units (see the module docstring).

    Returns the unit sizes, in order; their sum is the number of paragraphs.
    """
    count = len(links) + 1
    units = -(-count // MAX_PARAGRAPHS)
    # best[k][i]: the best (cost, squares, sizes) covering the first i paragraphs with k units
    Best = tuple[float, int, tuple[int, ...]]
    best: list[dict[int, Best]] = [{0: (0.0, 0, ())}]
    for k in range(1, units + 1):
        row: dict[int, Best] = {}
        # the units left after k can cover at most this many paragraphs: a cut before
        # ``least`` can never be completed, so it is not kept (each row holds at most 5
        # ends, and a long section costs time linear in its units, not cubic)
        least = count - MAX_PARAGRAPHS * (units - k)
        for end, (cost, squares, sizes) in best[k - 1].items():
            for size in range(1, MAX_PARAGRAPHS + 1):
                stop = end + size
                if stop > count:
                    break
                if stop < least:
                    continue
                cut = links[stop - 1] if stop < count else 0.0
                candidate = (round(cost + cut, 2), squares + size * size, (*sizes, size))
                known = row.get(stop)
                if known is None or _better(candidate, known):
                    row[stop] = candidate
        best.append(row)
    return list(best[units][count][2])


def _better(a: tuple[float, int, tuple[int, ...]], b: tuple[float, int, tuple[int, ...]]) -> bool:
    """Lower cut cohesion, then more balanced, then earlier units larger."""
    return (a[0], a[1], tuple(-s for s in a[2])) < (b[0], b[1], tuple(-s for s in b[2]))
