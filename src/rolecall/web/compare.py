"""The compare page (docs/compare.md): two or more sessions picked from the list, side
by side, and where the first two first differ, as ``rolecall compare`` shows them."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response

from rolecall.compare.load import compare_sessions
from rolecall.errors import UsageError
from rolecall.paths import safe_id
from rolecall.web.context import WebContext

MAX_COMPARED = 12  # a page with more columns than this reads no better


async def compare_page(request: Request) -> Response:
    ctx = WebContext.of(request)
    picked = list(dict.fromkeys(request.query_params.getlist("s")))
    if len(picked) < 2:
        return ctx.page(
            request,
            "error.html",
            status_code=400,
            title="Pick two sessions",
            message="Compare needs two or more sessions: tick them in the list, then "
            f"Compare ({len(picked)} picked).",
        )
    if len(picked) > MAX_COMPARED:
        return ctx.page(
            request,
            "error.html",
            status_code=400,
            title="Too many sessions",
            message=f"Compare shows at most {MAX_COMPARED} sessions at once "
            f"({len(picked)} picked).",
        )
    try:
        ids = [safe_id(s, "session id") for s in picked]
        result = await compare_sessions(ctx.store, ids)
    except UsageError as exc:
        return ctx.page(
            request, "error.html", status_code=404, title="No such session", message=str(exc)
        )
    return ctx.page(
        request,
        "compare.html",
        runs=result["runs"],
        compared=result["compared"],
        diff=result["difference"],
    )
