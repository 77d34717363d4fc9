"""What a tool is and what a call of it gives (tools.md), shared by the tool box, the
turn and the record/replay tape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PYTHON_TIMEOUT = 30.0  # seconds per call of a Python tool


@dataclass(frozen=True)
class ToolSpec:
    """One tool a session can call."""

    name: str  # full name: SERVER.TOOL, a Python key, or a built-in's
    description: str
    parameters: dict[str, Any]  # JSON Schema of its arguments
    source: str  # where it comes from, as `rolecall tools list` says it
    timeout: float = PYTHON_TIMEOUT

    def as_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "parameters": self.parameters,
        }


@dataclass(frozen=True)
class CallOutcome:
    """A call's result as the model sees it."""

    content: str
    is_error: bool = False
    duration_ms: int = 0
