"""User regular expressions (``regex:`` conditions) with a time bound.

A pattern written in a world file is untrusted: ``(a|aa)+$`` against forty ``a`` and a
``!`` backtracks for longer than the universe lasts, and a match running in C holds
the event loop, so neither Ctrl-C nor ``max_seconds`` could stop it. Patterns are
compiled with the `regex` package (the syntax of Python's ``re``) and every search
gets ``timeout=``: past :data:`SEARCH_SECONDS` it raises :class:`PatternTimeout`.

Why `regex` and not RE2 (``google-re2``, linear time, no backtracking at all): RE2
refuses lookarounds and backreferences that worlds written for ``re`` use, and reports
a bad pattern by printing to standard error from C++; `regex` keeps ``re``'s syntax,
is already installed (tiktoken, under litellm, depends on it) and bounds the time of
any pattern, whatever it is.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    import regex

# the longest a pattern may be in a world file (one search is bounded in time anyway)
MAX_PATTERN: Final = 1000
# the longest one search may take; a match in C holds the event loop (and Ctrl-C) this long
SEARCH_SECONDS: Final = 0.5


class PatternTimeout(Exception):
    """A search took longer than :data:`SEARCH_SECONDS` (catastrophic backtracking)."""


def check(pattern: str) -> str:
    """``pattern`` if it compiles and is not too long; ValueError saying why otherwise."""
    if len(pattern) > MAX_PATTERN:
        raise ValueError(f"regex is {len(pattern)} characters long; at most {MAX_PATTERN}")
    import regex  # here: a world without a regex condition never needs it (12 ms)

    try:
        compiled(pattern)
    except regex.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


@lru_cache(maxsize=256)
def compiled(pattern: str) -> regex.Pattern[str]:
    import regex

    return regex.compile(pattern)


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` occurs in ``text``; PatternTimeout past the bound."""
    try:
        return compiled(pattern).search(text, timeout=SEARCH_SECONDS) is not None
    except TimeoutError:
        raise PatternTimeout(
            f"the search took longer than {SEARCH_SECONDS:g} s on {len(text)} characters "
            "(the pattern backtracks without end: rewrite it, e.g. without a repeated "
            "group that can match the same text in several ways)"
        ) from None
