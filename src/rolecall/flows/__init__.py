"""Flows: the typed flow, its conditions, reply targets and the pure engine."""
