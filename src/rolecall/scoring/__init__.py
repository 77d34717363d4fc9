"""Scoring stored sessions after the fact (``rolecall score``, docs/compare.md)."""
