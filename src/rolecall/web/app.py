"""The web view's ASGI application (Starlette) and the token check.

With a token (required for a non-loopback host), every request must carry it: the
cookie that ``/?token=T`` sets, or ``Authorization: Bearer T``; anything else gets 401.
"""

from __future__ import annotations

import hmac
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from rolecall.web import api_routes as api
from rolecall.web import branches, compare, forks, library, pages
from rolecall.web.context import WebContext
from rolecall.web.guard import RequestGuard

COOKIE = "rolecall_token"
STATIC = Path(__file__).parent / "static"


class TokenCheck:
    """Pure ASGI middleware (a streamed SSE response passes through untouched)."""

    def __init__(self, app: ASGIApp, token: str | None) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        token = self.token
        if token is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        given = request.query_params.get("token")
        response: Response | None = None
        if given is not None and hmac.compare_digest(given.encode(), token.encode()):
            # a path of its own only: the redirect never leaves this server
            rest = request.url.remove_query_params("token")
            # (one leading slash: `//host/` would be another server's address)
            target = "/" + rest.path.lstrip("/") + (f"?{rest.query}" if rest.query else "")
            response = RedirectResponse(target, 303)
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        else:
            sent = request.cookies.get(COOKIE) or ""
            header = request.headers.get("authorization", "")
            if header.lower().startswith("bearer "):
                sent = header[7:]
            if not hmac.compare_digest(sent.encode(), token.encode()):
                response = PlainTextResponse(
                    "401: this rolecall web view needs its token (open /?token=T once)\n", 401
                )
        if response is not None:
            await response(scope, receive, send)
        else:
            await self.app(scope, receive, send)


TITLES = {
    400: "Bad request",
    403: "Not allowed",
    404: "Not found",
    408: "Request timed out",
    409: "Cannot do that now",
    413: "Too large",
    415: "Wrong kind of body",
    421: "Wrong host name",
    422: "Cannot do that",
}


def error_title(status: int) -> str:
    """An error page's title (and its heading), by its status."""
    return TITLES.get(status, "Cannot do that")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": exc.detail}, status_code=exc.status_code)
    ctx = WebContext.of(request)
    return ctx.page(
        request,
        "error.html",
        status_code=exc.status_code,
        message=exc.detail,
        title=error_title(exc.status_code),
    )


def create_app(ctx: WebContext, host: str = "127.0.0.1") -> Starlette:
    """The application for a server listening on ``host`` (the host names it answers to)."""
    routes = [
        Route("/", pages.sessions),
        Route("/start", pages.start_form, methods=["GET", "POST"]),
        Route("/roles", library.roles_page),
        Route("/compare", compare.compare_page),
        Route("/s/{sid}", pages.session),
        Route("/s/{sid}/flow", pages.session_flow),
        Route("/s/{sid}/forks", forks.fork_tree),
        Route("/s/{sid}/m/{mid}", pages.message_fragment),
        Route("/s/{sid}/fork", branches.fork_message, methods=["POST"]),
        Route("/s/{sid}/export.{fmt}", pages.export_file),
        Route("/w/{world}/flow", pages.world_flow, methods=["GET", "POST"]),
        Route("/api/sessions", api.list_sessions),
        Route("/api/sessions", api.create_session, methods=["POST"]),
        Route("/api/sessions/{sid}", api.get_session),
        Route("/api/sessions/{sid}/events", api.get_events),
        Route("/api/sessions/{sid}/stream", api.stream),
        Route("/api/sessions/{sid}/say", api.say, methods=["POST"]),
        Route("/api/sessions/{sid}/control", api.control, methods=["POST"]),
        Route("/api/sessions/{sid}/approvals", api.waiting),
        Route("/api/sessions/{sid}/approve", api.approve, methods=["POST"]),
        Route("/api/sessions/{sid}/flag", api.flag, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(STATIC)), name="static"),
    ]
    app = Starlette(
        routes=routes,
        # outermost first: the host and origin checks come before the token's
        middleware=[Middleware(RequestGuard, host=host), Middleware(TokenCheck, token=ctx.token)],
        exception_handlers={HTTPException: _http_error},
    )
    app.state.ctx = ctx
    return app
