"""Tool names: patterns a role lists, and the names a provider may see.

A tool's full name is ``SERVER.TOOL`` (MCP), the key (Python) or ``knowledge.search``
(built-in). OpenAI's function names allow only ``[a-zA-Z0-9_-]`` (64 at most), so each
request maps its tools' full names to such names and back (:class:`NameMap`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from fnmatch import fnmatchcase

_UNSAFE = re.compile(r"[^a-zA-Z0-9_-]")
MAX_NAME = 64


def matches(pattern: str, name: str) -> bool:
    """Whether ``name`` is matched by ``pattern`` (``*`` matches any run of characters)."""
    return fnmatchcase(name, pattern)


def provider_name(full: str) -> str:
    """``time.get_current_time`` -> ``time__get_current_time``; other characters -> ``_``."""
    return _UNSAFE.sub("_", full.replace(".", "__"))[:MAX_NAME]


class NameMap:
    """Full names <-> provider names for one set of tools, one to one."""

    def __init__(self, full_names: Iterable[str]) -> None:
        self.to_provider: dict[str, str] = {}
        self.to_full: dict[str, str] = {}
        for full in full_names:
            base = provider_name(full)
            name, n = base, 1
            while name in self.to_full:  # two full names that look alike to a provider
                n += 1
                suffix = f"_{n}"
                name = base[: MAX_NAME - len(suffix)] + suffix
            self.to_provider[full] = name
            self.to_full[name] = full

    def full(self, provider: str) -> str | None:
        """The full name of a provider-side name; also accepts a full name as is."""
        if provider in self.to_full:
            return self.to_full[provider]
        return provider if provider in self.to_provider else None
