"""The litellm adapter: every real provider behind the :class:`ChatModel` protocol.

This is the only module of rolecall that imports litellm, and it does so lazily (on
first use, cached), because importing litellm takes seconds. Before that first import
``LITELLM_LOCAL_MODEL_COST_MAP`` defaults to ``True`` (a value the user set wins) so
litellm never fetches its model cost map from the internet.

Retries are ours (the provider SDK's own retries are switched off): the loop every
provider client shares, :class:`rolecall.llm.retrying.RetryingModel`. This module maps a
request to litellm's arguments, litellm's exceptions to a
:class:`~rolecall.llm.retrying.Failure`, and prices a reply by litellm's map.

A user's litellm callbacks (``litellm.callbacks``, ``litellm.success_callback``, ...)
are left as they are. Cost and token counts come from litellm's bundled price map and
tokenizers, offline: :func:`map_cost`, :func:`price_rates`, :meth:`LiteLLMModel.count_tokens`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import json
import os
import re
import sys
import threading
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Final

import anyio
import anyio.to_thread

from rolecall.errors import ProviderUnavailable
from rolecall.llm.caps import add_limits
from rolecall.llm.retrying import (
    BAD_DATA,
    CONNECTION_FAILED,
    Failure,
    Kind,
    RetryingModel,
    ToolPieces,
    chain,
    client_error,
    plain,
    redact_keys,
    retry_after,
    stream_end,
)
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    StreamItem,
    TextDelta,
    Usage,
    prompt_tokens,
)

__all__ = ["LiteLLMModel", "aclose_clients", "is_loaded", "map_cost", "preload", "price_rates"]

COST_MAP_ENV: Final = "LITELLM_LOCAL_MODEL_COST_MAP"

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


class LiteLLMModel(RetryingModel[Any]):
    """A :class:`~rolecall.llm.protocol.ChatModel` that streams through ``litellm.acompletion``.

    ``name`` is the litellm model string (``"openai/gpt-4o-mini"``); a request's own
    ``model`` wins when set. Retries, timeouts and the words of a failure are the ones
    every provider client shares (:class:`~rolecall.llm.retrying.RetryingModel`); this
    class maps a request to litellm's arguments and litellm's exceptions to a
    :class:`~rolecall.llm.retrying.Failure`.
    """

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
        cannot gets none, with a warning once): litellm's own answer
        (``litellm.supports_function_calling``). A model its map does not know, or does
        not say, is offered them: its provider decides."""
        model = request.model or self.name
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
        """Import litellm (seconds), off the event loop.

        Called before a turn's clock starts (:class:`rolecall.generation.Generator`), so that an
        import is never counted as generation time (``max_seconds``).
        """
        if _litellm is None:
            with contextlib.suppress(ImportError):  # stream() says so, as a provider error
                await anyio.to_thread.run_sync(_load)

    async def _ready(self, model: str) -> None:
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

    async def _open(self, request: GenerationRequest, model: str, key: str | None) -> Any:
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
        add_limits(kwargs, request, model)
        if request.api_base:
            kwargs["api_base"] = request.api_base
        if request.tools:  # tools.md: OpenAI's function format, litellm maps it per provider
            kwargs["tools"] = [t.as_provider_dict() for t in request.tools]
        if key is not None:
            kwargs["api_key"] = key
        if request.output_schema is not None and _supports_schema(model):
            from rolecall.llm.shape import response_format  # else the prompt asks for it

            kwargs["response_format"] = response_format(request.output_schema)
        return await _load().acompletion(**kwargs)

    async def _read(
        self, response: Any, request: GenerationRequest
    ) -> AsyncGenerator[StreamItem, None]:
        chunks = aiter(response)
        parts: list[str] = []
        calls = ToolPieces()
        usage: Usage | None = None
        finish: str | None = None
        timeout = request.timeout
        loop = _asyncio_loop()
        while True:  # each read bounded by the request's timeout
            try:
                if loop is not None:  # fail_after's bound at a third of its cost a chunk
                    async with asyncio.timeout_at(loop.time() + timeout):
                        chunk = await anext(chunks)
                else:
                    with anyio.fail_after(timeout):
                        chunk = await anext(chunks)
            except StopAsyncIteration:
                break
            text, chunk_usage, reason = _read_chunk(chunk, calls)
            if chunk_usage is not None:
                usage = chunk_usage
            finish = reason or finish
            if text:
                parts.append(text)
                yield TextDelta(text)
        model, text = request.model or self.name, "".join(parts)
        complete = not _ended_early(response)
        for item in stream_end(
            request, model, text, usage, finish, map_cost, calls, complete=complete
        ):
            yield item

    async def _close(self, response: Any) -> None:
        """Release the HTTP response behind a litellm stream; never raises, never hangs."""
        closer = getattr(response, "aclose", None)
        if closer is None:
            return
        with anyio.move_on_after(2.0, shield=True), contextlib.suppress(Exception):
            await closer()

    def _classify(self, exc: Exception, secrets: Sequence[str]) -> Failure:
        kind, what = _classify(exc, _litellm)
        if what == CONNECTION_FAILED:
            return Failure(kind, what, connect_refused=_refused_connection(exc))
        return Failure(kind, what, _detail(exc, secrets), _retry_after(exc))


# -- helpers --------------------------------------------------------------------------------


def _asyncio_loop() -> asyncio.AbstractEventLoop | None:
    """The running asyncio loop; None under another event loop (trio)."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _read_chunk(chunk: Any, calls: ToolPieces) -> tuple[str, Usage | None, str | None]:
    """The text, the usage (if any) and the finish reason (if any) of one streamed chunk,
    in one pass over its choices; its tool-call pieces go into ``calls``."""
    text = ""
    reason: str | None = None
    for choice in _get(chunk, "choices") or ():
        finish = _get(choice, "finish_reason")
        if reason is None and isinstance(finish, str) and finish:
            reason = finish
        delta = _get(choice, "delta")
        if delta is None:
            continue
        content = _get(delta, "content")
        if isinstance(content, str):
            text += content
        for piece in _get(delta, "tool_calls") or ():
            function = _get(piece, "function")
            calls.add(
                _get(piece, "index"),
                _get(piece, "id"),
                _get(function, "name") if function is not None else None,
                _get(function, "arguments") if function is not None else None,
            )
    raw = _get(chunk, "usage")
    if raw is None:
        return text, None, reason
    prompt = _field(raw, "prompt_tokens")
    completion = _field(raw, "completion_tokens")
    if prompt is None and completion is None:
        return text, None, reason
    return text, Usage(input_tokens=prompt or 0, output_tokens=completion or 0), reason


def _get(obj: Any, name: str) -> Any:
    """Field ``name`` of ``obj`` (None when it has none): a dict's key, an attribute.

    litellm keeps most fields of a streamed chunk (a choice's ``delta`` and
    ``finish_reason``, a delta's ``content``, the chunk's ``usage``) as pydantic *extra*
    values, which attribute access reaches only through pydantic's ``__getattr__``, and an
    absent one (``usage`` on every chunk but the last) by raising and catching an
    AttributeError: several microseconds a look-up, several look-ups a chunk. They are
    read here from the model's ``__dict__`` and ``__pydantic_extra__`` (pydantic's public
    attributes); anything else (a property, another version's objects) by ``getattr``.
    """
    if type(obj) is dict:
        return obj.get(name)
    fields = getattr(obj, "__dict__", None)
    if fields is not None and name in fields:
        return fields[name]
    extra = getattr(obj, "__pydantic_extra__", None)
    if type(extra) is dict:
        if name in extra:
            return extra[name]
        if not _on_class(type(obj), name):  # where pydantic's __getattr__ would raise
            return None
    return getattr(obj, name, None)


_CLASS_HAS: dict[tuple[type, str], bool] = {}


def _on_class(cls: type, name: str) -> bool:
    """Whether class ``cls`` has an attribute ``name`` (a property, a method), cached."""
    key = (cls, name)
    found = _CLASS_HAS.get(key)
    if found is None:
        found = _CLASS_HAS[key] = hasattr(cls, name)
    return found


def _field(obj: Any, name: str) -> int | None:
    value = obj.get(name) if isinstance(obj, dict) else getattr(obj, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# litellm sometimes picks its exception class from words in the error body (an OpenAI 404
# says "invalid_request_error" and comes back as BadRequestError), but it keeps the status
# code: a client error is described by its code first, by these names after
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


def _ended_early(response: Any) -> bool:
    """Whether the provider never said why its stream ended (no finish_reason chunk).

    litellm's stream wrapper then makes up ``finish_reason: stop`` for its last chunk;
    what the provider really sent is kept in ``received_finish_reason``.
    """
    return hasattr(response, "received_finish_reason") and not response.received_finish_reason


def _classify(exc: Exception, lit: Any) -> tuple[Kind, str]:
    """Whether a failure is a timeout, transient, or a refusal, and a few plain words on it."""
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
    if _is(exc, names, lit, "RateLimitError"):
        return client_error(429)
    if status is not None and 400 <= status < 500:
        return client_error(status)
    for name, what in _REFUSED_NAMES:
        if _is(exc, names, lit, name):
            return "refused", what
    # litellm gives transport failures a made-up 500; look at what actually happened.
    if status is None or status == 500:
        if any(_MISSING_KEY.search(str(linked)) for linked in chain(exc)):
            return "refused", "missing credentials: no API key for this provider"
        if _is_bad_data(exc):
            return "transient", BAD_DATA
        for linked in chain(exc):
            linked_names = _names(linked)
            if isinstance(linked, TimeoutError) or linked_names & _TIMEOUT_NAMES:
                return "timeout", "timed out"
            if linked_names & _CONNECTION_NAMES or isinstance(linked, OSError):
                text = str(linked).lower()
                if "timeout" in text or "timed out" in text:
                    return "timeout", "timed out"
                return "transient", CONNECTION_FAILED
    if status is not None and status >= 500:
        return client_error(status)
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
    """Seconds the provider asked to wait, from the headers of the response behind ``exc``."""
    for linked in chain(exc):
        headers: Any = getattr(linked, "litellm_response_headers", None)
        if headers is None:
            headers = getattr(getattr(linked, "response", None), "headers", None)
        wait = retry_after(headers)
        if wait is not None:
            return wait
    return None


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) and not isinstance(status, bool) else None


def _is_bad_data(exc: BaseException) -> bool:
    for linked in chain(exc):
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


def _detail(exc: BaseException, secrets: Sequence[str] = ()) -> str:
    """A one-line, human-sized description of what the provider or transport said, without
    litellm's and the SDK's wrappings (``litellm.BadRequestError: OpenAIException - Error
    code: 400 - ...``). Keys are masked first, from the whole text."""
    message = getattr(exc, "message", None)
    text = message if isinstance(message, str) and message else str(exc)
    text = redact_keys(text, secrets)
    if "Exception - " in text:
        text = text.split("Exception - ", 1)[1]
    text = text.split(" Original exception:", 1)[0]
    previous = None
    while previous != text:
        previous = text
        text = _STATUS_PREFIX.sub("", _PREFIX.sub("", text, count=1), count=1)
    return plain(text, ()) or type(exc).__name__


def _refused_connection(exc: BaseException) -> bool:
    """Whether nobody answered at all (litellm's SDK says "Connection error.", aiohttp
    names its exception classes)."""
    return any(
        _names(linked) & _REFUSED_CONNECTION
        or "all connection attempts failed" in str(linked).lower()
        for linked in chain(exc)
    )


def _supports_schema(model: str) -> bool:
    """Whether litellm knows ``model`` takes a JSON-Schema ``response_format``
    (selection.md); a model it does not know is asked through the prompt alone."""
    try:
        return bool(_load().supports_response_schema(model=model))
    except Exception:
        return False
