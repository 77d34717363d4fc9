"""A tiny OpenAI-compatible chat-completions server for tests (loopback only).

It listens on 127.0.0.1 on an ephemeral port and answers ``POST /v1/chat/completions``
with Server-Sent Events sent in chunked transfer encoding. What it does for each
request is taken from a queue of behaviours (``server.queue(...)``); when the queue is
empty it streams :data:`DEFAULT_REPLY`. Every request is recorded (path, JSON body,
Authorization header) so tests can assert what the client sent.

Behaviours:

* :class:`Reply` — stream text word by word, then a usage chunk and ``[DONE]``.
* :class:`Status` — answer an HTTP status with an OpenAI-style JSON error body.
* :class:`Stall` — accept the request, say nothing for N seconds, then run ``then``.
* :class:`Break` — stream some words, then drop the connection mid-body.
* :class:`Garbage` — stream some words (maybe none), then lines that are not JSON.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DEFAULT_REPLY = "Hello from the test server."


@dataclass(frozen=True)
class Reply:
    """Stream ``text`` word by word; finish with a usage chunk and ``[DONE]``."""

    text: str = DEFAULT_REPLY
    prompt_tokens: int = 11
    completion_tokens: int = 7
    send_usage: bool = True
    delay: float = 0.0  # seconds before each chunk
    stall_after: int | None = None  # after this many words, say nothing for ``stall``
    stall: float = 0.0
    finish_reason: str = "stop"  # "length": the reply was cut at max_tokens
    # as a real server: stop before the first of the request's ``stop`` sequences
    honour_stop: bool = True


@dataclass(frozen=True)
class Status:
    """Answer ``code`` with an OpenAI-style JSON error body (no stream)."""

    code: int
    message: str = "error from the test server"
    type: str = "server_error"
    headers: tuple[tuple[str, str], ...] = ()  # extra response headers (Retry-After)


@dataclass(frozen=True)
class Stall:
    """Read the request, then say nothing for ``seconds`` (interrupted by shutdown)."""

    seconds: float
    then: Behaviour | None = None


@dataclass(frozen=True)
class Break:
    """Stream ``text`` word by word, then close the socket without ending the body."""

    text: str = "This stream will"


@dataclass(frozen=True)
class Garbage:
    """Stream ``text`` word by word (may be empty), then ``lines`` that are not JSON."""

    text: str = ""
    lines: tuple[str, ...] = ("data: this is not json {{{",)


@dataclass(frozen=True)
class Truncated:
    """Stream ``text`` word by word, then end the body cleanly: no finish reason, no
    ``[DONE]`` (a proxy that cut the reply short)."""

    text: str = "This reply was cut"


@dataclass(frozen=True)
class Html:
    """HTTP 200 with a ``text/html`` page instead of an event stream (a captive portal)."""

    body: str = "<html><body>Please log in to continue</body></html>"


@dataclass(frozen=True)
class ToolCalls:
    """Stream tool calls as OpenAI does: per call a first delta with its index, id and
    name, then its arguments' JSON text in pieces of ``piece`` characters; finish reason
    ``tool_calls``, usage, ``[DONE]``. ``calls``: (name, arguments JSON text) pairs."""

    calls: tuple[tuple[str, str], ...]
    piece: int = 5
    prompt_tokens: int = 13
    completion_tokens: int = 5


Behaviour = Reply | Status | Stall | Break | Garbage | Truncated | Html | ToolCalls


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    body: dict[str, Any]
    authorization: str | None


def words(text: str) -> list[str]:
    """Split ``text`` into pieces that concatenate back to it (each keeps its space)."""
    pieces: list[str] = []
    current = ""
    for ch in text:
        current += ch
        if ch == " ":
            pieces.append(current)
            current = ""
    if current:
        pieces.append(current)
    return pieces


@dataclass
class _State:
    behaviours: deque[Behaviour] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""

    # -- request ----------------------------------------------------------------------

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": "not found", "type": "invalid_request"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else {}
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        state = self.server.state
        with state.lock:
            state.requests.append(
                RecordedRequest(
                    path=self.path,
                    body=body,
                    authorization=self.headers.get("Authorization"),
                )
            )
            behaviour: Behaviour = state.behaviours.popleft() if state.behaviours else Reply()
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send_json(404, {"error": {"message": "no such route", "type": "invalid_request"}})
            return
        self.current = body
        try:
            self._run(behaviour, model=str(body.get("model", "test-model")))
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True

    def _body(self) -> dict[str, Any]:
        """The JSON body of the request being answered."""
        return getattr(self, "current", {})

    def _cap(self) -> int | None:
        """The request's reply cap (``max_tokens`` or ``max_completion_tokens``)."""
        body = self._body()
        cap = body.get("max_tokens", body.get("max_completion_tokens"))
        return cap if isinstance(cap, int) else None

    def _stops(self) -> list[str]:
        stop = self._body().get("stop") or []
        return [stop] if isinstance(stop, str) else [s for s in stop if isinstance(s, str)]

    def _stall(self, seconds: float) -> bool:
        """Wait; True (and the connection is to be dropped) if the server is stopping."""
        if self.server.state.stopping.wait(seconds):
            self.close_connection = True
            return True
        return False

    def _run(self, behaviour: Behaviour, *, model: str) -> None:
        if isinstance(behaviour, Stall):
            if self._stall(behaviour.seconds):
                return
            if behaviour.then is not None:
                self._run(behaviour.then, model=model)
            else:
                self.close_connection = True
            return
        if isinstance(behaviour, Status):
            err = {"message": behaviour.message, "type": behaviour.type, "code": behaviour.code}
            self._send_json(behaviour.code, {"error": err}, behaviour.headers)
            return
        if isinstance(behaviour, ToolCalls):
            self._start_stream()
            for index, (name, arguments) in enumerate(behaviour.calls):
                first = {"index": index, "id": f"call_{index}", "type": "function"}
                first["function"] = {"name": name, "arguments": ""}
                self._event(_chunk(model, {"tool_calls": [first]}))
                for at in range(0, len(arguments), behaviour.piece):
                    more = {
                        "index": index,
                        "function": {"arguments": arguments[at : at + behaviour.piece]},
                    }
                    self._event(_chunk(model, {"tool_calls": [more]}))
            self._event(_chunk(model, {}, finish_reason="tool_calls"))
            usage = {
                "prompt_tokens": behaviour.prompt_tokens,
                "completion_tokens": behaviour.completion_tokens,
                "total_tokens": behaviour.prompt_tokens + behaviour.completion_tokens,
            }
            self._event(_chunk(model, None, usage=usage))
            self._event("[DONE]")
            self._end_stream()
            return
        if isinstance(behaviour, Reply):
            self._start_stream()
            text, finish, completion = behaviour.text, behaviour.finish_reason, None
            if behaviour.honour_stop:
                at = min((text.find(s) for s in self._stops() if s in text), default=-1)
                if at >= 0:
                    text = text[:at]
            pieces = words(text)
            cap = self._cap()
            if cap is not None and len(pieces) > cap:  # a word a token, as a server counts
                pieces, finish, completion = pieces[:cap], "length", cap
            for index, piece in enumerate(pieces):
                if behaviour.stall_after == index and self._stall(behaviour.stall):
                    return
                if behaviour.delay and self._stall(behaviour.delay):
                    return
                self._event(_chunk(model, {"content": piece}))
            self._event(_chunk(model, {}, finish_reason=finish))
            if behaviour.send_usage:
                done = behaviour.completion_tokens if completion is None else completion
                usage = {
                    "prompt_tokens": behaviour.prompt_tokens,
                    "completion_tokens": done,
                    "total_tokens": behaviour.prompt_tokens + done,
                }
                self._event(_chunk(model, None, usage=usage))
            self._event("[DONE]")
            self._end_stream()
            return
        if isinstance(behaviour, Truncated):
            self._start_stream()
            for piece in words(behaviour.text):
                self._event(_chunk(model, {"content": piece}))
            self._end_stream()
            return
        if isinstance(behaviour, Html):
            data = behaviour.body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            return
        if isinstance(behaviour, Break):
            self._start_stream()
            for piece in words(behaviour.text):
                self._event(_chunk(model, {"content": piece}))
            self.wfile.flush()
            self.server.state.stopping.wait(0.05)  # let the client read it before the drop
            self.close_connection = True
            with contextlib.suppress(OSError):
                self.connection.shutdown(socket.SHUT_RDWR)
            return
        # Garbage
        self._start_stream()
        for piece in words(behaviour.text):
            self._event(_chunk(model, {"content": piece}))
        for line in behaviour.lines:
            self._write_chunk((line + "\n\n").encode())
        self._event("[DONE]")
        self._end_stream()

    # -- writing ----------------------------------------------------------------------

    def _send_json(
        self, code: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = ()
    ) -> None:
        data = json.dumps(payload).encode()
        self.send_response(code)
        for name, value in headers:
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()

    def _write_chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, payload: dict[str, Any] | str) -> None:
        text = payload if isinstance(payload, str) else json.dumps(payload)
        self._write_chunk(f"data: {text}\n\n".encode())

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


def _chunk(
    model: str,
    delta: dict[str, Any] | None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
) -> dict[str, Any]:
    choices: list[dict[str, Any]] = []
    if delta is not None:
        choices.append({"index": 0, "delta": delta, "finish_reason": finish_reason})
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "choices": choices,
        "usage": usage,
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 256  # the listen backlog: a hundred clients connect at once

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.state = _State()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Clients dropping connections is what these tests do; stay quiet about it."""
        if isinstance(sys.exc_info()[1], OSError):
            return
        super().handle_error(request, client_address)


class OpenAITestServer:
    """Start with :meth:`start` (or use as a context manager); stop with :meth:`stop`."""

    def __init__(self) -> None:
        self._server = _Server()
        self._thread = threading.Thread(
            target=self._server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name="openai-test-server",
            daemon=True,
        )

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """The ``api_base`` to give a client: ``http://127.0.0.1:<port>/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        with self._server.state.lock:
            return list(self._server.state.requests)

    def reset(self) -> None:
        """Forget queued behaviours and recorded requests."""
        with self._server.state.lock:
            self._server.state.behaviours.clear()
            self._server.state.requests.clear()

    def queue(self, *behaviours: Behaviour) -> None:
        """Append behaviours, used one per incoming request, in order."""
        with self._server.state.lock:
            self._server.state.behaviours.extend(behaviours)

    def start(self) -> OpenAITestServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.state.stopping.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)

    def __enter__(self) -> OpenAITestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
