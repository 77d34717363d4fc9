"""OpenTelemetry spans for a session: one per session, per turn and per generation.

An optional extra (``pip install 'rolecall[otel]'``): this module imports only the
OpenTelemetry API, and only when a session is traced. The spans are made from the
session's events (a bus subscriber), so tracing changes nothing in how a session runs:

- ``session <world>``: from the first event to the stop (or pause); attributes
  ``rolecall.world``, ``rolecall.session_id``, ``rolecall.stop_reason``,
  ``rolecall.pause_reason``, ``rolecall.cost_usd`` (when known);
- ``turn <speaker>``, a child of the session: one agent message; ``rolecall.speaker``,
  ``rolecall.message_id``, ``rolecall.step``, ``rolecall.loop_iteration``,
  ``rolecall.reply_target``, ``rolecall.cost_usd``;
- ``chat <model>``, a child of the turn (kind CLIENT): the model call, with the GenAI
  semantic-convention attributes ``gen_ai.operation.name`` (``chat``), ``gen_ai.system``
  (the provider: the model string's prefix, or ``rolecall`` for the built-in models),
  ``gen_ai.request.model``, ``gen_ai.usage.input_tokens``,
  ``gen_ai.usage.output_tokens`` and ``gen_ai.response.finish_reasons`` (``stop`` for a
  complete reply, ``error`` or ``cancelled`` otherwise: rolecall's view, not the
  provider's).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

from rolecall.bus import (
    Envelope,
    MessageEvent,
    SessionEvent,
    StopEvent,
    StreamEnd,
    StreamError,
    StreamStart,
)

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer, TracerProvider

    from rolecall.api.session import Session as PublicSession
    from rolecall.runtime import Session

_BUILTIN = ("offline", "scripted")


def available() -> bool:
    """Whether the OpenTelemetry API is installed."""
    try:
        import opentelemetry.trace  # noqa: F401
    except ImportError:
        return False
    return True


def configured() -> bool:
    """Whether the application (or ``opentelemetry-instrument``) set a tracer provider.

    Whatever sets one imports the API first, unless the provider is named by
    ``OTEL_PYTHON_TRACER_PROVIDER`` (made on first use): otherwise nothing is imported
    here, which spares every untraced command the API's import.
    """
    if "opentelemetry.trace" not in sys.modules and not os.environ.get(
        "OTEL_PYTHON_TRACER_PROVIDER"
    ):
        return False
    if not available():
        return False
    from opentelemetry import trace

    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


def _system(model: str) -> str:
    if model in _BUILTIN:
        return "rolecall"
    return model.split("/", 1)[0] if "/" in model else "openai"


class SessionTracer:
    """Turns one session's events into spans; :meth:`close` ends whatever is still open."""

    def __init__(self, session: Session, tracer: Tracer) -> None:
        self.session = session
        self.tracer = tracer
        self._root: Span | None = None
        self._turns: dict[str, tuple[Span, Span]] = {}

    def __call__(self, envelope: Envelope) -> None:
        event = envelope.event
        if isinstance(event, StreamStart):
            self._start_turn(event)
        elif isinstance(event, StreamEnd):
            spans = self._turns.get(event.message_id)
            if spans is not None:
                generation = spans[1]
                generation.set_attribute("gen_ai.usage.input_tokens", event.input_tokens)
                generation.set_attribute("gen_ai.usage.output_tokens", event.output_tokens)
                generation.set_attribute("gen_ai.response.finish_reasons", ("stop",))
                generation.end()
        elif isinstance(event, StreamError):
            self._fail_turn(event)
        elif isinstance(event, MessageEvent):
            self._end_turn(event)
        elif isinstance(event, StopEvent):
            root = self._session_span()
            root.set_attribute("rolecall.stop_reason", event.reason)
            self._end_session()
        elif isinstance(event, SessionEvent) and event.state == "paused" and self._root:
            self._root.set_attribute("rolecall.pause_reason", event.reason or "")
            self._end_session()

    def _session_span(self) -> Span:
        if self._root is None:
            world = self.session.world
            self._root = self.tracer.start_span(
                f"session {world.name}",
                attributes={
                    "rolecall.world": world.name,
                    "rolecall.session_id": self.session.state.session_id,
                },
            )
        return self._root

    def _start_turn(self, event: StreamStart) -> None:
        from opentelemetry import trace

        root = self._session_span()
        attributes: dict[str, Any] = {
            "rolecall.speaker": event.sender,
            "rolecall.message_id": event.message_id,
        }
        if event.step_id is not None:
            attributes["rolecall.step"] = event.step_id
        if event.loop_iteration is not None:
            attributes["rolecall.loop_iteration"] = event.loop_iteration
        if event.target is not None:
            attributes["rolecall.reply_target"] = event.target
        turn = self.tracer.start_span(
            f"turn {event.sender}", context=trace.set_span_in_context(root), attributes=attributes
        )
        model = self._model_of(event.sender)
        generation = self.tracer.start_span(
            f"chat {model}",
            context=trace.set_span_in_context(turn),
            kind=trace.SpanKind.CLIENT,
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.system": _system(model),
                "gen_ai.request.model": model,
            },
        )
        self._turns[event.message_id] = (turn, generation)

    def _model_of(self, sender: str) -> str:
        try:
            return self.session.model_name(self.session.world.role(sender))
        except KeyError:
            return "unknown"

    def _fail_turn(self, event: StreamError) -> None:
        from opentelemetry.trace import Status, StatusCode

        spans = self._turns.pop(event.message_id, None)
        if spans is None:
            return
        turn, generation = spans
        reason = "cancelled" if event.error == "cancelled" else "error"
        generation.set_attribute("gen_ai.response.finish_reasons", (reason,))
        for span in (generation, turn):
            span.set_status(Status(StatusCode.ERROR, event.error))
            span.end()

    def _end_turn(self, event: MessageEvent) -> None:
        spans = self._turns.pop(event.message_id, None)
        if spans is None:
            return
        turn = spans[0]
        if event.cost_usd is not None:
            turn.set_attribute("rolecall.cost_usd", event.cost_usd)
        turn.end()

    def _end_session(self) -> None:
        if self._root is None:
            return
        cost = self.session.state.transcript.cost_usd
        if cost is not None:
            self._root.set_attribute("rolecall.cost_usd", cost)
        self._root.end()
        self._root = None

    def close(self) -> None:
        """End the spans still open (the program is leaving mid-session)."""
        for turn, generation in self._turns.values():
            generation.end()
            turn.end()
        self._turns.clear()
        self._end_session()


def trace_session(
    session: Session | PublicSession, tracer_provider: TracerProvider | None = None
) -> SessionTracer:
    """Trace ``session`` (a ``rolecall.Session`` or the runtime's) with
    ``tracer_provider`` (default: the global one)."""
    from rolecall.api.session import Session as Public

    if isinstance(session, Public):
        session = session.runtime
    from opentelemetry import trace

    from rolecall.version import __version__

    tracer = trace.get_tracer("rolecall", __version__, tracer_provider=tracer_provider)
    tracing = SessionTracer(session, tracer)
    session.bus.subscribe(tracing, name="tracing")
    return tracing
