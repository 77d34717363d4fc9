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
- ``chat <model>``, a child of the turn (kind CLIENT): the model call, with the
  attributes of OpenTelemetry's GenAI semantic conventions (v1.37): ``gen_ai.operation.name``
  (``chat``), ``gen_ai.provider.name`` (``openai``, ``anthropic``, ``gcp.gemini``, ...
  from the model string's prefix; ``rolecall`` for the built-in models),
  ``gen_ai.request.model`` (the model name as sent to the provider: ``gpt-4o-mini`` for
  ``openai/gpt-4o-mini``), ``gen_ai.conversation.id`` (the session id),
  ``server.address`` and ``server.port`` (of the role's ``api_base``, when one is set),
  ``gen_ai.usage.input_tokens``, ``gen_ai.usage.output_tokens``; a failed call has
  status ERROR and ``error.type`` (``timeout``, ``refused``, ``unavailable``,
  ``cancelled`` or ``_OTHER``); a completed one has ``gen_ai.response.finish_reasons``,
  the provider's finish reason (``["stop"]``, ``["length"]``, ...) as ``sse/end`` carries it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

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

    from rolecall.api.session import Session
    from rolecall.bus import Bus
    from rolecall.world.models import Role, World

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


# litellm's provider prefixes whose GenAI convention name differs
_PROVIDERS = {
    "gemini": "gcp.gemini",
    "vertex_ai": "gcp.vertex_ai",
    "bedrock": "aws.bedrock",
    "azure": "azure.ai.openai",
    "azure_ai": "azure.ai.inference",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "watsonx": "ibm.watsonx.ai",
}


def _provider(model: str) -> str:
    """``gen_ai.provider.name`` of a model string (litellm's prefix; no prefix: openai)."""
    if model in _BUILTIN:
        return "rolecall"
    prefix = model.split("/", 1)[0] if "/" in model else "openai"
    return _PROVIDERS.get(prefix, prefix)


def _sent(model: str) -> str:
    """The model name the provider is sent: litellm drops the provider's prefix."""
    return model.split("/", 1)[1] if "/" in model and model not in _BUILTIN else model


def _error_type(error: str) -> str:
    """``error.type``: a low-cardinality class of a failed call, from its message."""
    if error == "cancelled":
        return "cancelled"
    if "timed out" in error:
        return "timeout"
    if "refused the request" in error or "is not set" in error:
        return "refused"
    if "unavailable" in error or "stream broke" in error:
        return "unavailable"
    return "_OTHER"


class TracerSite(Protocol):
    """What the spans read of a session: a ``rolecall.Session`` has it."""

    @property
    def session_id(self) -> str: ...
    @property
    def world(self) -> World: ...
    @property
    def bus(self) -> Bus: ...
    def model_name(self, role: Role) -> str: ...


class SessionTracer:
    """Turns one session's events into spans; :meth:`close` ends whatever is still open.

    ``cost`` tells what the whole session cost when its span ends (None: unknown)."""

    def __init__(
        self, session: TracerSite, tracer: Tracer, cost: Callable[[], float | None]
    ) -> None:
        self.session = session
        self.tracer = tracer
        self.cost = cost
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
                if event.finish_reason is not None:
                    generation.set_attribute(
                        "gen_ai.response.finish_reasons", [event.finish_reason]
                    )
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
                    "rolecall.session_id": self.session.session_id,
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
        sent = _sent(model)
        call: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _provider(model),
            "gen_ai.request.model": sent,
            "gen_ai.conversation.id": self.session.session_id,
        }
        call.update(self._server_of(event.sender))
        generation = self.tracer.start_span(
            f"chat {sent}",
            context=trace.set_span_in_context(turn),
            kind=trace.SpanKind.CLIENT,
            attributes=call,
        )
        self._turns[event.message_id] = (turn, generation)

    def _model_of(self, sender: str) -> str:
        try:
            return self.session.model_name(self.session.world.role(sender))
        except KeyError:
            return "unknown"

    def _server_of(self, sender: str) -> dict[str, Any]:
        """``server.address`` and ``server.port`` of the role's ``api_base``, if set."""
        from urllib.parse import urlsplit

        try:
            role = self.session.world.role(sender)
        except KeyError:
            return {}
        base = role.api_base or self.session.world.settings.api_base
        if not base:
            return {}
        url = urlsplit(base)
        if not url.hostname:
            return {}
        port = url.port or {"http": 80, "https": 443}.get(url.scheme)
        return {"server.address": url.hostname, **({"server.port": port} if port else {})}

    def _fail_turn(self, event: StreamError) -> None:
        from opentelemetry.trace import Status, StatusCode

        spans = self._turns.pop(event.message_id, None)
        if spans is None:
            return
        turn, generation = spans
        generation.set_attribute("error.type", _error_type(event.error))
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
        cost = self.cost()
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


def trace_session(session: Session, tracer_provider: TracerProvider | None = None) -> SessionTracer:
    """Trace ``session`` (a ``rolecall.Session``) with ``tracer_provider`` (default: the
    global one)."""
    from opentelemetry import trace

    from rolecall.version import __version__

    tracer = trace.get_tracer("rolecall", __version__, tracer_provider=tracer_provider)
    tracing = SessionTracer(session, tracer, lambda: session.result.cost)
    session.bus.subscribe(tracing, name="tracing")
    return tracing
