"""The HTML pages: sessions, a session's thread, the flow pages, start a world.

Every page is rendered on the server and reads without JavaScript; ``static/app.js``
only adds the live updates and the message box.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response

from rolecall import export
from rolecall.badges import labels_of
from rolecall.errors import RolecallError, WorldError
from rolecall.session.audience import audience_label, can_see
from rolecall.session.state import TranscriptMessage
from rolecall.storage.browse import (
    STATUSES,
    Hit,
    browse,
    choices,
    fork_links,
    message_hits,
    message_of,
    previews,
    state_of,
    world_of,
)
from rolecall.storage.document import SessionDocument
from rolecall.storage.scores import scores_of
from rolecall.web import flowedit
from rolecall.web.asides import Asides, asides_of_lines, stored_asides
from rolecall.web.cluster import Feed
from rolecall.web.context import WebContext
from rolecall.web.flowview import diagram
from rolecall.web.render import color_of
from rolecall.web.runs import LiveRun
from rolecall.world import catalog
from rolecall.world.models import World

PAGE_SIZE = 50
HITS_READ = 200  # messages read for a search's hits, above the sessions
HITS_SESSIONS = 10  # sessions shown with their hits
HITS_EACH = 3  # hits shown of each (a link shows the session's others)
MESSAGES_PER_PAGE = 200


MAX_PAGE = 2**40  # a page past the end (its offset stays a 64-bit integer)


def _int(value: str | None, default: int) -> int:
    try:
        return min(MAX_PAGE, max(0, int(value))) if value is not None else default
    except ValueError:
        return default


async def sessions(request: Request) -> Response:
    ctx = WebContext.of(request)
    q = request.query_params
    page = max(1, _int(q.get("page"), 1))
    status = q.get("status") or None
    found = await browse(
        ctx.store,
        search=q.get("q") or None,
        world=q.get("world") or None,
        status=status if status in STATUSES else None,
        batch=q.get("batch") or None,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
    )
    pages = max(1, -(-found.total // PAGE_SIZE))
    cluster = ctx.cluster
    text = q.get("q") or ""
    hits = await message_hits(ctx.store, text, limit=HITS_READ) if page == 1 else []
    return ctx.page(
        request,
        "sessions.html",
        found=found,
        hits=await _grouped(ctx, hits),
        hits_more=len(hits) >= HITS_READ,
        hits_left=max(0, len({h.session_id for h in hits}) - HITS_SESSIONS),
        per_page=MESSAGES_PER_PAGE,
        previews=await previews(ctx.store, [r.id for r in found.rows]),
        forks=await fork_links(ctx.store, [r.id for r in found.rows]),
        page=page,
        pages=pages,
        q=q.get("q", ""),
        world=q.get("world", ""),
        status=status or "",
        batch=q.get("batch", ""),
        statuses=STATUSES,
        menus=await choices(ctx.store),
        # the sessions this server holds say their state now; the others as stored
        live={
            sid: _live_words(run) or _status(run.session.result)
            for sid, run in ctx.runs.runs.items()
        },
        cluster=cluster.url if cluster is not None else None,
        cluster_rows=[]
        if cluster is None
        else cluster.listed(
            search=q.get("q") or None,
            world=q.get("world") or None,
            status=status if status in STATUSES else None,
            batch=q.get("batch") or None,
            limit=PAGE_SIZE,
        ),
        page_size=PAGE_SIZE,
    )


@dataclass(frozen=True)
class HitGroup:
    """A session's messages containing the searched text, as the list shows them."""

    session_id: str
    title: str
    hits: list[Hit]  # the first few
    more: int  # how many more of the messages read


async def _grouped(ctx: WebContext, hits: list[Hit]) -> list[HitGroup]:
    """The hits by session (in their order), a few of each, the first sessions only;
    each sender by the name the session's thread shows."""
    by_session: dict[str, list[Hit]] = {}
    for hit in hits:
        by_session.setdefault(hit.session_id, []).append(hit)
    groups = []
    for sid, found in list(by_session.items())[:HITS_SESSIONS]:
        names = _thread(await world_of(ctx.store, sid) or {}, [])["names"]
        shown = [replace(h, sender=names.get(h.sender, h.sender)) for h in found[:HITS_EACH]]
        groups.append(HitGroup(sid, found[0].title, shown, max(0, len(found) - HITS_EACH)))
    return groups


def _badges(world: dict[str, Any]) -> dict[str, str]:
    """A debate's side badges by role id (PRO, CON, MODERATOR, JUDGE), as the terminal
    and the exports show them; none for other worlds (or a world that does not load)."""
    if world.get("mode") != "debate":
        return {}
    try:
        return dict(labels_of(World.model_validate(world)).badges)
    except ValueError:
        return {}


async def _asides(ctx: WebContext, sid: str) -> Asides:
    """The session's tool calls and cited sources: from the store, or (``--nats``) the
    cluster's feed of a session stored elsewhere."""
    if await state_of(ctx.store, sid) is not None:
        return await stored_asides(ctx.store, sid)
    feed = await ctx.feed(sid)
    return asides_of_lines(feed.events.lines) if feed is not None else Asides()


def _thread(
    world: dict[str, Any], messages: list[TranscriptMessage], asides: Asides | None = None
) -> dict[str, Any]:
    role_ids = [str(r.get("id")) for r in world.get("roles", []) if isinstance(r, dict)]
    names = {str(r.get("id")): str(r.get("name") or r.get("id")) for r in world.get("roles", [])}
    return {
        "role_ids": role_ids,
        "names": names,
        "badges": _badges(world),
        "colors": {rid: color_of(role_ids, rid) for rid in [*role_ids, "human", "system"]},
        "by_id": {m.id: m for m in messages},
        "private": audience_label,
        "asides": asides or Asides(),
    }


def _live_words(run: LiveRun) -> str | None:
    """What a session this server runs is doing, when its state alone would mislead
    (a chat with every reply in says ``running``): None when the state says it."""
    return str(json.loads(run.shown_state())["status"]) or None


def _sees(world: dict[str, Any], role: str) -> list[str] | None:
    for r in world.get("roles", []):
        if isinstance(r, dict) and r.get("id") == role and isinstance(r.get("sees"), list):
            return [str(x) for x in r["sees"]]
    return None


def _seen_by(world: dict[str, Any], value: str | None) -> str | None:
    """The role of ``?as=ROLE`` (audiences.md: the session as it saw it), checked: None
    for everyone (the human's view); 400 naming the roles for one the world lacks."""
    if not value or value == "human":
        return None
    role_ids = [str(r.get("id")) for r in world.get("roles", []) if isinstance(r, dict)]
    if value not in role_ids:
        raise HTTPException(
            400, f"as seen by {value!r}: no such role (roles: {', '.join(role_ids)})"
        )
    return value


def _status(state: Any) -> str:
    """The status bar's words for a session state (stored, or the live one's)."""
    if state.state == "finished":
        return f"finished ({state.stop_reason})" if state.stop_reason else "finished"
    if state.state == "paused":
        return f"paused ({state.pause_reason})" if state.pause_reason else "paused"
    return str(state.state)


async def session(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    live = ctx.runs.get(sid)
    doc = await ctx.document(sid)
    feed = await _cluster_feed(ctx, sid, doc) if live is None else None
    q = request.query_params
    role = q.get("role") or None
    search = q.get("q") or None
    seen_by = _seen_by(doc.world, q.get("as"))
    picked = export.select(doc, role=role, search=search, seen_by=seen_by).messages
    pages = max(1, -(-len(picked) // MESSAGES_PER_PAGE))
    page = min(max(1, _int(q.get("page"), pages)), pages)  # the latest page by default
    shown = picked[(page - 1) * MESSAGES_PER_PAGE : page * MESSAGES_PER_PAGE]
    # the page shows the session as stored and replays what came after, from the first
    # chunk of a reply streaming now (a cluster session's: from its last checkpoint)
    last_seq = doc.last_seq if live is None else live.events.join_after(doc.last_seq)
    following = live is not None or (feed is not None and feed.live)
    if live is not None:  # what the session in this server says now, not its last store
        doc = doc.model_copy(update={"state": live.session.status})
    return ctx.page(
        request,
        "session.html",
        doc=doc,
        sid=sid,
        title=export.title(doc),
        status=(live is not None and _live_words(live)) or _status(doc.state),
        finished=doc.state.state == "finished",
        detail=(live is not None and _live_words(live))
        or ("running" if live is not None and doc.state.state == "running" else export.status(doc)),
        # Retry forks and asks again: not while a turn runs or a call waits (409)
        retry=live is None or not live.busy,
        messages=shown,
        page=page,
        pages=pages,
        role=role or "",
        q=search or "",
        seen_by=seen_by or "",
        log=doc.execution_log,
        live=following,
        chat=live.chat if live is not None else False,
        cluster=feed is not None,
        last_seq=last_seq,
        current=doc.state.pointer.current,
        forkable=feed is None,  # stored here (a cluster's session is forked where it is)
        last_id=doc.messages[-1].id if doc.messages else None,
        flag_names=_flag_names(doc),
        scores=(await scores_of(ctx.store, [sid])).get(sid, []),  # compare.md
        **_thread(doc.world, doc.messages, await _asides(ctx, sid)),
    )


def _flag_names(doc: SessionDocument) -> list[str] | None:
    """The flags the session's flow checks (the flag box suggests them); None without a
    flow (a chat, a mode's session: no condition of theirs looks at a flag)."""
    try:
        flow = doc.world_model().flow
    except RolecallError:
        return None
    return flow.flags if flow is not None else None


async def _cluster_feed(ctx: WebContext, sid: str, doc: SessionDocument) -> Feed | None:
    """With ``--nats``: the cluster's feed of a session not finished here."""
    if ctx.cluster is None or doc.state.state == "finished":
        return None
    return await ctx.feed(sid)


async def message_fragment(request: Request) -> Response:
    """One message as the thread shows it (the live page swaps it in when it completes)."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    mid = str(request.path_params["mid"])
    world = await world_of(ctx.store, sid)
    stored = world is not None  # a cluster's session is forked where it is stored
    if world is None:
        feed = await ctx.feed(sid)
        found = await feed.message(mid) if feed is not None else None
        reply_to = found.reply_to if found is not None else None
        answered = await feed.message(reply_to) if feed is not None and reply_to else None
        world = feed.log.start["world"] if feed is not None and feed.log.start else None
    else:
        found = await message_of(ctx.store, sid, mid)
        reply_to = found.reply_to if found is not None else None
        answered = await message_of(ctx.store, sid, reply_to) if reply_to else None
    if world is None or found is None:
        raise HTTPException(404, f"no message {mid!r} in session {sid}")
    seen_by = _seen_by(world, request.query_params.get("as"))
    if seen_by is not None and not can_see(seen_by, found, _sees(world, seen_by)):
        return Response(status_code=204)  # the page shows the session as that role saw it
    thread = _thread(world, [answered] if answered else [], await _asides(ctx, sid))
    # the message the live page just received is the latest: Retry is offered on it
    live = ctx.runs.get(sid)
    return ctx.page(
        request,
        "_message.html",
        m=found,
        sid=sid,
        forkable=stored,
        last_id=mid,
        retry=live is None or not live.busy,
        **thread,
    )


async def export_file(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    fmt = str(request.path_params["fmt"])
    doc = await ctx.document(sid)
    if fmt in ("md", "html") and await state_of(ctx.store, sid) is not None:
        doc = await ctx.store.load(sid)  # with its events: the sources of citations
    if fmt == "md":
        return PlainTextResponse(export.to_markdown(doc), media_type="text/markdown")
    if fmt == "html":
        return Response(export.to_html(doc), media_type="text/html")
    if fmt == "json":
        stored = await state_of(ctx.store, sid) is not None
        full = await ctx.store.load(sid) if stored else doc  # a cluster's: with its events
        return Response(full.model_dump_json(indent=2), media_type="application/json")
    raise HTTPException(404, f"no export format {fmt!r} (md, html or json)")


async def session_flow(request: Request) -> Response:
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    doc = await ctx.document(sid)
    world = doc.world_model()
    if world.flow is None:
        return ctx.page(request, "flow.html", world=world, shapes=None, sid=sid, editable=False)
    pointer = doc.state.pointer
    # where it stands: the step to run next, or (finished, paused) the last one run
    current = pointer.current or (doc.execution_log[-1].step_id if doc.execution_log else None)
    shapes = diagram(world, runs=pointer.exec_counts, current=current)
    return ctx.page(
        request,
        "flow.html",
        world=world,
        shapes=shapes,
        sid=sid,
        editable=False,
        live=ctx.runs.get(sid) is not None,
        last_seq=doc.last_seq,
    )


def _world(path: Any, ctx: WebContext) -> World:
    from rolecall.api.entry import load_world

    return load_world(path, data_dir=ctx.data_dir)


FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


async def _flow_form(request: Request, name: str, path: Any, ctx: WebContext) -> dict[str, str]:
    """The flow page's form, every field of it (a 400 for anything else: nothing is saved)."""
    steps = flowedit.editable_steps(path)
    if steps is None:
        try:
            _world(path, ctx)
        except WorldError as exc:  # what the page shows: every problem, with its line
            raise HTTPException(
                409, f"world {name!r} cannot be edited until it loads: {exc}; nothing was saved"
            ) from None
        raise HTTPException(
            409,
            f"world {name!r} has no flow steps of its own to edit (its mode makes its flow)",
        )
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind not in FORM_TYPES:
        raise HTTPException(
            400,
            f"the flow of world {name!r} is saved from its form "
            f"(application/x-www-form-urlencoded), not {kind or 'a body without a type'}: "
            "nothing was saved",
        )
    sent = await request.form()
    files = sorted(k for k, v in sent.items() if not isinstance(v, str))
    if files:
        raise HTTPException(
            400, f"the flow form has no file fields ({', '.join(files)}): nothing was saved"
        )
    form = {k: str(v) for k, v in sent.items()}
    tools = sorted(k for k in form if k == "tools" or k.startswith(("tools.", "tools[")))
    if tools:  # tools.md: a world's commands are the user's own file, never the browser's
        raise HTTPException(
            400,
            f"the flow form never writes tools: ({', '.join(tools)}): a world's tools are "
            "set in world.yaml only; nothing was saved",
        )
    if "version" in form and form["version"] != flowedit.version(path):
        raise HTTPException(409, f"world {name!r}: {flowedit.STALE}")
    missing = [f for f in flowedit.form_fields(len(steps)) if f not in form]
    if missing:
        shown = ", ".join(missing[:6]) + (
            f" and {len(missing) - 6} more" if len(missing) > 6 else ""
        )
        raise HTTPException(
            400,
            f"this is not the flow form of world {name!r} ({len(steps)} steps): it lacks "
            f"{shown}; nothing was saved (reload the page if world.yaml changed)",
        )
    return form


async def world_flow(request: Request) -> Response:
    ctx = WebContext.of(request)
    name = str(request.path_params["world"])
    path, local = ctx.world_path(name)
    result = None
    if request.method == "POST":
        if not local:
            raise HTTPException(403, f"world {name!r} is shipped with rolecall: copy it to edit it")
        form = await _flow_form(request, name, path, ctx)
        try:
            result = flowedit.apply_form(
                path, form, roles_dir=ctx.data_dir / "roles", expected=form["version"]
            )
        except flowedit.FormConflict as exc:
            raise HTTPException(409, f"world {name!r}: {exc}") from None
        if result.saved:
            return RedirectResponse(f"/w/{name}/flow?saved=1", status_code=303)
    try:
        world = _world(path, ctx)
    except RolecallError as exc:
        return ctx.page(
            request, "error.html", status_code=422, message=str(exc), title="Cannot do that"
        )
    steps = flowedit.editable_steps(path) if local else None
    shapes = diagram(world) if world.flow is not None else None
    return ctx.page(
        request,
        "flow.html",
        world=world,
        name=name,
        shapes=shapes,
        sid=None,
        editable=steps is not None,
        steps=steps or [],
        form=dict(await request.form()) if result is not None else None,
        result=result,
        saved=request.query_params.get("saved") == "1",
        stop_text=flowedit.stop_text(path) if steps is not None else "",
        version=flowedit.version(path) if steps is not None else "",
    )


async def start_form(request: Request) -> Response:
    """``/start``: a world by name, or a debate or consensus from its options."""
    from rolecall.web import presets

    ctx = WebContext.of(request)

    def shown(status_code: int = 200, error: str | None = None, kind: str = "") -> Response:
        return ctx.page(
            request,
            "start.html",
            status_code=status_code,
            worlds=catalog.available(ctx.worlds_dir),
            profiles=presets.choices(),
            error=error,
            kind=kind,
        )

    if request.method != "POST":
        return shown()
    sent = await request.form()
    form = {k: v for k, v in sent.items() if isinstance(v, str)}
    upload = sent.get("document")
    document = None
    if upload is not None and not isinstance(upload, str):  # a study's document
        document = (upload.filename or "", await upload.read(presets.MAX_DOCUMENT + 1))
    kind = form.get("preset", "")
    model = form.get("model") or None
    try:
        if kind:
            world = presets.preset_world(kind, form, document)
            run = await ctx.runs.start(world, model=model)
        else:
            from rolecall.web.api_routes import start_session

            run = await start_session(ctx, form.get("world", ""), form.get("topic") or None, model)
    except RolecallError as exc:
        return shown(422, str(exc), kind)
    return RedirectResponse(f"/s/{run.session_id}", status_code=303)
