"""rolecall's lean client for OpenAI-compatible chat completions (``settings.client: http``,
the default for ``openai/...`` models).

litellm speaks to every provider, and costs for it: about 13 ms of CPU per request on
the reference machine (its logging, cost and response objects), which caps one process
at about 70 replies a second however fast the provider is. For an ``openai/...`` model
:class:`OpenAIHTTPModel` does the request itself with one pooled
``aiohttp.ClientSession`` per event loop: ``POST {api_base}/chat/completions`` with
``stream: true``, the Server-Sent Events read line by line into rolecall's own stream
items. Retries, timeouts and the words of a failure are the ones every provider client
shares (:mod:`rolecall.llm.retrying`).

litellm is never imported here: the cost of a reply, and whether a model may call tools,
come from the price map litellm ships (``model_prices_and_context_window_backup.json``),
read as a file. Where a role names no key variable (``api_key_env``) and no ``api_base``,
the OpenAI SDK's own variables answer, as they do through litellm: ``OPENAI_API_KEY``,
and ``OPENAI_BASE_URL`` (or ``OPENAI_API_BASE``) for the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import os
from collections.abc import AsyncGenerator, Sequence
from typing import Any, Final

import aiohttp

from rolecall.llm.caps import add_limits
from rolecall.llm.retrying import (
    BAD_DATA,
    CONNECTION_FAILED,
    Failure,
    RetryingModel,
    ToolPieces,
    client_error,
    plain,
    retry_after,
    stream_end,
)
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.log import get_logger

__all__ = ["OpenAIHTTPModel", "StatusError", "aclose", "bundled_cost"]

DEFAULT_BASE: Final = "https://api.openai.com/v1"
_sessions: dict[int, aiohttp.ClientSession] = {}  # one per event loop (by its id)
log = get_logger(__name__)
# (base URL, model, forms): how many of a schema's response_formats its server refused
_refused_formats: dict[tuple[str, str, int], int] = {}


class MissingKey(Exception):
    """OpenAI's own API asked for with no key: refused before any request, as the SDK does."""


class StatusError(Exception):
    """The provider answered a status other than 200: the code, the error's ``code`` (or
    ``type``) and its words, and how long it asked to wait."""

    def __init__(self, status: int, code: str, message: str, wait: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {message}")
        self.status = status
        self.code = code
        self.message = message
        self.wait = wait


def _session() -> aiohttp.ClientSession:
    loop = id(asyncio.get_running_loop())
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        session = _sessions[loop] = aiohttp.ClientSession(connector=connector)
    return session


async def aclose() -> None:
    """Close this event loop's client (shutdown, and tests running several loops); under
    another event loop than asyncio's (trio), where no client is ever made, nothing."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return
    session = _sessions.pop(id(loop), None)
    if session is not None:
        await session.close()


class OpenAIHTTPModel(RetryingModel[aiohttp.ClientResponse]):
    """An ``openai/...`` model string through rolecall's own HTTP client."""

    async def calls_tools(self, request: GenerationRequest) -> bool:
        """Whether the model may be offered tools: by litellm's bundled map (tools.md); a
        model it does not know, or does not say, is offered them (its provider decides)."""
        entry = _entry(request.model or self.name)
        return not (entry is not None and entry.get("supports_function_calling") is False)

    def price_rates(self, model: str) -> tuple[float, float] | None:
        """USD per input and output token of ``model`` in the bundled map (None: unknown)."""
        return _rates(model)

    def max_output_tokens(self, model: str) -> int | None:
        entry = _entry(model)
        value = entry.get("max_output_tokens") if entry is not None else None
        return value if isinstance(value, int) and value > 0 else None

    async def _open(
        self, request: GenerationRequest, model: str, key: str | None
    ) -> aiohttp.ClientResponse:
        body: dict[str, Any] = {
            "model": model.removeprefix("openai/"),
            "messages": [m.as_provider_dict() for m in request.messages],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        add_limits(body, request, model)
        if request.tools:
            body["tools"] = [t.as_provider_dict() for t in request.tools]
        base = request.api_base or _env("OPENAI_BASE_URL") or _env("OPENAI_API_BASE")
        if key is None and not request.api_key_env:
            key = _env("OPENAI_API_KEY")
        if key is None and base is None:
            raise MissingKey(model)
        url = (base or DEFAULT_BASE).rstrip("/") + "/chat/completions"
        forms: list[dict[str, Any] | None] = [None]
        if request.output_schema is not None:  # a role's `output:`
            from rolecall.llm.shape import response_formats

            forms = [*response_formats(request.output_schema), None]
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        # each read waits at most the request's timeout (the loop bounds the request)
        limit = aiohttp.ClientTimeout(
            total=None, connect=request.timeout, sock_read=request.timeout
        )
        # selection.md: a server that refuses a response_format (llama-cpp-python's takes
        # no `json_schema`, but `json_object` with a `schema`) is asked again at once with
        # the next form, at last without one (the prompt's words still ask for the JSON,
        # and the reply is validated as always); the form it took is kept for the run
        memo = (url, model, len(forms))
        tried = _refused_formats.get(memo, 0)
        while True:
            form = forms[tried]
            if form is None:
                body.pop("response_format", None)
            else:
                body["response_format"] = form
            response = await _session().post(url, json=body, headers=headers, timeout=limit)
            if response.status == 200:
                return response
            try:
                text = (await response.read()).decode("utf-8", "replace")
            finally:
                response.release()
            if form is None or not _refuses_format(response.status, text):
                raise _status_error(response, text)
            log.info("response_format_refused", model=model, status=response.status, form=form)
            tried += 1
            _refused_formats[memo] = tried

    async def _read(
        self, response: aiohttp.ClientResponse, request: GenerationRequest
    ) -> AsyncGenerator[StreamItem, None]:
        parts: list[str] = []
        calls = ToolPieces()
        usage: Usage | None = None
        finish: str | None = None
        # a 200 that is not an event stream (an HTML page) has no reply in it
        kind = response.headers.get("Content-Type", "")
        content = response.content if "text/event-stream" in kind or not kind else None
        while content is not None:
            raw = await content.readline()
            if not raw:
                break
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue  # comments, event names, blank separators
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            for choice in chunk.get("choices") or ():
                delta = choice.get("delta") or {}
                text = delta.get("content")
                for piece in delta.get("tool_calls") or ():
                    function = piece.get("function") or {}
                    calls.add(
                        piece.get("index"),
                        piece.get("id"),
                        function.get("name"),
                        function.get("arguments"),
                    )
                finish = choice.get("finish_reason") or finish
                if isinstance(text, str) and text:
                    parts.append(text)
                    yield TextDelta(text)
            counted = chunk.get("usage")
            if isinstance(counted, dict):
                prompt, completion = (
                    _count(counted, "prompt_tokens"),
                    _count(counted, "completion_tokens"),
                )
                if prompt is not None or completion is not None:
                    usage = Usage(prompt or 0, completion or 0)
        model, text = request.model or self.name, "".join(parts)
        complete = finish is not None  # else cut short, or not an event stream
        for item in stream_end(
            request, model, text, usage, finish, bundled_cost, calls, complete=complete
        ):
            yield item

    async def _close(self, response: aiohttp.ClientResponse) -> None:
        response.release()

    def _classify(self, exc: Exception, secrets: Sequence[str]) -> Failure:
        if isinstance(exc, MissingKey):  # litellm's wording for the same refusal
            detail = "set OPENAI_API_KEY, or name the key's variable with api_key_env"
            return Failure("refused", "missing credentials: no API key for this provider", detail)
        if isinstance(exc, StatusError):
            detail = plain(exc.message, secrets)
            if exc.status == 400 and "context_length_exceeded" in exc.code:
                what = "the prompt is too long for the model's context window"
                return Failure("refused", what, detail)
            if exc.status == 400 and "content_policy" in exc.code:
                return Failure("refused", "content policy violation", detail)
            if exc.status < 400:
                return Failure("transient", f"unexpected status, HTTP {exc.status}", detail)
            kind, what = client_error(exc.status)
            return Failure(kind, what, detail, exc.wait)
        if isinstance(exc, TimeoutError):  # aiohttp's read and connect timeouts too
            return Failure("timeout", "timed out")
        if isinstance(exc, aiohttp.ClientConnectorError):
            return Failure("transient", CONNECTION_FAILED, connect_refused=True)
        if isinstance(exc, aiohttp.ClientError | OSError):
            return Failure("transient", CONNECTION_FAILED)
        if isinstance(exc, ValueError):  # JSON, or UTF-8, that is not
            return Failure("transient", BAD_DATA, plain(str(exc), secrets))
        return Failure("transient", type(exc).__name__, plain(str(exc), secrets))


def _refuses_format(status: int, text: str) -> bool:
    """Whether an error reply says the request's ``response_format`` was refused: a
    client error or a server's validation failure that names the field."""
    return status in (400, 422, 500) and "response_format" in text


def _status_error(response: aiohttp.ClientResponse, text: str) -> StatusError:
    message, code = text.strip() or (response.reason or ""), ""
    with contextlib.suppress(ValueError, AttributeError):
        error = json.loads(text).get("error") or {}
        message = str(error.get("message") or message)
        code = str(error.get("code") or error.get("type") or "")
    return StatusError(response.status, code, message, retry_after(response.headers))


def _env(name: str) -> str | None:
    """An environment variable's value; unset and empty are alike (None)."""
    return os.environ.get(name) or None


def _count(usage: dict[str, Any], name: str) -> int | None:
    value = usage.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# -- litellm's bundled price map, read as a file ---------------------------------------------


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


def _entry(model: str) -> dict[str, Any] | None:
    table = _bundled_map()
    entry = table.get(model) or table.get(model.split("/", 1)[-1])
    return entry if isinstance(entry, dict) else None


@functools.lru_cache(maxsize=256)
def _rates(model: str) -> tuple[float, float] | None:
    entry = _entry(model)
    if entry is None:
        return None
    rate_in, rate_out = entry.get("input_cost_per_token"), entry.get("output_cost_per_token")
    if not isinstance(rate_in, int | float) or not isinstance(rate_out, int | float):
        return None
    return float(rate_in), float(rate_out)


def bundled_cost(model: str, input_tokens: int, output_tokens: int) -> float | None:
    """What a call cost, by the same map litellm prices from (None: unknown)."""
    rates = _rates(model)
    if rates is None:
        return None
    return input_tokens * rates[0] + output_tokens * rates[1]
