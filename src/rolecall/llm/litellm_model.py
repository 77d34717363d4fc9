"""The litellm adapter: every real provider behind the :class:`ChatModel` protocol.

This is the only module of rolecall that imports litellm, and it does so lazily (on
first use, cached), because importing litellm takes seconds. Before that first import
``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` (a value the user set wins) so
litellm never fetches its model cost map from the internet.

Retries are ours (the provider SDK's own retries are switched off): transient failures
are retried after the provider's ``Retry-After`` (capped) or else exponential backoff
with full jitter, but only while no text has been yielded for the request, so a caller
never sees text twice. Every failure is raised as a
:class:`~rolecall.errors.ProviderError` whose message names the model and the cause
in plain words and never contains the API key. Cancellation propagates untouched.

A user's litellm callbacks (``litellm.callbacks``, ``litellm.success_callback``, ...)
are left as they are. Cost and token counts come from litellm's bundled price map and
tokenizers, offline: :func:`map_cost`, :func:`price_rates`, :meth:`LiteLLMModel.count_tokens`.
"""

from __future__ import annotations

import contextlib
import email.utils
import functools
import importlib
import importlib.util
import json
import os
import random
import re
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any, Final, Literal

import anyio
import anyio.to_thread

from rolecall.errors import ProviderError, ProviderRefused, ProviderTimeout, ProviderUnavailable
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    StreamItem,
    TextDelta,
    ToolCall,
    Usage,
    estimate_tokens,
    prompt_tokens,
)
from rolecall.log import get_logger
from rolecall.redaction import redact, secret_values

__all__ = ["LiteLLMModel", "aclose_clients", "is_loaded", "map_cost", "preload", "price_rates"]

log = get_logger(__name__)

COST_MAP_ENV: Final = "LITELLM_LOCAL_MODEL_COST_MAP"
DEFAULT_RETRY_DELAY: Final = 0.5
DEFAULT_MAX_RETRY_DELAY: Final = 8.0
# a provider's Retry-After is honoured up to this many seconds
DEFAULT_MAX_RETRY_AFTER: Final = 30.0

_load_lock = threading.Lock()
_litellm: Any = None


# -- loading litellm ------------------------------------------------------------------------


def _load() -> Any:
    """Import litellm once (thread-safe), configure it for quiet offline use, return it."""
    global _litellm
    if _litellm is not None:
        return _litellm
    with _load_lock:
        if _litellm is not None:
            return _litellm
        os.environ.setdefault(COST_MAP_ENV, "True")
        import litellm

        lit: Any = litellm
        # No "Give Feedback / Get Help" banners printed on every exception.
        lit.suppress_debug_info = True
        if hasattr(lit, "telemetry"):
            lit.telemetry = False
        # the user's callbacks (langfuse, otel, their own) are theirs: left untouched
        _warm_up(lit)
        _litellm = lit
        return lit


def _warm_up(lit: Any) -> None:
    """Do the lazy work of litellm's first call now, off the event loop.

    The first completion otherwise imports the provider SDK's resource modules and
    loads the bundled tokenizer (about a second together) while the request's timeout
    is already running.
    """
    with contextlib.suppress(Exception):
        importlib.import_module("openai.resources")
    with contextlib.suppress(Exception):
        lit.token_counter(text="warm up")


# litellm's lists of logging callbacks: while all are empty nobody watches its logging
_CALLBACK_LISTS: Final = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "input_callback",
    "service_callback",
)


def _quiet_unless_watched(lit: Any) -> None:
    """Switch litellm's per-stream logging off while no callback would read it.

    For every streamed chunk litellm otherwise hands a logging job to a thread pool and,
    at the stream's end, runs its success handlers: a cost calculation with model-info
    lookups and a standard logging payload, about 10 ms of CPU a reply that nothing of
    rolecall reads (its cost comes from :func:`map_cost`). A user's callbacks are theirs:
    as soon as one is registered (before or after rolecall loaded litellm), logging is on
    again for the next request. ``litellm.disable_streaming_logging`` is litellm's public
    switch; it is decided again before every request.
    """
    watched = any(getattr(lit, name, None) for name in _CALLBACK_LISTS)
    lit.disable_streaming_logging = not watched


def preload() -> None:
    """Import (and warm up) litellm now; meant for a background thread at start-up."""
    _load()


def is_loaded() -> bool:
    """Whether litellm has been imported in this process."""
    return "litellm" in sys.modules


async def aclose_clients() -> None:
    """Close the HTTP clients litellm cached for the running event loop and forget them.

    For shutdown (and for tests that run several event loops in one process): a client
    left open when its event loop ends leaks sockets. Does nothing if litellm was never
    loaded. Do not call it while a stream is still running.
    """
    lean = sys.modules.get("rolecall.llm.openai_http")
    if lean is not None:  # settings.client: http
        await lean.aclose()
    if _litellm is None:
        return
    lit: Any = _litellm
    closer = getattr(lit, "close_litellm_async_clients", None)
    if closer is not None:
        with anyio.move_on_after(5.0, shield=True), contextlib.suppress(Exception):
            await closer()
    cache = getattr(lit, "in_memory_llm_clients_cache", None)
    if cache is not None:
        with contextlib.suppress(Exception):
            cache.flush_cache()


# -- prices and tokens (litellm's bundled map; no network) ---------------------------------


@functools.lru_cache(maxsize=256)  # the bundled map does not change while we run
def price_rates(model: str) -> tuple[float, float] | None:
    """USD per input and per output token of ``model`` in litellm's map; None if unknown."""
    try:
        cost_in, cost_out = _load().cost_per_token(
            model=model, prompt_tokens=1_000_000, completion_tokens=1_000_000
        )
    except Exception:
        return None
    if not isinstance(cost_in, int | float) or not isinstance(cost_out, int | float):
        return None
    return float(cost_in) / 1e6, float(cost_out) / 1e6


def map_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """What ``input_tokens`` in and ``output_tokens`` out cost on ``model``; None if unknown."""
    rates = price_rates(model)
    if rates is None:
        return None
    return input_tokens * rates[0] + output_tokens * rates[1]


def max_output_tokens(model: str) -> int | None:
    """The most tokens ``model`` may write in one reply, per litellm's map; None if unknown."""
    try:
        value = _load().get_model_info(model).get("max_output_tokens")
    except Exception:
        return None
    return value if isinstance(value, int) and value > 0 else None


# -- the model ------------------------------------------------------------------------------


class LiteLLMModel:
    """A :class:`~rolecall.llm.protocol.ChatModel` that streams through ``litellm.acompletion``.

    ``name`` is the litellm model string (``"openai/gpt-4o-mini"``); a request's own
    ``model`` wins when set. ``retry_delay`` is the first backoff delay; each further
    retry doubles it, up to ``max_retry_delay``.
    """

    def __init__(
        self,
        name: str,
        *,
        retry_delay: float = DEFAULT_RETRY_DELAY,
        max_retry_delay: float = DEFAULT_MAX_RETRY_DELAY,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
    ) -> None:
        if retry_delay < 0 or max_retry_delay < 0 or max_retry_after < 0:
            raise ValueError("retry delays must not be negative")
        self.name = name
        self.retry_delay = retry_delay
        self.max_retry_delay = max_retry_delay
        self.max_retry_after = max_retry_after

    def __repr__(self) -> str:
        return f"LiteLLMModel({self.name!r})"

    def backoff(self, retry: int) -> float:
        """The longest wait before retry number ``retry`` (1-based): doubling, capped."""
        return float(min(self.retry_delay * (2 ** (retry - 1)), self.max_retry_delay))

    def retry_wait(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``retry``: the provider's ``Retry-After`` (at most
        ``max_retry_after``), else full jitter, uniform between 0 and :meth:`backoff`."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return random.uniform(0.0, self.backoff(retry))

    def price_rates(self, model: str) -> tuple[float, float] | None:
        """USD per input and output token of ``model`` in litellm's map (None: unknown)."""
        return price_rates(model)

    def max_output_tokens(self, model: str) -> int | None:
        return max_output_tokens(model)

    def count_tokens(self, messages: tuple[ChatMessage, ...], model: str | None = None) -> int:
        """Input tokens of a prompt by the model's own tokenizer (litellm.token_counter)."""
        try:
            counted = _load().token_counter(
                model=model or self.name, messages=[m.as_provider_dict() for m in messages]
            )
        except Exception:
            return prompt_tokens(messages)
        return counted if isinstance(counted, int) else prompt_tokens(messages)

    async def calls_tools(self, request: GenerationRequest) -> bool:
        """Whether the model ``request`` goes to can be offered tools (tools.md: one that
        cannot gets none, with a warning once). litellm's own answer
        (``litellm.supports_function_calling``) through litellm; by the same bundled map
        for the lean http client, which never imports litellm. A model the map does not
        know, or does not say, is offered them: its provider decides."""
        model = request.model or self.name
        if _is_lean(request, model):
            return _bundled_calls_tools(model)
        try:
            if _litellm is None:
                await anyio.to_thread.run_sync(_load)
            lit = _load()
            info = lit.get_model_info(model)
        except Exception:  # unknown to litellm's map (or litellm missing: stream() says so)
            return True
        if info.get("supports_function_calling") is None:
            return True
        return bool(lit.supports_function_calling(model=model))

    async def prepare(self, request: GenerationRequest) -> None:
        """Import the client ``request`` goes through (litellm: seconds), off the event loop.

        Called before a turn's clock starts (:class:`rolecall.generation.Generator`), so that an
        import is never counted as generation time (``max_seconds``).
        """
        model = request.model or self.name
        if _is_lean(request, model):
            if "rolecall.llm.openai_http" not in sys.modules:
                await anyio.to_thread.run_sync(importlib.import_module, "rolecall.llm.openai_http")
        elif _litellm is None:
            with contextlib.suppress(ImportError):  # stream() says so, as a provider error
                await anyio.to_thread.run_sync(_load)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        model = request.model or self.name
        secret = _api_key(request, model)
        lean = _is_lean(request, model)
        lit: Any = _litellm
        if not lean:  # the lean client never needs litellm (nor its import's seconds)
            try:
                if _litellm is None:
                    # Importing litellm takes seconds; keep the event loop responsive meanwhile.
                    await anyio.to_thread.run_sync(_load)
                lit = _load()
            except ImportError as exc:
                raise ProviderUnavailable(
                    f"{model}: the litellm package could not be imported ({exc})", model=model
                ) from exc
            _quiet_unless_watched(lit)

        kwargs: dict[str, Any] = {
            "model": model,
            "messages": [m.as_provider_dict() for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
            "timeout": request.timeout,
            # The SDK's own retries would hide attempts from us and could repeat text.
            "max_retries": 0,
        }
        if request.temperature is not None:
            kwargs["temperature"] = request.temperature
        if request.max_tokens is not None:
            kwargs["max_tokens"] = request.max_tokens
        if request.api_base:
            kwargs["api_base"] = request.api_base
        if request.tools:  # tools.md: OpenAI's function format, litellm maps it per provider
            kwargs["tools"] = [t.as_provider_dict() for t in request.tools]
        if secret is not None:
            kwargs["api_key"] = secret

        if lean:
            from rolecall.llm import openai_http  # imports aiohttp; only when asked for

            call = openai_http.acompletion
        else:
            call = lit.acompletion
        attempts = max(0, request.retries) + 1
        timeout = request.timeout
        for attempt in range(1, attempts + 1):
            log.debug("provider_call", model=model, attempt=attempt, attempts=attempts)
            parts: list[str] = []
            calls: dict[int, dict[str, str]] = {}  # streamed tool-call pieces, by index
            usage: Usage | None = None
            finish: str | None = None
            failure: Exception | None = None
            response: Any = None
            chunks: AsyncIterator[Any] | None = None
            try:
                with anyio.fail_after(timeout):
                    response = await call(**kwargs)
                chunks = aiter(response)
            except Exception as exc:
                failure = exc
                if response is not None:
                    await _close_stream(response)
            if chunks is not None:
                try:
                    while True:
                        try:
                            if lean:  # the client's own read timeout bounds each wait
                                chunk = await anext(chunks)
                            else:
                                with anyio.fail_after(timeout):
                                    chunk = await anext(chunks)
                            text, chunk_usage = _read_chunk(chunk)
                        except StopAsyncIteration:
                            if _ended_early(response):  # cut short, or not an event stream
                                failure = IncompleteStream(
                                    "the reply ended without a finish reason"
                                    if parts
                                    else "the provider sent no reply (not an event stream?)"
                                )
                            break
                        except Exception as exc:
                            failure = exc
                            break
                        if chunk_usage is not None:
                            usage = chunk_usage
                        finish = _finish_reason(chunk) or finish
                        _tool_pieces(chunk, calls)
                        if text:
                            parts.append(text)
                            yield TextDelta(text)
                finally:
                    await _close_stream(response)

            if failure is None:
                if usage is None:
                    usage = Usage(
                        input_tokens=prompt_tokens(request.messages),
                        output_tokens=estimate_tokens("".join(parts)),
                    )
                if lean and _litellm is None:
                    cost = _bundled_cost(model, usage.input_tokens, usage.output_tokens)
                else:
                    cost = map_cost(model, usage.input_tokens, usage.output_tokens)
                for index in sorted(calls):  # whole, once the stream has ended
                    piece = calls[index]
                    yield ToolCall(
                        piece["id"] or f"call_{index}", piece["name"], piece["arguments"]
                    )
                yield Usage(
                    usage.input_tokens, usage.output_tokens, cost_usd=cost, finish_reason=finish
                )
                return

            kind, what = _classify(failure, lit)
            secrets = secret_values(secret)  # the role's key, and those litellm reads
            if what == "connection failed":  # each client words it its own way: one wording
                detail = _connection_detail(failure, request.api_base, broke=bool(parts))
            else:
                detail = _detail(failure, secrets)
            cause = _safe_cause(failure, secrets)
            if parts:
                chars = sum(len(p) for p in parts)
                raise ProviderUnavailable(
                    f"{model}: the stream broke after {chars} characters ({what}: {detail})",
                    model=model,
                    retryable=True,
                ) from cause
            if kind == "refused":
                raise ProviderRefused(
                    f"{model}: provider refused the request ({what}): {detail}",
                    model=model,
                ) from cause
            if attempt < attempts:
                retry_after = _retry_after(failure)
                delay = self.retry_wait(attempt, retry_after)
                log.warning(
                    "provider_retry",
                    model=model,
                    attempt=attempt,
                    attempts=attempts,
                    delay=round(delay, 3),
                    retry_after=retry_after,
                    cause=f"{what}: {detail}",
                )
                await anyio.sleep(delay)
                continue
            noun = "attempt" if attempts == 1 else "attempts"
            error: ProviderError
            if kind == "timeout":
                error = ProviderTimeout(
                    f"{model}: provider timed out after {_seconds(timeout)} s ({attempts} {noun})",
                    model=model,
                    retryable=True,
                )
            else:
                error = ProviderUnavailable(
                    f"{model}: provider unavailable after {attempts} {noun} ({what}: {detail})",
                    model=model,
                    retryable=True,
                )
            raise error from cause


# -- helpers --------------------------------------------------------------------------------


def _is_lean(request: GenerationRequest, model: str) -> bool:
    """Whether ``request`` goes through the lean client (``settings.client: http``)."""
    return request.client == "http" and model.startswith("openai/")


@functools.cache
def _bundled_map() -> dict[str, Any]:
    """litellm's bundled price map read as a file, without importing litellm (seconds)."""
    spec = importlib.util.find_spec("litellm")  # a top-level package: not imported
    for folder in (spec.submodule_search_locations or []) if spec is not None else []:
        path = os.path.join(folder, "model_prices_and_context_window_backup.json")
        with contextlib.suppress(OSError, ValueError):
            with open(path, encoding="utf-8") as file:
                data = json.load(file)
            if isinstance(data, dict):
                return data
    return {}


def _bundled_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """What the lean client's call cost, by the same map litellm prices from."""
    table = _bundled_map()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    if not isinstance(entry, dict):
        return None
    rate_in, rate_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(rate_in, int | float) or not isinstance(rate_out, int | float):
        return None
    return input_tokens * float(rate_in) + output_tokens * float(rate_out)


def _bundled_calls_tools(model: str) -> bool:
    """Whether the bundled map lets ``model`` call tools (True when it does not say)."""
    table = _bundled_map()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    return not (isinstance(entry, dict) and entry.get("supports_function_calling") is False)


def _api_key(request: GenerationRequest, model: str) -> str | None:
    """The API key named by ``request.api_key_env``; ``None`` lets litellm use its defaults."""
    if not request.api_key_env:
        return None
    value = os.environ.get(request.api_key_env)
    if not value:
        raise ProviderRefused(
            f"{model}: the API key variable {request.api_key_env} is not set (or is empty)",
            model=model,
        )
    return value


def _read_chunk(chunk: Any) -> tuple[str, Usage | None]:
    """The text and the usage (if any) of one streamed chunk."""
    text = ""
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        content = getattr(delta, "content", None) if delta is not None else None
        if isinstance(content, str):
            text += content
    raw = getattr(chunk, "usage", None)
    if raw is None:
        return text, None
    prompt = _field(raw, "prompt_tokens")
    completion = _field(raw, "completion_tokens")
    if prompt is None and completion is None:
        return text, None
    return text, Usage(input_tokens=prompt or 0, output_tokens=completion or 0)


def _tool_pieces(chunk: Any, calls: dict[int, dict[str, str]]) -> None:
    """Add a chunk's tool-call deltas to ``calls`` (by index: the id and name come in the
    first piece, the arguments' JSON text in pieces after it)."""
    for choice in getattr(chunk, "choices", None) or ():
        delta = getattr(choice, "delta", None)
        pieces = _get(delta, "tool_calls") if delta is not None else None
        for piece in pieces or ():
            index = _get(piece, "index")
            call = calls.setdefault(
                index if isinstance(index, int) else len(calls),
                {"id": "", "name": "", "arguments": ""},
            )
            call_id = _get(piece, "id")
            if isinstance(call_id, str) and call_id:
                call["id"] = call_id
            function = _get(piece, "function")
            name = _get(function, "name") if function is not None else None
            if isinstance(name, str) and name:
                call["name"] = name
            arguments = _get(function, "arguments") if function is not None else None
            if isinstance(arguments, str):
                call["arguments"] += arguments


def _get(obj: Any, name: str) -> Any:
    return obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)


def _finish_reason(chunk: Any) -> str | None:
    for choice in getattr(chunk, "choices", None) or ():
        reason = getattr(choice, "finish_reason", None)
        if isinstance(reason, str) and reason:
            return reason
    return None


def _field(obj: Any, name: str) -> int | None:
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


async def _close_stream(response: Any) -> None:
    """Release the HTTP response behind a litellm stream; never raises, never hangs."""
    closer = getattr(response, "aclose", None)
    if closer is None:
        return
    with anyio.move_on_after(2.0, shield=True), contextlib.suppress(Exception):
        await closer()


Kind = Literal["timeout", "transient", "refused"]

# Client errors, described by status code: litellm sometimes picks its exception class
# from words in the error body (an OpenAI 404 says "invalid_request_error" and comes back
# as BadRequestError), but it keeps the status code.
_CLIENT_ERRORS: Final = {
    400: "bad request",
    401: "authentication failed",
    402: "payment required",
    403: "permission denied",
    404: "model or endpoint not found",
    413: "request too large",
    422: "request not processable",
}
_REFUSED_NAMES: Final = (
    ("AuthenticationError", "authentication failed"),
    ("PermissionDeniedError", "permission denied"),
    ("NotFoundError", "model or endpoint not found"),
    ("UnprocessableEntityError", "request not processable"),
    ("UnsupportedParamsError", "unsupported parameter"),
    ("BadRequestError", "bad request"),
)
_TIMEOUT_NAMES: Final = frozenset(
    {"Timeout", "APITimeoutError", "TimeoutException", "ReadTimeout", "ConnectTimeout"}
)
_CONNECTION_NAMES: Final = frozenset(
    {
        "APIConnectionError",
        "ConnectError",
        "RemoteProtocolError",
        "ReadError",
        "ClientConnectionError",
        "ClientPayloadError",
    }
)
_BAD_DATA: Final = "the provider sent data that is not valid JSON"


class IncompleteStream(Exception):
    """A stream that ended without a finish reason: a truncated reply, or an HTTP 200
    that was not an event stream (an HTML page). Retried like a broken stream."""


def _ended_early(response: Any) -> bool:
    """Whether the provider never said why its stream ended (no finish_reason chunk).

    litellm's stream wrapper then makes up ``finish_reason: stop`` for its last chunk;
    what the provider really sent is kept in ``received_finish_reason``.
    """
    return hasattr(response, "received_finish_reason") and not response.received_finish_reason


def _classify(exc: Exception, lit: Any) -> tuple[Kind, str]:
    """Whether a failure is a timeout, transient, or a refusal, and a few plain words on it."""
    if isinstance(exc, IncompleteStream):
        return "transient", "incomplete stream"
    # litellm reports a broken stream as MidStreamFallbackError; judge by what broke it.
    original = getattr(exc, "original_exception", None)
    if isinstance(original, Exception) and original is not exc:
        return _classify(original, lit)

    names = _names(exc)
    if isinstance(exc, TimeoutError) or names & _TIMEOUT_NAMES:
        return "timeout", "timed out"
    if _is(exc, names, lit, "ContextWindowExceededError"):
        return "refused", "the prompt is too long for the model's context window"
    if _is(exc, names, lit, "ContentPolicyViolationError"):
        return "refused", "content policy violation"
    status = _status(exc)
    if status == 429 or _is(exc, names, lit, "RateLimitError"):
        return "transient", "rate limited, HTTP 429"
    if status == 408:
        return "timeout", "timed out"
    if status is not None and 400 <= status < 500:
        return "refused", f"{_CLIENT_ERRORS.get(status, 'client error')}, HTTP {status}"
    for name, what in _REFUSED_NAMES:
        if _is(exc, names, lit, name):
            return "refused", what
    # litellm gives transport failures a made-up 500; look at what actually happened.
    if status is None or status == 500:
        if any(_MISSING_KEY.search(str(linked)) for linked in (exc, *_chain(exc))):
            return "refused", "missing credentials: no API key for this provider"
        if _is_bad_data(exc):
            return "transient", _BAD_DATA
        for linked in _chain(exc):
            linked_names = _names(linked)
            if isinstance(linked, TimeoutError) or linked_names & _TIMEOUT_NAMES:
                return "timeout", "timed out"
            if linked_names & _CONNECTION_NAMES or isinstance(linked, OSError):
                text = str(linked).lower()
                if "timeout" in text or "timed out" in text:
                    return "timeout", "timed out"
                return "transient", "connection failed"
    if status is not None and status >= 500:
        return "transient", f"server error, HTTP {status}"
    return "transient", type(exc).__name__


# the provider SDK refuses locally when no key is configured; litellm reports it as a 500
_MISSING_KEY = re.compile(r"missing credentials|api_key client option must be set", re.I)


def _names(exc: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(exc).__mro__}


def _is(exc: BaseException, names: set[str], lit: Any, name: str) -> bool:
    """Whether ``exc`` is litellm's (or the OpenAI SDK's) exception class ``name``."""
    cls = getattr(lit, name, None)
    return name in names or (isinstance(cls, type) and isinstance(exc, cls))


def _retry_after(exc: BaseException) -> float | None:
    """Seconds the provider asked to wait (``retry-after-ms`` or ``Retry-After``), if any."""
    for linked in _chain(exc):
        headers: Any = getattr(linked, "litellm_response_headers", None)
        if headers is None:
            response = getattr(linked, "response", None)
            headers = getattr(response, "headers", None)
        if headers is None or not hasattr(headers, "get"):
            continue
        with contextlib.suppress(TypeError, ValueError):
            millis = headers.get("retry-after-ms")
            if millis is not None:
                return float(millis) / 1000
        value = headers.get("retry-after")
        if value is None:
            continue
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
        with contextlib.suppress(TypeError, ValueError):
            when = email.utils.parsedate_to_datetime(str(value))
            return max(0.0, when.timestamp() - time.time())
    return None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 10:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        yield current
        for linked in (
            getattr(current, "original_exception", None),
            current.__cause__,
            current.__context__,
        ):
            if isinstance(linked, BaseException):
                todo.append(linked)


def _is_bad_data(exc: BaseException) -> bool:
    for linked in _chain(exc):
        if isinstance(linked, json.JSONDecodeError):
            return True
        text = str(linked)
        if "Expecting value" in text or "JSONDecodeError" in text:
            return True
    return False


_PREFIX: Final = re.compile(r"^(?:litellm\.)?[A-Za-z]*(?:Error|Exception|Timeout):\s*")
# the OpenAI SDK's (and so litellm's) "Error code: 400 - " before the provider's words
_STATUS_PREFIX: Final = re.compile(r"^Error code: \d{3} - ")
_REFUSED_CONNECTION: Final = frozenset({"ConnectionRefusedError", "ClientConnectorError"})
_KEY_SHAPES: Final = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


def _detail(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """A one-line, human-sized description of what the provider or transport said.

    Keys are redacted first, from the whole text: a cut made before would leave the
    part of a key that falls before it, which no longer matches the key.
    """
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = _redact(text, secrets)
    if not text:
        return type(exc).__name__
    if "Exception - " in text:
        text = text.split("Exception - ", 1)[1]
    text = text.split(" Original exception:", 1)[0]
    previous = None
    while previous != text:
        previous = text
        text = _STATUS_PREFIX.sub("", _PREFIX.sub("", text, count=1), count=1)
    text = " ".join(text.split())
    if len(text) > 200:
        text = text[:197] + "..."
    return text or type(exc).__name__


def _connection_detail(exc: BaseException, api_base: str | None, *, broke: bool) -> str:
    """What became of the connection, in the same words whichever client made it (litellm's
    SDK says "Connection error.", aiohttp names its exception classes and their codes)."""
    where = _netloc(api_base) or "the provider"
    if broke:
        return f"the connection to {where} closed before the reply was complete"
    if any(_names(linked) & _REFUSED_CONNECTION for linked in _chain(exc)) or any(
        "all connection attempts failed" in str(linked).lower() for linked in _chain(exc)
    ):
        return f"could not connect to {where}"
    return f"the connection to {where} closed before a reply"


def _netloc(api_base: str | None) -> str:
    from urllib.parse import urlsplit

    return urlsplit(api_base).netloc if api_base else ""


def _redact(text: str, secrets: Sequence[str]) -> str:
    return _KEY_SHAPES.sub(lambda m: f"{m.group(1)}-***", redact(text, secrets))


def _safe_cause(exc: Exception, secrets: Sequence[str]) -> Exception | None:
    """The exception to chain as ``__cause__``, unless its text would show a key."""
    for linked in _chain(exc):
        text = str(linked)
        if any(value in text for value in secrets):
            return None
    return exc


def _seconds(value: float) -> str:
    return f"{value:.1f}" if round(value, 1) == value else f"{value:g}"
