"""What every provider client shares: one retry loop, one way of reporting a failure.

:class:`RetryingModel` is the base of both provider clients, litellm
(:mod:`rolecall.llm.litellm_model`) and the lean OpenAI-compatible one
(:mod:`rolecall.llm.openai_http`). A client says how to open a streamed reply, how to
read it into rolecall's own stream items (:mod:`rolecall.llm.types`) and how to close it,
and what one of its exceptions means (a :class:`Failure`); the loop here does the rest:

- each attempt's request must answer within ``request.timeout`` (its reads are bounded
  by the client, with the same timeout);
- a transient failure is retried, ``request.retries`` times at most, after the provider's
  ``Retry-After`` (capped at ``max_retry_after``) or else exponential backoff with full
  jitter (``retry_delay`` doubling up to ``max_retry_delay``), but only while no text has
  been yielded for the request, so a caller never sees text twice;
- a refusal is not retried;
- every failure is raised as a :class:`~rolecall.errors.ProviderError` whose message
  names the model and the cause in plain words and never contains the API key;
  cancellation propagates untouched.
"""

from __future__ import annotations

import contextlib
import email.utils
import os
import random
import re
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Generic, Literal, TypeVar
from urllib.parse import urlsplit

import anyio

from rolecall.errors import ProviderError, ProviderRefused, ProviderTimeout, ProviderUnavailable
from rolecall.llm.types import (
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

__all__ = [
    "BAD_DATA",
    "CONNECTION_FAILED",
    "Failure",
    "IncompleteStream",
    "RetryingModel",
    "ToolPieces",
    "api_key",
    "chain",
    "client_error",
    "plain",
    "redact_keys",
    "retry_after",
    "stream_end",
]

log = get_logger(__name__)

DEFAULT_RETRY_DELAY: Final = 0.5
DEFAULT_MAX_RETRY_DELAY: Final = 8.0
# a provider's Retry-After is honoured up to this many seconds
DEFAULT_MAX_RETRY_AFTER: Final = 30.0

Kind = Literal["timeout", "transient", "refused"]
CONNECTION_FAILED: Final = "connection failed"
BAD_DATA: Final = "the provider sent data that is not valid JSON"

# Client errors, described by status code
_CLIENT_ERRORS: Final = {
    400: "bad request",
    401: "authentication failed",
    402: "payment required",
    403: "permission denied",
    404: "model or endpoint not found",
    413: "request too large",
    422: "request not processable",
}
_KEY_SHAPES: Final = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_\-]{8,}")


@dataclass(frozen=True, slots=True)
class Failure:
    """What a client's exception means: a timeout, transient (retried) or a refusal;
    ``what`` in a few plain words, ``detail`` what the provider or transport said (already
    :func:`plain`). A ``what`` of :data:`CONNECTION_FAILED` is worded by the loop, the same
    for every client: ``connect_refused`` says nobody answered at all."""

    kind: Kind
    what: str
    detail: str = ""
    retry_after: float | None = None
    connect_refused: bool = False


class IncompleteStream(Exception):
    """A stream that ended without a finish reason: a truncated reply, or an HTTP 200
    that was not an event stream (an HTML page). Retried like a broken stream."""


def client_error(status: int) -> tuple[Kind, str]:
    """What an HTTP status of 400 or more says, when nothing more precise is known."""
    if status == 429:
        return "transient", "rate limited, HTTP 429"
    if status == 408:
        return "timeout", "timed out"
    if status < 500:
        return "refused", f"{_CLIENT_ERRORS.get(status, 'client error')}, HTTP {status}"
    return "transient", f"server error, HTTP {status}"


def plain(text: str, secrets: Sequence[str]) -> str:
    """``text`` on one line, at most 200 characters, with every key masked.

    Keys are masked first, from the whole text: a cut made before would leave the part of
    a key that falls before it, which no longer matches the key.
    """
    text = " ".join(redact_keys(text, secrets).split())
    return text[:197] + "..." if len(text) > 200 else text


def redact_keys(text: str, secrets: Sequence[str]) -> str:
    """``text`` with ``secrets`` and anything shaped like an API key masked."""
    return _KEY_SHAPES.sub(lambda m: f"{m.group(1)}-***", redact(text, secrets))


def retry_after(headers: Mapping[str, Any] | Any) -> float | None:
    """Seconds the provider asked to wait (``retry-after-ms`` or ``Retry-After``), if any."""
    if headers is None or not hasattr(headers, "get"):
        return None
    with contextlib.suppress(TypeError, ValueError):
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return float(millis) / 1000
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        pass
    with contextlib.suppress(TypeError, ValueError):
        when = email.utils.parsedate_to_datetime(str(value))
        return max(0.0, when.timestamp() - time.time())
    return None


def api_key(request: GenerationRequest, model: str) -> str | None:
    """The API key named by ``request.api_key_env``; ``None``: the client's defaults."""
    if not request.api_key_env:
        return None
    value = os.environ.get(request.api_key_env)
    if not value:
        raise ProviderRefused(
            f"{model}: the API key variable {request.api_key_env} is not set (or is empty)",
            model=model,
        )
    return value


class ToolPieces:
    """A reply's streamed tool calls, put together: by index, the id and name come in
    the first piece, the arguments' JSON text in pieces after it."""

    __slots__ = ("_calls",)

    def __init__(self) -> None:
        self._calls: dict[int, list[str]] = {}

    def add(self, index: object, call_id: object, name: object, arguments: object) -> None:
        call = self._calls.setdefault(
            index if isinstance(index, int) else len(self._calls), ["", "", ""]
        )
        if isinstance(call_id, str) and call_id:
            call[0] = call_id
        if isinstance(name, str) and name:
            call[1] = name
        if isinstance(arguments, str):
            call[2] += arguments

    def calls(self) -> list[ToolCall]:
        """The whole calls, in index order (once the stream has ended)."""
        return [
            ToolCall(call[0] or f"call_{index}", call[1], call[2])
            for index, call in sorted(self._calls.items())
        ]


def stream_end(
    request: GenerationRequest,
    model: str,
    text: str,
    counted: Usage | None,
    finish: str | None,
    cost: Callable[[str, int, int], float | None],
    calls: ToolPieces,
    *,
    complete: bool,
) -> list[StreamItem]:
    """A stream's last items once the provider's reply has ended: its tool calls, then the
    counts (the provider's, estimated when it sent none) and what they cost by
    ``cost(model, input_tokens, output_tokens)``. :class:`IncompleteStream` when it was
    not ``complete`` (cut short before a finish reason, or not an event stream)."""
    if not complete:
        raise IncompleteStream(
            "the reply ended without a finish reason"
            if text
            else "the provider sent no reply (not an event stream?)"
        )
    if counted is None:  # estimated (llama-cpp-python's server streams no usage), and
        # never past the cap the provider was sent: it never generates past it
        out = estimate_tokens(text)
        if request.max_tokens is not None:
            out = min(out, request.max_tokens)
        counted = Usage(prompt_tokens(request.messages), out)
    price = cost(model, counted.input_tokens, counted.output_tokens)
    usage = Usage(counted.input_tokens, counted.output_tokens, price, finish_reason=finish)
    return [*calls.calls(), usage]


Response = TypeVar("Response")


class RetryingModel(ABC, Generic[Response]):
    """A provider client behind :class:`~rolecall.llm.protocol.ChatModel`: the retry loop.

    ``name`` is the model string (``"openai/gpt-4o-mini"``); a request's own ``model``
    wins when set. ``retry_delay`` is the first backoff delay; each further retry doubles
    it, up to ``max_retry_delay``.
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
        return f"{type(self).__name__}({self.name!r})"

    def backoff(self, retry: int) -> float:
        """The longest wait before retry number ``retry`` (1-based): doubling, capped."""
        return float(min(self.retry_delay * (2 ** (retry - 1)), self.max_retry_delay))

    def retry_wait(self, retry: int, retry_after: float | None) -> float:
        """Seconds to wait before retry ``retry``: the provider's ``Retry-After`` (at most
        ``max_retry_after``), else full jitter, uniform between 0 and :meth:`backoff`."""
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.max_retry_after)
        return random.uniform(0.0, self.backoff(retry))

    # -- what a client says -------------------------------------------------------------

    async def _ready(self, model: str) -> None:
        """Make the client usable (an import); raise a ProviderError when it cannot be."""

    @abstractmethod
    async def _open(self, request: GenerationRequest, model: str, key: str | None) -> Response:
        """Send the request; return once the reply has begun."""

    @abstractmethod
    def _read(
        self, response: Response, request: GenerationRequest
    ) -> AsyncGenerator[StreamItem, None]:
        """The reply's items: text as it comes, then the tool calls and one Usage.

        Raises :class:`IncompleteStream` when the reply ends without a finish reason;
        each read is bounded by ``request.timeout``."""

    @abstractmethod
    async def _close(self, response: Response) -> None:
        """Release the reply; never raises, never hangs."""

    @abstractmethod
    def _classify(self, exc: Exception, secrets: Sequence[str]) -> Failure:
        """What one of the client's exceptions means."""

    # -- the loop -----------------------------------------------------------------------

    async def stream(self, request: GenerationRequest) -> AsyncGenerator[StreamItem, None]:
        model = request.model or self.name
        secret = api_key(request, model)
        await self._ready(model)
        attempts = max(0, request.retries) + 1
        timeout = request.timeout
        for attempt in range(1, attempts + 1):
            log.debug("provider_call", model=model, attempt=attempt, attempts=attempts)
            chars = 0
            failure: Exception | None = None
            try:
                with anyio.fail_after(timeout):
                    response = await self._open(request, model, secret)
            except Exception as exc:
                failure = exc
            else:
                try:
                    async with contextlib.aclosing(self._read(response, request)) as items:
                        while True:
                            try:
                                item = await anext(items)
                            except StopAsyncIteration:
                                break
                            except Exception as exc:
                                failure = exc
                                break
                            if type(item) is TextDelta:
                                chars += len(item.text)
                            yield item
                finally:
                    await self._close(response)
            if failure is None:
                return

            secrets = secret_values(secret)  # the role's key, and those the client reads
            if isinstance(failure, IncompleteStream):
                found = Failure("transient", "incomplete stream", str(failure))
            else:
                found = self._classify(failure, secrets)
            what = found.what
            if what == CONNECTION_FAILED:  # one wording, whichever client made it
                detail = _connection_detail(request.api_base, found, broke=chars > 0)
            else:
                detail = found.detail or type(failure).__name__
            cause = _safe_cause(failure, secrets)
            if chars:
                raise ProviderUnavailable(
                    f"{model}: the stream broke after {chars} characters ({what}: {detail})",
                    model=model,
                    retryable=True,
                ) from cause
            if found.kind == "refused":
                raise ProviderRefused(
                    f"{model}: provider refused the request ({what}): {detail}",
                    model=model,
                ) from cause
            if attempt < attempts:
                delay = self.retry_wait(attempt, found.retry_after)
                log.warning(
                    "provider_retry",
                    model=model,
                    attempt=attempt,
                    attempts=attempts,
                    delay=round(delay, 3),
                    retry_after=found.retry_after,
                    cause=f"{what}: {detail}",
                )
                await anyio.sleep(delay)
                continue
            noun = "attempt" if attempts == 1 else "attempts"
            error: ProviderError
            if found.kind == "timeout":
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


def chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions linked to it (causes, contexts, wrapped originals)."""
    seen: dict[int, BaseException] = {}
    todo: list[BaseException] = [exc]
    while todo and len(seen) < 10:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen[id(current)] = current
        for linked in (
            getattr(current, "original_exception", None),
            current.__cause__,
            current.__context__,
        ):
            if isinstance(linked, BaseException):
                todo.append(linked)
    return list(seen.values())


def _connection_detail(api_base: str | None, found: Failure, *, broke: bool) -> str:
    """What became of the connection, in the same words whichever client made it."""
    where = urlsplit(api_base).netloc if api_base else ""
    where = where or "the provider"
    if broke:
        return f"the connection to {where} closed before the reply was complete"
    if found.connect_refused:
        return f"could not connect to {where}"
    return f"the connection to {where} closed before a reply"


def _safe_cause(exc: Exception, secrets: Sequence[str]) -> Exception | None:
    """The exception to chain as ``__cause__``, unless its text would show a key."""
    for linked in chain(exc):
        text = str(linked)
        if any(value in text for value in secrets):
            return None
    return exc


def _seconds(value: float) -> str:
    return f"{value:.1f}" if round(value, 1) == value else f"{value:g}"
