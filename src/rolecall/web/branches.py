"""Fork and Retry from a message of the thread (the REPL's ``/fork`` and ``/retry``).

*Fork* stores a new session holding m1..mK of this one (mK's text edited, if the form
gives a new text) and opens its page: it is paused there, and talking, Resume or Next
go on from mK. *Retry* on an agent's latest answer asks its speaker again in a new
branch: the fork at the message before it, opened live in this server, runs the turns
until the branch has its new answer; the old answer stays in this session.
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from rolecall.api.fork import fork_session
from rolecall.errors import RolecallError
from rolecall.memory import MemoryFiles
from rolecall.storage.browse import state_of
from rolecall.web.context import WebContext


async def fork_message(request: Request) -> Response:
    """``POST /s/ID/fork`` (form: ``at``, optional ``text``, ``action`` fork|retry)."""
    ctx = WebContext.of(request)
    sid = ctx.session_id(request)
    if await state_of(ctx.store, sid) is None:
        raise HTTPException(
            404, f"no session {sid!r} stored here (a cluster's is forked where it is stored)"
        )
    form = await request.form()
    at = str(form.get("at") or "")
    text = str(form.get("text") or "")
    action = str(form.get("action") or "fork")
    if action not in ("fork", "retry"):
        raise HTTPException(400, f"unknown action {action!r} (fork or retry)")
    live = ctx.runs.get(sid)
    if live is not None and live.busy:
        raise HTTPException(
            409, f"session {sid} is running a turn: pause it (or wait for it), then {action}"
        )
    doc = await ctx.document(sid)
    ids = [m.id for m in doc.messages]
    if at not in ids:
        raise HTTPException(404, f"no message {at!r} in session {sid}")
    again = None
    if action == "retry":
        answer = doc.messages[ids.index(at)]
        if answer.kind != "agent" or at != ids[-1] or len(ids) < 2:
            raise HTTPException(
                409, f"{at} is not the latest answer of an agent: only that one is asked again"
            )
        again, at = answer, ids[-2]
    edit = (
        text
        if action == "fork" and text.strip() and text != doc.messages[ids.index(at)].content
        else None
    )
    memory = MemoryFiles.in_data_dir(ctx.data_dir)
    try:
        plan = await fork_session(ctx.store, memory, sid, at, edit=edit)
    except RolecallError as exc:
        raise HTTPException(409, str(exc)) from None
    finally:
        memory.close()
    if again is not None:
        try:
            run = await ctx.runs.reopen(plan.new_id)
            if again.reply_to is not None and (again.step_id == "interjection" or run.chat):
                # a reply (chat, or an answer to an interjection) is due again in the
                # branch; a flow step or a mode's turn comes again by itself
                run.session.request_reply(again.sender, again.reply_to)
        except RolecallError as exc:
            raise HTTPException(409, str(exc)) from None
        ctx.runs.ask_again(run)
    return RedirectResponse(f"/s/{plan.new_id}", status_code=303)
