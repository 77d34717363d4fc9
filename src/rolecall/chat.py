"""The chat driver: chat turns (chat.md) and flow interjections (flows.md).

Who answers is decided by the agents themselves (:mod:`rolecall.floor`): each asks
for the floor when a message this driver will answer reaches it (the driver marks it
with ``floor.expect`` before it is published), by the pure :mod:`rolecall.routing` rules.
This module admits those requests (a human's in chat, a direct address in a flow, an
agent reply's addressees), takes the floor's grants one at a time, enforces the
per-agent turn limit, strips self-mentions, adds auto-mentions, drops empty replies,
and ends an exchange on a pass. Each due reply becomes a
:class:`~rolecall.plans.TurnPlan` the runtime runs.
"""

from __future__ import annotations

from datetime import datetime

from rolecall import turns
from rolecall.bus import (
    ErrorEvent,
    Event,
    PassEvent,
    SelectionEvent,
    TurnLimitEvent,
    WarningEvent,
)
from rolecall.debuglog import debug_enabled
from rolecall.errors import ConditionTimeout
from rolecall.floor.selector import choose
from rolecall.log import get_logger
from rolecall.plans import DriverSite, Next, Spoken, TurnPlan
from rolecall.routing import (
    auto_mention,
    extract_pass,
    first_mention,
    route,
    strip_self_mentions,
    unknown_mention_notice,
)
from rolecall.routing.selection import candidates
from rolecall.session.state import Concluding, PendingReply, TranscriptMessage

_log = get_logger("rolecall.routing")
PASS_RULE = "the reply held <world>pass</world>: a pass ends the exchange (chat.md, Passing)"


def route_notice(session: DriverSite, message: TranscriptMessage) -> list[Event]:
    """The events of routing a human's or an agent's message: an unknown-name notice, if any.

    Stored with the message and published right after it, the same for both senders
    (chat.md: a first mention that names no agent). It reads the routing decision the
    agents answer the message by (``floor.decision``: computed once), so call it after
    ``floor.expect`` when the message is to be answered.
    """
    decision = session.floor.decision(message.id, message.sender, message.content)
    if debug_enabled():
        _log.debug(
            "routing",
            session=session.state.session_id,
            message_id=message.id,
            answerers=list(decision.answerers),
            reason=decision.reason,
            interjection=session.flow_active,
        )
    if decision.unknown is not None:
        return [WarningEvent(message=unknown_mention_notice(decision))]
    return []


async def admit_human(session: DriverSite, message: TranscriptMessage) -> bool:
    """Queue the agents that asked for the floor on a human message; True if any did.

    In chat every request is queued, in role order; in a flow only a direct address
    is, as one interjection (flows.md).
    """
    requests = await session.floor.collect(message.id)
    if selection_chat(session):  # the rule chooses who answers, one at a time
        reason = route(message.sender, message.content, session.world.role_ids).reason
        if reason in ("human_mention", "unknown_mention"):
            return False  # addressed to nobody (an unknown name has its notice)
        state = session.state
        state.pending.append(PendingReply(agent="", message_id=message.id, kind="select", round=1))
        return True
    if session.flow_active:
        direct = [r for r in requests if r.reason == "direct"][:1]
        session.floor.queue(session.state, direct, "interjection")
        return bool(direct)
    session.floor.queue(session.state, requests, "chat")
    return bool(requests)


def human_stop(session: DriverSite) -> tuple[list[Event], bool]:
    """After a human message in a flow: the global stop conditions, evaluated now.

    Conditions see the session as it stands after each message (flows.md), the human's
    included, so ``{contains: enough, role: human}`` ends a flow when the human says it.
    When one holds, the interjection just queued is dropped and the session concludes
    (its final step, if any, then the stop) on its next turn. Returns the events and
    whether a condition held (then nobody is admitted to answer the message).
    """
    engine = session.engine
    if engine is None or session.finished:
        return [], False
    try:
        hit, evaluations = engine.global_stop(session.ctx)
    except ConditionTimeout as exc:  # the human's message is kept; the session pauses
        session.pause("error")
        return [ErrorEvent(error=str(exc), source="flow")], False
    events = turns.condition_events(evaluations)
    if hit is not None:
        session.state.pending.clear()
        session.state.concluding = Concluding(hit.reason, hit.detail)
    return events, hit is not None


async def human_turn(
    session: DriverSite, text: str, audience: tuple[str, ...] | None
) -> TranscriptMessage:
    """A human's message (under the session's turn lock): stored with its routing notice,
    then the replies it is owed admitted and stored before any is generated.

    In a flow, a stop condition it makes hold admits nobody (:func:`human_stop`); with a
    director, the director sees it first, once it is stored, and routing follows only
    when the director does not take it. Every agent's turn count starts again.
    """
    state = session.state
    state.turn_counts.clear()
    state.limit_notified.clear()
    director = session.director
    held = False

    def decide(message: TranscriptMessage, _: datetime) -> list[Event]:
        nonlocal held
        if director is not None:  # routed once the director has seen it (below)
            session.floor.expect(message.id)  # unless the director takes it
            return []
        stop_events, held = human_stop(session)
        if not held:  # the agents answer it (admit_human, below)
            session.floor.expect(message.id)
        return [*route_notice(session, message), *stop_events]

    plan = TurnPlan("human", text=text, decide=decide, audience=audience, inherit=False)
    message = (await session.speak(plan)).message
    assert message is not None  # a plan's own text is always said
    # the agents asked for the floor as the message reached them; the replies owed are
    # stored before any is generated
    if director is None:
        if not held and await admit_human(session, message):
            await session.emit([])
    elif director.human(session, message):
        session.floor.discard(message.id)
    else:
        events = route_notice(session, message)
        await admit_human(session, message)
        await session.emit(events)
    return message


def selection_chat(session: DriverSite) -> bool:
    """A chat whose speakers a rule chooses (selection.md): no director, and no flow
    running (a flow world's chat before its flow starts is one)."""
    rule = session.world.settings.speaker_selection
    return rule != "mentions" and not session.flow_active and session.director is None


async def _select(session: DriverSite, item: PendingReply, target: TranscriptMessage) -> bool:
    """Choose who answers ``target`` (a ``select`` item not chosen yet); the choice and
    its event are stored before the chosen speaker is asked, so a resume speaks without
    asking the selector again. False when nobody could be chosen."""
    state = session.state
    world = session.world
    role_ids = world.role_ids
    limit = world.settings.turn_limit
    last = target.sender if target.sender in role_ids else None
    options = candidates(
        role_ids,
        last,
        allow_repeat=world.settings.allow_repeat,
        at_limit={r for r in role_ids if state.turn_counts.get(r, 0) >= limit},
    )
    mention = first_mention(target.content)
    choice = await choose(session, options, target, mention=mention)
    picked = choice.selection
    event = SelectionEvent(
        candidates=list(picked.candidates),
        chosen=picked.chosen,
        by=picked.by,
        answer=picked.answer,
        answers=list(picked.answers),
        message_id=target.id,
        model=choice.model,
        input_tokens=choice.input_tokens,
        output_tokens=choice.output_tokens,
        cost_usd=choice.cost_usd if choice.model is not None else None,
        error=choice.error,
    )
    if picked.chosen is None or session.finished:
        await session.emit([event])
        return False
    chosen = PendingReply(
        agent=picked.chosen, message_id=target.id, kind="select", round=item.round
    )
    state.pending.insert(0, chosen)
    await session.emit([event])
    return True


async def next_pending(session: DriverSite) -> Next:
    """The first due reply as a plan (called under the session's turn lock)."""
    state = session.state
    item = session.floor.grant(state)
    target = state.transcript.by_id[item.message_id]
    if item.kind == "select" and not item.agent:
        if not await _select(session, item, target):
            return None
        item = session.floor.grant(state)
    role = session.world.role(item.agent)
    if item.kind == "interjection":
        return _interjection(session, item, target)
    selected = item.kind == "select"
    limit = session.world.settings.turn_limit
    count = state.turn_counts.get(role.id, 0)
    if count >= limit:
        _end_exchange(session, target)  # the floor returns to the human
        if role.id in state.limit_notified:
            return None
        state.limit_notified.add(role.id)
        text = f"@human turn limit reached: {role.id} made {count} LLM calls without human input"

        async def notified(_: Spoken) -> Next:
            session.bus.publish(TurnLimitEvent(agent=role.id, count=count, limit=limit))
            return None

        # a system message agents remember; it ends an episode, so it resets nothing
        return TurnPlan("system", text=text, then=notified)
    state.turn_counts[role.id] = count + 1  # counted just before the call
    passed = False

    def shape(generated: str) -> str | None:
        nonlocal passed
        text, passed = extract_pass(generated)
        text = strip_self_mentions(text, role.id)
        if passed:
            _end_exchange(session, target)  # a pass is terminal for the exchange
            return text.strip() or None
        if not text.strip():
            return None  # an empty reply: nothing to publish, nobody to answer (chat.md)
        if selected:  # the rule chooses who answers it, not an added mention
            return text
        return auto_mention(text, target.sender, role.id)

    def decide(message: TranscriptMessage, _: datetime) -> list[Event]:
        if passed:  # nobody answers a pass
            return []
        session.floor.expect(message.id)  # its addressees answer it (then, below)
        return route_notice(session, message)

    async def then(spoken: Spoken) -> Next:
        if not spoken.generated:
            state.turn_counts[role.id] = count
            if not session.finished:
                state.pending.insert(0, item)  # resume answers it
            return None
        message = spoken.message
        if passed:
            message_id = message.id if message is not None else None
            session.bus.publish(PassEvent(agent=role.id, message_id=message_id, reason=PASS_RULE))
            return None
        if spoken.stalled and message is not None:  # real-models.md: over to the human
            session.floor.discard(message.id)
            _end_exchange(session, target)
            return None
        if message is None:  # an empty reply; unlike a pass, the exchange goes on
            notice = f"nothing published: {role.id}'s reply to {target.id} was empty"
            session.bus.publish(WarningEvent(message=notice))
            return None
        # the agents it addressed asked for the floor when the message reached them; the
        # replies owed are stored before any is generated (as a human message's are), so
        # a crash during the next reply loses that reply only, not the exchange
        requests = await session.floor.collect(message.id)
        if selected:
            if _goes_on(session, message, item.round):
                state.pending.append(
                    PendingReply(
                        agent="", message_id=message.id, kind="select", round=item.round + 1
                    )
                )
                await session.emit([])
            return None
        session.floor.queue(state, requests, "chat")
        if requests:
            await session.emit([])
        return None

    return TurnPlan(role.id, target, shape=shape, decide=decide, then=then)


def _goes_on(session: DriverSite, message: TranscriptMessage, rounds: int) -> bool:
    """Whether a selection chat chooses another speaker after ``message`` (selection.md):
    not after ``max_rounds`` selected turns, nor when it hands the floor to the human
    (``@human`` first) or names nobody known first (its notice says so)."""
    if rounds >= session.world.settings.max_rounds:
        return False
    mention = first_mention(message.content)
    if mention is None or mention == "all":
        return True
    return mention != "human" and mention in session.world.role_ids


def _exchange_root(session: DriverSite, message: TranscriptMessage) -> str:
    """The id of the message that started ``message``'s exchange (its first reply_to)."""
    by_id = session.state.transcript.by_id
    while message.reply_to is not None and message.reply_to in by_id:
        message = by_id[message.reply_to]
    return message.id


def _end_exchange(session: DriverSite, answering: TranscriptMessage) -> None:
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


def _interjection(session: DriverSite, item: PendingReply, target: TranscriptMessage) -> Next:
    state = session.state
    iteration = state.pointer.exec_counts.get("interjection", 0)

    def decide(message: TranscriptMessage, started: datetime) -> list[Event]:
        return [
            turns.make_record(
                session, "interjection", item.agent, message, iteration, "success", started
            )
        ]

    async def then(spoken: Spoken) -> Next:
        if spoken.message is None:
            if not session.finished:
                state.pending.insert(0, item)
            return None
        if session.engine is not None:
            hit, evaluations = session.engine.global_stop(session.ctx)
            for event in turns.condition_events(evaluations):
                session.bus.publish(event)
            if hit is not None:
                session.finish(hit.reason, hit.detail)
        return None

    return TurnPlan(
        item.agent,
        target,
        step_id="interjection",
        loop_iteration=iteration,
        begin=True,
        shape=lambda text: strip_self_mentions(text, item.agent),
        decide=decide,
        then=then,
    )
