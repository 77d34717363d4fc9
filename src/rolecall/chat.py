"""Chat turns (chat.md) and flow interjections (flows.md) for a :class:`Session`.

The decisions come from the pure :mod:`rolecall.routing` functions; this module
applies them to the session: it queues the replies that are due, enforces the
per-agent turn limit, strips self-mentions, adds auto-mentions, and ends an exchange
on a pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog

from rolecall import turns
from rolecall.bus import Event, PassEvent, TurnLimitEvent, WarningEvent
from rolecall.debuglog import debug_enabled
from rolecall.routing import (
    auto_mention,
    extract_pass,
    route,
    strip_self_mentions,
    unknown_mention_notice,
)
from rolecall.session.state import Message, PendingReply

if TYPE_CHECKING:
    from rolecall.runtime import Session


_log = structlog.get_logger("rolecall.routing")


def route_human(session: Session, message: Message) -> list[Event]:
    """Queue who answers a human message: chat rules, or one interjection in a flow.

    Returns the events of the decision (an unknown-mention notice), to be published
    right after the message.
    """
    decision = route("human", message.content, session.world.role_ids)
    if debug_enabled():
        _log.debug(
            "routing",
            session=session.state.session_id,
            message_id=message.id,
            answerers=list(decision.answerers),
            reason=decision.reason,
            interjection=session.flow_active,
        )
    events: list[Event] = []
    if decision.unknown is not None:
        events.append(WarningEvent(message=unknown_mention_notice(decision)))
    if session.flow_active:
        if decision.reason == "direct" and decision.answerers:
            session.state.pending.append(
                PendingReply(
                    agent=decision.answerers[0], message_id=message.id, kind="interjection"
                )
            )
        return events
    session.state.pending.extend(
        PendingReply(agent=agent, message_id=message.id) for agent in decision.answerers
    )
    return events


async def answer_pending(session: Session) -> None:
    """Run the first due reply (called under the session's turn lock)."""
    state = session.state
    item = state.pending.pop(0)
    target = state.transcript.by_id[item.message_id]
    role = session.world.role(item.agent)
    if item.kind == "interjection":
        await _interjection(session, item, target)
        return
    limit = session.world.settings.turn_limit
    count = state.turn_counts.get(role.id, 0)
    if count >= limit:
        _end_exchange(session, target)  # the floor returns to the human
        if role.id not in state.limit_notified:
            state.limit_notified.add(role.id)
            text = (
                f"@human turn limit reached: {role.id} made {count} LLM calls without human input"
            )
            await _notice(session, text)
            session.bus.publish(TurnLimitEvent(agent=role.id, count=count, limit=limit))
        return
    state.turn_counts[role.id] = count + 1  # counted just before the call
    generated = await session._call(role, target, step_id=None, loop_iteration=None)
    if generated is None:
        state.turn_counts[role.id] = count
        if not session.finished:
            state.pending.insert(0, item)  # resume answers it
        return
    text, passed = extract_pass(generated.text)
    text = strip_self_mentions(text, role.id)
    if passed:
        _end_exchange(session, target)  # a pass is terminal for the exchange
        message_id = None
        if text.strip():
            message = session._message(
                role.id, "agent", text.strip(), target=target, generated=generated
            )
            await session._commit(message)
            message_id = message.id
        session.bus.publish(PassEvent(agent=role.id, message_id=message_id))
        return
    text = auto_mention(text, target.sender, role.id, session.world.role_ids)
    message = session._message(role.id, "agent", text, target=target, generated=generated)
    await session._commit(message)
    decision = route(role.id, text, session.world.role_ids)
    if decision.unknown is not None:
        session.bus.publish(WarningEvent(message=unknown_mention_notice(decision)))
    state.pending.extend(
        PendingReply(agent=agent, message_id=message.id) for agent in decision.answerers
    )


def _exchange_root(session: Session, message: Message) -> str:
    """The id of the message that started ``message``'s exchange (its first reply_to)."""
    by_id = session.state.transcript.by_id
    while message.reply_to is not None and message.reply_to in by_id:
        message = by_id[message.reply_to]
    return message.id


def _end_exchange(session: Session, answering: Message) -> None:
    """Drop every reply still queued in the exchange of ``answering`` (a limit or a pass).

    Replies queued for another exchange (a human message sent while this one was still
    running) are kept: that message's answerers still owe the human a reply.
    """
    state = session.state
    root = _exchange_root(session, answering)
    by_id = state.transcript.by_id
    state.pending[:] = [
        item
        for item in state.pending
        if item.message_id in by_id and _exchange_root(session, by_id[item.message_id]) != root
    ]


async def _notice(session: Session, text: str) -> None:
    """A system message agents remember; it ends an episode, so it resets nothing."""
    message = session._message("system", "system", text)
    await session._commit(message)


async def _interjection(session: Session, item: PendingReply, target: Message) -> None:
    state = session.state
    pointer = state.pointer
    iteration = pointer.exec_counts.get("interjection", 0)
    started = session.clock()
    generated = await session._call(
        session.world.role(item.agent), target, step_id="interjection", loop_iteration=iteration
    )
    if generated is None:
        if not session.finished:
            state.pending.insert(0, item)
        return
    message = session._message(
        item.agent,
        "agent",
        strip_self_mentions(generated.text, item.agent),
        target=target,
        step_id="interjection",
        loop_iteration=iteration,
        generated=generated,
    )
    await session._commit(message)
    pointer.begin("interjection")
    turns.record(session, "interjection", item.agent, message, iteration, "success", started)
    if session.engine is not None:
        hit, evaluations = session.engine.global_stop(session.ctx)
        turns.publish_evaluations(session, evaluations)
        if hit is not None:
            session._finish(hit.reason, hit.detail)
