"""A lean client for OpenAI-compatible chat completions (``settings.client: http``).

litellm speaks to every provider, and costs for it: about 13 ms of CPU per request on
the reference machine (its logging, cost and response objects), which caps one process
at about 70 replies a second however fast the provider is. For an ``openai/...`` model
this module does the same request with one pooled ``aiohttp.ClientSession``: ``POST
{api_base}/chat/completions`` with ``stream: true``, the Server-Sent Events read line by
line. :func:`acompletion` takes the arguments the adapter gives ``litellm.acompletion``
and returns a stream the adapter reads the same way (chunks with ``choices[].delta``,
``finish_reason`` and ``usage``; ``received_finish_reason``; ``aclose()``), and it
raises errors the adapter classifies the same way (a status code, a retry-after header,
class names for a context window or content policy refusal), so retries, drafts on a
broken stream and every message stay the adapter's (:mod:`rolecall.llm.litellm_model`).
"""

from __future__ import annotations

import asyncio
import json
from types import SimpleNamespace
from typing import Any, Final

import aiohttp

__all__ = ["HTTPStatusError", "LeanStream", "aclose", "acompletion"]

DEFAULT_BASE: Final = "https://api.openai.com/v1"
_sessions: dict[int, aiohttp.ClientSession] = {}  # one per event loop (by its id)


class HTTPStatusError(Exception):
    """The provider answered a status other than 200: its code, words and headers."""

    def __init__(self, status_code: int, message: str, response: aiohttp.ClientResponse) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.response = response


class ContextWindowExceededError(HTTPStatusError):
    """HTTP 400 with ``context_length_exceeded`` (named as litellm names it)."""


class ContentPolicyViolationError(HTTPStatusError):
    """HTTP 400 with ``content_policy_violation`` (named as litellm names it)."""


def _session() -> aiohttp.ClientSession:
    loop = id(asyncio.get_running_loop())
    session = _sessions.get(loop)
    if session is None or session.closed:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        session = _sessions[loop] = aiohttp.ClientSession(connector=connector)
    return session


async def aclose() -> None:
    """Close this event loop's client (shutdown, and tests running several loops)."""
    session = _sessions.pop(id(asyncio.get_running_loop()), None)
    if session is not None:
        await session.close()


class LeanStream:
    """The chunks of one streamed reply, as the adapter reads litellm's."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.received_finish_reason: str | None = None
        # a 200 that is not an event stream (an HTML page) yields nothing: the adapter
        # then reports "not an event stream?" and retries
        kind = response.headers.get("Content-Type", "")
        self._stream = "text/event-stream" in kind or not kind

    def __aiter__(self) -> LeanStream:
        return self

    async def __anext__(self) -> Any:
        if not self._stream:
            raise StopAsyncIteration
        try:
            while True:
                raw = await self.response.content.readline()
                if not raw:
                    raise StopAsyncIteration
                line = raw.decode("utf-8").strip()
                if not line.startswith("data:"):
                    continue  # comments, event names, blank separators
                data = line[5:].strip()
                if data == "[DONE]":
                    raise StopAsyncIteration
                return self._chunk(json.loads(data))
        except aiohttp.ClientError as exc:
            raise _connection_error(exc) from exc

    def _chunk(self, chunk: dict[str, Any]) -> Any:
        choices = [
            SimpleNamespace(
                delta=SimpleNamespace(
                    content=(c.get("delta") or {}).get("content"),
                    tool_calls=(c.get("delta") or {}).get("tool_calls"),  # pieces, as dicts
                ),
                finish_reason=c.get("finish_reason"),
            )
            for c in chunk.get("choices") or ()
        ]
        for choice in choices:
            if choice.finish_reason:
                self.received_finish_reason = choice.finish_reason
        return SimpleNamespace(choices=choices, usage=chunk.get("usage"))

    async def aclose(self) -> None:
        self.response.release()


def _connection_error(exc: aiohttp.ClientError) -> Exception:
    """aiohttp's transport errors as the adapter knows them: timeouts and lost connections."""
    if isinstance(exc, asyncio.TimeoutError | aiohttp.ServerTimeoutError):
        return TimeoutError(str(exc) or "timed out")
    return ConnectionError(str(exc) or type(exc).__name__)


async def acompletion(
    *,
    model: str,
    messages: list[dict[str, str]],
    stream: bool = True,
    stream_options: dict[str, Any] | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 (litellm.acompletion's argument, per request)
    max_retries: int = 0,
    temperature: float | None = None,
    max_tokens: int | None = None,
    api_base: str | None = None,
    api_key: str | None = None,
    tools: list[dict[str, Any]] | None = None,
) -> LeanStream:
    """Start one streamed chat completion; the arguments are ``litellm.acompletion``'s."""
    body: dict[str, Any] = {
        "model": model.removeprefix("openai/"),
        "messages": messages,
        "stream": True,
    }
    if stream_options:
        body["stream_options"] = stream_options
    if temperature is not None:
        body["temperature"] = temperature
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if tools:
        body["tools"] = tools
    # one connection per request: httpcore's pool looks at every pooled connection for
    # every request, which costs more than a loopback connect once a hundred sessions
    # keep one each (measured: 17 ms against 3 ms of CPU a reply)
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    url = (api_base or DEFAULT_BASE).rstrip("/") + "/chat/completions"
    limit = aiohttp.ClientTimeout(total=None, connect=timeout, sock_read=timeout)
    try:
        response = await _session().post(url, json=body, headers=headers, timeout=limit)
    except aiohttp.ClientError as exc:
        raise _connection_error(exc) from exc
    if response.status != 200:
        try:
            text = (await response.read()).decode("utf-8", "replace")
        finally:
            response.release()
        raise _status_error(response, text)
    return LeanStream(response)


def _status_error(response: aiohttp.ClientResponse, text: str) -> HTTPStatusError:
    message, code = text.strip() or (response.reason or ""), ""
    try:
        error = json.loads(text).get("error") or {}
        message = str(error.get("message") or message)
        code = str(error.get("code") or error.get("type") or "")
    except (ValueError, AttributeError):
        pass
    status = response.status
    message = f"Error code: {status} - {message}"
    if status == 400 and "context_length_exceeded" in code:
        return ContextWindowExceededError(status, message, response)
    if status == 400 and "content_policy" in code:
        return ContentPolicyViolationError(status, message, response)
    return HTTPStatusError(status, message, response)
