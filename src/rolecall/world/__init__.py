"""Worlds: the typed world file, its loader and the role library."""
