"""What every request passes before a page or the API sees it (web.md, "Safety").

- **Host** (DNS rebinding): the ``Host`` header must name this server: the address it
  listens on, and for a loopback address ``localhost``, ``127.0.0.1`` and ``[::1]``; a
  server listening on every address (``0.0.0.0``, ``::``) takes an IP address or this
  machine's own name. Anything else is a 421.
- **Cross-site requests**: a POST from a page of another origin (another host name,
  another port of the same address) is refused with 403 before it is read. Browsers say
  where a request comes from (``Sec-Fetch-Site``, else ``Origin``); a request that says
  neither (curl, scripts) is not a browser's and goes on.
- **Bodies**: at most :data:`MAX_BODY` bytes (413), sent within the request timeout (408);
  the JSON API takes only ``application/json`` (415), which a page of another site
  cannot send without the server's consent.
- **Headers** on every answer: a Content-Security-Policy (scripts, styles, fetches only
  from this server; no frames), ``X-Frame-Options: DENY``, ``X-Content-Type-Options:
  nosniff``, ``Referrer-Policy: no-referrer``.
"""

from __future__ import annotations

import ipaddress
import os
import socket
from urllib.parse import urlsplit

import anyio
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["MAX_BODY", "RequestGuard", "allowed_hosts", "request_timeout"]

MAX_BODY = 1024 * 1024  # a message, a flow form: far below this
TIMEOUT_ENV = "ROLECALL_WEB_REQUEST_TIMEOUT"
DEFAULT_TIMEOUT = 10.0

# the pages' own script and stylesheet only; the role colours are style attributes
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; "
    "style-src-attr 'unsafe-inline'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
# an HTML export is a document of its own (its style inline), still unable to run anything
EXPORT_CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; sandbox"
HEADERS = [
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
UNSAFE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def request_timeout() -> float:
    """Seconds a client has to send a request's headers, and then its body."""
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT
    except ValueError:
        return DEFAULT_TIMEOUT
    return value if value > 0 else DEFAULT_TIMEOUT


def _bare(host: str) -> str:
    return host.strip().strip("[]").lower()


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def allowed_hosts(bound: str) -> frozenset[str] | None:
    """The host names a server listening on ``bound`` answers to (bare, lower case);
    None for a server on every address (then any IP address, or this machine's name)."""
    host = _bare(bound)
    if host in ("0.0.0.0", "::", ""):
        return None
    names = {host}
    loopback = host == "localhost"
    if not loopback and _is_ip(host):
        loopback = ipaddress.ip_address(host).is_loopback
    if loopback:
        names |= {"localhost", "127.0.0.1", "::1"}
    return frozenset(names)


def _machine_names() -> frozenset[str]:
    names = {"localhost"}
    for name in (socket.gethostname(), socket.getfqdn()):
        if name:
            names.add(name.lower())
    return frozenset(names)


def _host_name(header: str) -> str:
    """The name in a Host header, without its port (``[::1]:8765`` -> ``::1``)."""
    try:
        parsed = urlsplit("//" + header)
        return (parsed.hostname or "").lower()
    except ValueError:
        return ""


def _json_type(headers: Headers) -> bool:
    kind = headers.get("content-type", "").split(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


class RequestGuard:
    """Pure ASGI middleware (a streamed SSE answer passes through untouched)."""

    def __init__(self, app: ASGIApp, host: str) -> None:
        self.app = app
        self.hosts = allowed_hosts(host)
        self.machine = _machine_names() if self.hosts is None else frozenset()
        self.timeout = request_timeout()

    def host_allowed(self, header: str) -> bool:
        name = _host_name(header)
        if not name:
            return False
        if self.hosts is not None:
            return name in self.hosts
        return _is_ip(name) or name in self.machine

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        path: str = scope["path"]
        csp = EXPORT_CSP if path.endswith("/export.html") else CSP

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                extra = [(b"content-security-policy", csp.encode()), *HEADERS]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send_with_headers)
            return
        await self.app(scope, self._limited(receive, headers), send_with_headers)

    def _refusal(self, scope: Scope, headers: Headers) -> Response | None:
        path: str = scope["path"]
        api = path.startswith("/api/")
        host = headers.get("host", "")
        if not self.host_allowed(host):
            return _answer(
                api,
                421,
                f"this rolecall web view does not answer to the host name {host!r}: "
                "open it by the address it printed",
            )
        if scope["method"] not in UNSAFE_METHODS:
            return None
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        if site is not None:
            foreign = site not in ("same-origin", "none")
        elif origin is not None:
            foreign = origin.lower() != f"{scope.get('scheme', 'http')}://{host}".lower()
        else:
            foreign = False  # not a browser: curl, a script
        if foreign:
            return _answer(
                api,
                403,
                f"a page of another site ({origin or site}) cannot change anything here: "
                "use this server's own pages",
            )
        if api and not _json_type(headers):
            kind = headers.get("content-type") or "a body without a type"
            return _answer(api, 415, f"the API takes application/json, not {kind}")
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > MAX_BODY):
            return _answer(api, 413, f"the body is larger than {MAX_BODY} bytes")
        return None

    def _limited(self, receive: Receive, headers: Headers) -> Receive:
        """``receive`` that refuses a body over :data:`MAX_BODY` (413) or one not sent
        within the timeout (408); once the body is read, it waits as long as it takes
        (an SSE stream waits for its viewer to leave)."""
        state = {"read": 0, "done": False}
        deadline = anyio.current_time() + self.timeout

        async def guarded() -> Message:
            if state["done"]:
                return await receive()
            with anyio.move_on_after(max(0.0, deadline - anyio.current_time())) as scope:
                message = await receive()
            if scope.cancelled_caught:
                raise HTTPException(408, "the request's body did not arrive in time")
            if message["type"] == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > MAX_BODY:
                    raise HTTPException(413, f"the body is larger than {MAX_BODY} bytes")
                if not message.get("more_body", False):
                    state["done"] = True
            else:
                state["done"] = True
            return message

        return guarded


def _answer(api: bool, status: int, message: str) -> Response:
    if api:
        return JSONResponse({"error": message}, status_code=status)
    return PlainTextResponse(f"{status}: {message}\n", status_code=status)
