"""Roles that know (knowledge.md): knowledge collections, retrieval for a turn, lore,
running summaries and character cards."""
