"""rolecall: a runtime for multi-role LLM dialogues.

The public API (docs/api.md)::

    world = rolecall.load_world("worlds/classroom")
    async with rolecall.open_session(world, data_dir="data", model="offline") as session:
        async for event in session.events():
            ...

Everything named in ``__all__`` is public; other modules are internal. Names are
imported on first use, so ``import rolecall`` (and the ``rolecall`` command) stays fast.
Library use prints nothing: log records go to the ``rolecall`` logger (structlog bound to
stdlib logging, with a ``NullHandler``, set up by :mod:`rolecall.log`); the application
configures logging.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from rolecall import mode_registry as _mode_registry
from rolecall.version import __version__


def _load_mode(module: str) -> None:
    """Import ``rolecall.modes.<module>`` (it registers itself). The bottom-layer mode
    registry is given this loader here, at the root above every layer, so that no
    module of a lower layer imports a higher one, by statement or through importlib."""
    importlib.import_module(f"rolecall.modes.{module}")


_mode_registry.set_loader(_load_mode)

# public name -> module it lives in
_EXPORTS: dict[str, str] = {
    **dict.fromkeys(("load_world", "open_session", "resume", "run"), "rolecall.api.entry"),
    **dict.fromkeys(("Session", "Result"), "rolecall.api.session"),
    "Sink": "rolecall.api.opening",
    "SessionStore": "rolecall.storage.port",
    "InMemoryStore": "rolecall.storage.in_memory",
    "SqliteStore": "rolecall.storage.sqlite",
    "World": "rolecall.world.models",
    "ChatModel": "rolecall.llm.protocol",
    **dict.fromkeys(
        ("ChatMessage", "GenerationRequest", "Persona", "TextDelta", "TurnInfo", "Usage"),
        "rolecall.llm.types",
    ),
    "TranscriptMessage": "rolecall.session.state",
    **dict.fromkeys(("PendingCall", "Decision"), "rolecall.tools.approval"),
    **dict.fromkeys(
        (
            "RolecallError",
            "UsageError",
            "WorldError",
            "RuntimeFailure",
            "ProviderError",
            "StorageError",
            "SessionInUse",
        ),
        "rolecall.errors",
    ),
    **dict.fromkeys(
        (
            "Envelope",
            "Event",
            "Message",
            "MessageEvent",
            "StreamStart",
            "StreamChunk",
            "StreamEnd",
            "StreamError",
            "StepEvent",
            "ConditionEvent",
            "TurnLimitEvent",
            "PassEvent",
            "RespondEvent",
            "WarningEvent",
            "ErrorEvent",
            "LogEvent",
            "JudgeEvent",
            "ModeEvent",
            "SessionEvent",
            "AgentEvent",
            "StopEvent",
        ),
        "rolecall.bus",
    ),
}
# public names that differ from the name inside their module
_RENAMED = {"Message": "MessageEvent"}

__all__ = [
    "AgentEvent",
    "ChatMessage",
    "ChatModel",
    "ConditionEvent",
    "Decision",
    "Envelope",
    "ErrorEvent",
    "Event",
    "GenerationRequest",
    "InMemoryStore",
    "JudgeEvent",
    "LogEvent",
    "Message",
    "MessageEvent",
    "ModeEvent",
    "PassEvent",
    "PendingCall",
    "Persona",
    "ProviderError",
    "RespondEvent",
    "Result",
    "RolecallError",
    "RuntimeFailure",
    "Session",
    "SessionEvent",
    "SessionInUse",
    "SessionStore",
    "Sink",
    "SqliteStore",
    "StepEvent",
    "StopEvent",
    "StorageError",
    "StreamChunk",
    "StreamEnd",
    "StreamError",
    "StreamStart",
    "TextDelta",
    "TranscriptMessage",
    "TurnInfo",
    "TurnLimitEvent",
    "Usage",
    "UsageError",
    "WarningEvent",
    "World",
    "WorldError",
    "__version__",
    "load_world",
    "open_session",
    "resume",
    "run",
    "testing",
]


def __getattr__(name: str) -> Any:
    if name == "testing":
        return importlib.import_module("rolecall.testing")
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'rolecall' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:
    from rolecall.api.entry import load_world, open_session, resume, run
    from rolecall.api.opening import Sink
    from rolecall.api.session import Result, Session
    from rolecall.bus import (
        AgentEvent,
        ConditionEvent,
        Envelope,
        ErrorEvent,
        Event,
        JudgeEvent,
        LogEvent,
        MessageEvent,
        ModeEvent,
        PassEvent,
        RespondEvent,
        SessionEvent,
        StepEvent,
        StopEvent,
        StreamChunk,
        StreamEnd,
        StreamError,
        StreamStart,
        TurnLimitEvent,
        WarningEvent,
    )
    from rolecall.bus import MessageEvent as Message
    from rolecall.errors import (
        ProviderError,
        RolecallError,
        RuntimeFailure,
        SessionInUse,
        StorageError,
        UsageError,
        WorldError,
    )
    from rolecall.llm.protocol import ChatModel
    from rolecall.llm.types import (
        ChatMessage,
        GenerationRequest,
        Persona,
        TextDelta,
        TurnInfo,
        Usage,
    )
    from rolecall.session.state import TranscriptMessage
    from rolecall.storage.in_memory import InMemoryStore
    from rolecall.storage.port import SessionStore
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.tools.approval import Decision, PendingCall
    from rolecall.world.models import World
