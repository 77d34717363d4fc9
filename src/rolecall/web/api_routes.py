"""The JSON API and the Server-Sent Events stream (web.md).

``GET /api/sessions`` (the list, with the page's filters as query parameters),
``GET /api/sessions/<id>``, ``GET /api/sessions/<id>/events?after=SEQ`` (a JSON array
of events in the format of events.md), ``GET /api/sessions/<id>/stream`` (SSE: one
``message`` per event, its ``id`` the event's seq, so a reconnecting browser resumes
after the last one it got), ``POST /api/sessions`` (start a world: 201 and
``{"session_id": ...}``), ``POST /api/sessions/<id>/say``, ``.../control`` and
``.../flag``; ``GET /api/sessions/<id>/approvals`` (the tool calls waiting for a person) and
``POST /api/sessions/<id>/approve`` (``{"call_id", "decision": "allow"|"deny",
"arguments"}``: Approve or Deny, tools.md).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from sse_starlette.sse import EventSourceResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from rolecall.errors import RolecallError
from rolecall.paths import data_dir_flag, db_path
from rolecall.storage.browse import STATUSES, browse, events_after, rows_of, state_of
from rolecall.storage.catalog import SessionSummary
from rolecall.web.context import WebContext
from rolecall.web.live import STATE_SEQ, follow_store
from rolecall.web.runs import LiveRun

MAX_LIST = 500
MAX_FLAG = 80  # characters of a flag's name
MAX_NUMBER = 2**62  # a seq or an offset beyond any session (SQLite's integers are 64-bit)


def whole(raw: str, name: str) -> int:
    """A query parameter that is a whole number, from 0 to :data:`MAX_NUMBER` (a larger
    one means "past the end"); a 400 naming it for anything else."""
    try:
        value = int(raw)
    except ValueError:
        shown = raw if len(raw) <= 40 else raw[:39] + "…"
        raise HTTPException(400, f"{name} must be a whole number, got {shown!r}") from None
    return min(MAX_NUMBER, max(0, value))


async def list_sessions(request: Request) -> Response:
    ctx = WebContext.of(request)
    q = request.query_params
    status = q.get("status")
    limit = min(MAX_LIST, max(1, whole(q.get("limit", "50"), "limit")))
    offset = whole(q.get("offset", "0"), "offset")
    found = await browse(
        ctx.store,
        search=q.get("q") or None,
        world=q.get("world") or None,
        status=status if status in STATUSES else None,
        batch=q.get("batch") or None,
        limit=limit,
        offset=offset,
    )
    # each one as `rolecall sessions list --json` prints it (storage.catalog.SessionSummary)
    rows = await rows_of(ctx.store, [r.id for r in found.rows])
    listed = [SessionSummary.of(rows[r.id]).model_dump() for r in found.rows if r.id in rows]
    return JSONResponse({"total": found.total, "sessions": listed})


async def get_session(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    doc = await ctx.document(sid)
    body = json.loads(doc.model_dump_json(exclude={"events", "memory"}))
    following = ctx.runs.get(sid) is None and doc.state.state != "finished"
    feed = await ctx.feed(sid) if following else None
    body["live"] = ctx.runs.get(sid) is not None or (feed is not None and feed.live)
    return JSONResponse(body)


async def _lines_after(ctx: WebContext, sid: str, after: int) -> list[tuple[int, str]]:
    live = ctx.runs.get(sid)
    if live is not None:
        # what is stored (a session the server reopened has only its newer events in
        # memory), then what the live log holds past it (a turn not stored yet)
        stored = await events_after(ctx.store, sid, after)
        return stored + live.events.after(stored[-1][0] if stored else after)
    if await state_of(ctx.store, sid) is None:
        feed = await ctx.feed(sid)
        if feed is None:
            raise HTTPException(404, f"no session {sid!r}")
        return feed.events.after(after)
    return await events_after(ctx.store, sid, after)


def _after(request: Request) -> int:
    raw = request.query_params.get("after") or request.headers.get("last-event-id") or "0"
    return whole(raw, "after (a seq number)")


async def get_events(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    lines = await _lines_after(ctx, sid, _after(request))
    body = "[" + ",".join(line for _, line in lines) + "]"
    return Response(body, media_type="application/json")


async def stream(request: Request) -> Response:
    """The session's events as SSE, from ``after`` (or Last-Event-ID) on, until it ends."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    after = _after(request)
    live = ctx.runs.get(sid)
    state = await state_of(ctx.store, sid) if live is None else None
    # with --nats, a session not finished here streams from the cluster, chunk by chunk
    feed = await ctx.feed(sid) if live is None and state != "finished" else None
    if live is None and state is None and feed is None:
        raise HTTPException(404, f"no session {sid!r}")

    # a finished session (one this server ran and let go, too) streams its whole history,
    # chunks and all, as the session it ran streamed it; one another process runs now is
    # followed message by message
    streamed = state == "finished"

    async def fetch(seq: int) -> tuple[list[tuple[int, str]], bool]:
        lines = await events_after(ctx.store, sid, seq, streamed=streamed)
        return lines, await state_of(ctx.store, sid) in ("running", "created")

    async def events() -> AsyncIterator[dict[str, Any]]:
        if live is not None:
            # a reopened session's log starts where it was reopened: the store has the rest
            lines = live.events.lines
            start = after
            if not lines or lines[0][0] > after + 1:
                for seq, line in await events_after(ctx.store, sid, after):
                    if lines and seq >= lines[0][0]:
                        break
                    start = seq
                    yield {"id": str(seq), "data": line}
            # with what it does now (a turn, a call waiting, a chat waiting for you)
            # whenever that changes: the page's status, its Retry
            source = live.events.follow(start, until=live.at_rest, watch=live.shown_state)
        elif feed is not None:
            source = feed.events.follow(after)
        else:
            source = follow_store(fetch, after)
        async for seq, line in source:
            if seq == STATE_SEQ:
                yield {"event": "rest", "data": line}
                continue
            yield {"id": str(seq), "data": line}
        yield {"event": "end", "data": "{}"}

    return EventSourceResponse(events(), ping=15, send_timeout=30)


async def start_session(
    ctx: WebContext, world: str, topic: str | None, model: str | None
) -> LiveRun:
    from rolecall.api.entry import load_world

    if not world:
        from rolecall.errors import UsageError

        raise UsageError("pick a world to start")
    loaded = load_world(_world_spec(ctx, world), data_dir=ctx.data_dir)
    return await ctx.runs.start(loaded, topic=topic, model=model)


def _world_spec(ctx: WebContext, world: str) -> str:
    """The world.yaml of a world the server lists (local or shipped): by its name, or by
    the path of its folder or its world.yaml. Any other path is not a world here (the
    server would read any file it can, and show its keys in the error)."""
    from rolecall.errors import UsageError
    from rolecall.world import catalog

    found = catalog.find(world, ctx.worlds_dir)
    if found is not None:
        return str(found)
    listed = catalog.available(ctx.worlds_dir)
    try:
        given = Path(world).expanduser().resolve()
    except (OSError, RuntimeError, ValueError):
        given = None
    for entry in listed:
        if given is not None and given in (entry.path.resolve(), entry.path.parent.resolve()):
            return str(entry.path)
    names = ", ".join(entry.name for entry in listed)
    shown = world if len(world) <= 60 else world[:59] + "…"
    raise UsageError(
        f"no world named {shown!r} here (the worlds: {names}; a path must be one of their folders)"
    )


class _Body(BaseModel):
    """A JSON body: every field of its type (no coercion), no field it does not have."""

    model_config = ConfigDict(extra="forbid", strict=True)


class StartBody(_Body):
    """``POST /api/sessions``."""

    world: str
    topic: str | None = None
    model: str | None = None


class SayBody(_Body):
    """``POST /api/sessions/<id>/say``; ``audience``: the role ids it is for (only they
    and the human see it: audiences.md), or null/absent for everyone."""

    text: str
    audience: list[str] | None = None


class ControlBody(_Body):
    """``POST /api/sessions/<id>/control``."""

    action: Literal["pause", "resume", "next", "stop"]


class ApproveBody(_Body):
    """``POST /api/sessions/<id>/approve``: a person's answer to a waiting tool call;
    ``arguments`` (allow only) replace the ones the model gave."""

    call_id: str
    decision: Literal["allow", "deny"]
    arguments: dict[str, Any] | None = None


class FlagBody(_Body):
    """``POST /api/sessions/<id>/flag``: a flag for ``{flag: NAME}`` conditions."""

    name: str

    @field_validator("name")
    @classmethod
    def _one_word(cls, name: str) -> str:
        if not name or len(name.split()) != 1 or name != name.strip():
            raise ValueError("a flag name is one word, without spaces (as in /flag NAME)")
        if len(name) > MAX_FLAG:
            raise ValueError(f"a flag name is at most {MAX_FLAG} characters")
        return name


_B = TypeVar("_B", bound=_Body)


def _problem(error: Any, fields: list[str]) -> str:
    """One pydantic error as the answer words it: the field, what it must be, the value."""
    field = ".".join(str(part) for part in error["loc"]) or "the body"
    kind = error["type"]
    if kind == "missing":
        return f"{field} is missing"
    if kind == "extra_forbidden":
        return f"{field} is not a field of this request (its fields: {', '.join(fields)})"
    message = str(error["msg"])
    message = message[:1].lower() + message[1:]
    given = json.dumps(error["input"], default=repr)
    if len(given) > 60:
        given = given[:59] + "…"
    return f"{field}: {message}, got {given}"


async def _json(request: Request, shape: type[_B]) -> _B:
    """The request's JSON body as ``shape`` (400 when it is not JSON, 422 naming each
    field that is wrong: nothing has been done yet)."""
    try:
        body = await request.json()
    except ValueError:
        raise HTTPException(400, "the body is not JSON") from None
    except RecursionError:
        raise HTTPException(400, "the body's JSON is nested too deeply") from None
    if not isinstance(body, dict):
        raise HTTPException(400, "the body must be a JSON object")
    try:
        return shape.model_validate(body)
    except ValidationError as exc:
        fields = list(shape.model_fields)
        problems = "; ".join(_problem(error, fields) for error in exc.errors())
        raise HTTPException(422, problems) from None


async def create_session(request: Request) -> Response:
    ctx = WebContext.of(request)
    body = await _json(request, StartBody)
    try:
        run = await start_session(ctx, body.world, body.topic, body.model)
    except RolecallError as exc:
        return JSONResponse({"error": str(exc)}, status_code=422)
    return JSONResponse({"session_id": run.session_id}, status_code=201)


async def _live(ctx: WebContext, sid: str) -> LiveRun:
    live = ctx.runs.get(sid)
    if live is not None:
        return live
    state = await state_of(ctx.store, sid)
    if state is None and ctx.cluster is not None and await ctx.cluster.holds(sid):
        raise HTTPException(
            409,
            f"session {sid} runs on the NATS cluster: this page follows it, only its "
            "own process drives it",
        )
    if state is None:
        raise HTTPException(404, f"no session {sid!r}")
    if state == "finished":
        raise HTTPException(409, f"session {sid} is finished")
    if state == "running":  # another process runs it (or ran it and died): not ours to drive
        raise HTTPException(
            409,
            f"session {sid} is running in another process; if that process is gone, "
            f"`rolecall resume {sid}{data_dir_flag(db_path(ctx.data_dir))}` continues it",
        )
    try:
        return await ctx.runs.reopen(sid)
    except RolecallError as exc:
        raise HTTPException(409, str(exc)) from None


async def say(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    body = await _json(request, SayBody)
    live = await _live(ctx, sid)
    return _accepted(lambda: ctx.runs.say(live, body.text, body.audience))


async def control(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    body = await _json(request, ControlBody)
    live = await _live(ctx, sid)
    return _accepted(lambda: ctx.runs.control(live, body.action))


def _accepted(act: Callable[[], dict[str, Any] | None]) -> JSONResponse:
    """202 once ``act`` is done (what it returns beside ``ok``), or 409 saying why it was
    refused."""
    try:
        more = act() or {}
    except RolecallError as exc:
        return JSONResponse({"error": str(exc)}, status_code=409)
    return JSONResponse({"ok": True, **more}, status_code=202)


async def _known(ctx: WebContext, sid: str) -> bool:
    """A session stored here or followed on the cluster (else 404)."""
    return await state_of(ctx.store, sid) is not None or await ctx.feed(sid) is not None


async def waiting(request: Request) -> Response:
    """``GET /api/sessions/<id>/approvals``: the tool calls waiting for a person's answer
    (tools.md, Approval), in a session this server runs; none in any other."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    live = ctx.runs.get(sid)
    if live is None and not await _known(ctx, sid):
        raise HTTPException(404, f"no session {sid!r}")
    calls = [dataclasses.asdict(held.call) for held in live.waiting.values()] if live else []
    return JSONResponse({"waiting": calls})


async def approve(request: Request) -> Response:
    """``POST /api/sessions/<id>/approve``: Approve or Deny on the session page."""
    from rolecall.tools.approval import Decision

    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    body = await _json(request, ApproveBody)
    if body.decision == "deny" and body.arguments is not None:
        raise HTTPException(422, "arguments go with allow only (a refused call runs nothing)")
    live = ctx.runs.get(sid)
    if live is None:
        if not await _known(ctx, sid):
            raise HTTPException(404, f"no session {sid!r}")
        raise HTTPException(
            409, f"no call {body.call_id} waits for an answer: session {sid} is not running here"
        )
    held = live.waiting.get(body.call_id)
    tool = held.call.tool if held is not None else "the call"
    decision = (
        Decision("allow", "human", arguments=body.arguments)
        if body.decision == "allow"
        else Decision("deny", "human", f"the person refused {tool}")
    )
    return _accepted(lambda: live.answer(body.call_id, decision))


async def flag(request: Request) -> Response:
    """Set a flag (the REPL's ``/flag NAME``): 202 and the flags set now."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    body = await _json(request, FlagBody)
    live = await _live(ctx, sid)
    return _accepted(lambda: {"flags": ctx.runs.set_flag(live, body.name)})
