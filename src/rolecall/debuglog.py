"""Structured debug logs of a session, for a person debugging a flow (``-vv``).

A bus subscriber writes one log event per thing that happened, with its facts as
fields: ``step_started`` (step, speaker, loop iteration, reply target) and
``step_finished`` (result, tokens), ``condition`` (the condition, its result, why),
``turn_limit``, ``pass``, ``message`` (who to whom, tokens, cost), ``generation_failed``,
``session_state`` and ``session_stop``. Routing decisions (``routing``: who answers a
human message and why), provider retries (``provider_retry`` with the wait) and store
commits (``store_commit`` with its milliseconds) are logged where they happen. Nothing
is logged unless the ``rolecall`` logger is enabled for DEBUG (the CLI's ``-vv``).
"""

from __future__ import annotations

import logging
from typing import Protocol

from rolecall.bus import (
    Bus,
    ConditionEvent,
    Envelope,
    MessageEvent,
    PassEvent,
    SessionEvent,
    StepEvent,
    StopEvent,
    StreamError,
    StreamStart,
    TurnLimitEvent,
)
from rolecall.log import get_logger

log = get_logger("rolecall.flow")
# the logger object lives as long as the process (logging never drops one), and its
# isEnabledFor caches the answer until a level changes
_ROLECALL = logging.getLogger("rolecall")


class EventLogSite(Protocol):
    """What the event log needs of a session (a ``rolecall.Session``, named here as a
    protocol since the log sits below the public API): its id and its bus."""

    @property
    def session_id(self) -> str: ...
    @property
    def bus(self) -> Bus: ...


def debug_enabled() -> bool:
    """Whether rolecall's debug logs go anywhere (cheap; checked on hot paths)."""
    return _ROLECALL.isEnabledFor(logging.DEBUG)


class EventLog:
    """Logs one session's events at DEBUG level."""

    def __init__(self, session_id: str) -> None:
        self.log = log.bind(session=session_id)

    def __call__(self, envelope: Envelope) -> None:
        event = envelope.event
        debug = self.log.debug
        if isinstance(event, StreamStart):
            debug(
                "step_started" if event.step_id else "turn_started",
                step=event.step_id,
                speaker=event.sender,
                loop_iteration=event.loop_iteration,
                reply_target=event.target,
                message_id=event.message_id,
            )
        elif isinstance(event, StepEvent):
            debug(
                "step_finished",
                step=event.step_id,
                speaker=event.speaker,
                loop_iteration=event.loop_iteration,
                execution_order=event.execution_order,
                result=event.result,
                message_id=event.message_id,
                input_tokens=event.input_tokens,
                output_tokens=event.output_tokens,
            )
        elif isinstance(event, ConditionEvent):
            debug("condition", condition=event.condition, result=event.result, detail=event.detail)
        elif isinstance(event, MessageEvent):
            debug(
                "message",
                message_id=event.message_id,
                sender=event.sender,
                target=event.target,
                reply_to=event.reply_to,
                mentions=event.mentions,
                input_tokens=event.input_tokens,
                output_tokens=event.output_tokens,
                cost_usd=event.cost_usd,
            )
        elif isinstance(event, TurnLimitEvent | PassEvent):
            debug(event.type, **event.model_dump(exclude={"topic", "type"}))
        elif isinstance(event, StreamError):
            debug("generation_failed", message_id=event.message_id, error=event.error)
        elif isinstance(event, SessionEvent):
            debug("session_state", state=event.state, reason=event.reason)
        elif isinstance(event, StopEvent):
            debug("session_stop", reason=event.reason, detail=event.detail)


def log_events(session: EventLogSite) -> EventLog:
    """Log ``session``'s events (a ``rolecall.Session``) at DEBUG level from now on."""
    events = EventLog(session.session_id)
    session.bus.subscribe(events, name="debug-log")
    return events
