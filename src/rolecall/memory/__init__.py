"""Passive memory: every agent's JSON Lines file of the messages it received (chat.md)."""

from __future__ import annotations

from rolecall.memory.files import MemoryFiles, memory_line

__all__ = ["MemoryFiles", "memory_line"]
