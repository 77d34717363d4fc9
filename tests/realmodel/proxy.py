"""A recording proxy between rolecall and the real model's server (127.0.0.1 only).

It forwards every request unchanged and streams every reply back unchanged, and keeps
what a test needs to check the runtime against the server itself: each chat request's
body (its ``max_tokens``, messages, stop sequences), the usage the server reported for
it, and how many requests were in flight at once (one speaker at a time means never
more than one).
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Exchange:
    """One chat completion as the proxy saw it."""

    body: dict[str, Any]
    usage: dict[str, Any] | None = None
    finish_reason: str | None = None
    status: int = 0
    text: str = ""  # the streamed reply text, as the server sent it
    closed_by_client: bool = False  # rolecall stopped reading before the reply ended
    pieces: int = 0  # streamed text deltas: llama.cpp's server sends one per token
    ended: bool = False  # its reply relayed to the end (or its relay over)


@dataclass
class Record:
    exchanges: list[Exchange] = field(default_factory=list)
    in_flight: int = 0
    most_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def clear(self) -> None:
        with self.lock:
            self.exchanges.clear()
            self.most_in_flight = 0


class RecordingProxy:
    """Serves on 127.0.0.1 at a free port; ``base_url`` is the upstream's, proxied."""

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        self.upstream_host = parts.hostname or "127.0.0.1"
        self.upstream_port = parts.port or 80
        self.record = Record()
        record, host, port = self.record, self.upstream_host, self.upstream_port

        def ended(exchange: Exchange) -> None:
            with record.lock:
                if not exchange.ended:
                    exchange.ended = True
                    record.in_flight -= 1

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def do_GET(self) -> None:
                self._forward(None)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self._forward(self.rfile.read(length))

            def _forward(self, payload: bytes | None) -> None:
                exchange: Exchange | None = None
                if payload is not None and self.path.endswith("/chat/completions"):
                    exchange = Exchange(body=json.loads(payload))
                    with record.lock:
                        record.exchanges.append(exchange)
                        record.in_flight += 1
                        record.most_in_flight = max(record.most_in_flight, record.in_flight)
                try:
                    self._relay(payload, exchange)
                finally:
                    if exchange is not None:
                        ended(exchange)

            def _relay(self, payload: bytes | None, exchange: Exchange | None) -> None:
                upstream = http.client.HTTPConnection(host, port, timeout=300)
                headers = {
                    k: v
                    for k, v in self.headers.items()
                    if k.lower() not in ("host", "content-length", "connection")
                }
                upstream.request(self.command, self.path, body=payload, headers=headers)
                reply = upstream.getresponse()
                self.send_response(reply.status)
                for key, value in reply.getheaders():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                if exchange is not None:
                    exchange.status = reply.status
                buffer = b""
                try:
                    while chunk := reply.read1(65536):
                        if exchange is not None:
                            buffer += chunk
                        if exchange is not None and b"data: [DONE]" in buffer[-64:]:
                            # the reply is over with its end, marked before it is relayed
                            # (rolecall may send its next request the moment it reads it);
                            # the server's closing of the connection after it is no
                            # request in flight
                            ended(exchange)
                        self.wfile.write(chunk)
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    # the client closed the stream (reply hygiene cut the reply): the
                    # server's usage never reaches it, and the server stops generating
                    if exchange is not None:
                        exchange.closed_by_client = True
                finally:
                    upstream.close()
                if exchange is not None:
                    _read_reply(exchange, buffer.decode("utf-8", "replace"))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> RecordingProxy:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


def _read_reply(exchange: Exchange, raw: str) -> None:
    """Usage, finish reason and text of a streamed (SSE) or plain JSON reply."""
    if not exchange.body.get("stream"):
        try:
            doc = json.loads(raw)
        except ValueError:
            return
        exchange.usage = doc.get("usage")
        choice = (doc.get("choices") or [{}])[0]
        exchange.finish_reason = choice.get("finish_reason")
        exchange.text = (choice.get("message") or {}).get("content") or ""
        return
    for line in raw.splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            continue
        try:
            doc = json.loads(data)
        except ValueError:
            continue
        if doc.get("usage"):
            exchange.usage = doc["usage"]
        for choice in doc.get("choices") or ():
            piece = (choice.get("delta") or {}).get("content") or ""
            exchange.text += piece
            exchange.pieces += 1 if piece else 0
            if choice.get("finish_reason"):
                exchange.finish_reason = choice["finish_reason"]
