"""Chat routing: the ``@mention`` grammar, reply rewrites and who answers a message.

Pure functions, no I/O: see :mod:`rolecall.routing.mentions` for the grammar and the
reply rewrites, and :mod:`rolecall.routing.decide` for the "Who answers" table.
"""

from __future__ import annotations

from rolecall.routing.decide import Reason, Route, route, unknown_mention_notice
from rolecall.routing.mentions import (
    RESERVED,
    auto_mention,
    extract_pass,
    find_mentions,
    first_mention,
    strip_self_mentions,
)

__all__ = [
    "RESERVED",
    "Reason",
    "Route",
    "auto_mention",
    "extract_pass",
    "find_mentions",
    "first_mention",
    "route",
    "strip_self_mentions",
    "unknown_mention_notice",
]
