"""Showing a cost in USD (kept tiny: the terminal display imports it)."""

from __future__ import annotations


def money(cost: float | None) -> str:
    """A cost for people: ``$0.000210``, ``$1.2345``, ``$0``; ``unknown`` for None."""
    if cost is None:
        return "unknown"
    if cost == 0:
        return "$0"
    return f"${cost:.6f}" if cost < 0.01 else f"${cost:.4f}"
