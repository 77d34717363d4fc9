"""The flow driver: flow steps and their decision, director turns, the final step, extra turns.

Each function takes the :class:`~rolecall.plans.DriverSite` whose turn lock is held by the
caller and returns the next node (:class:`~rolecall.plans.TurnPlan`,
:class:`~rolecall.plans.Stop` or None); the runtime runs plans with its one primitive,
``speak``. A flow turn stores its message and the decision that follows it
(conditions, the execution-log record, the pointer) in one transaction; with message
hooks (a judge) the decision is stored right after them, and an interrupted decision is
redone on resume without regenerating the message.
"""

from __future__ import annotations

from datetime import datetime

from rolecall.bus import (
    ConditionEvent,
    ErrorEvent,
    Event,
    SelectionEvent,
    StepEvent,
    WarningEvent,
)
from rolecall.errors import ConditionTimeout
from rolecall.floor.selector import choose, counters
from rolecall.flows.conditions import Evaluation
from rolecall.flows.engine import FlowEngine
from rolecall.plans import Director, DriverSite, Next, Spoken, Stop, TurnPlan
from rolecall.routing import first_mention
from rolecall.routing.selection import candidates
from rolecall.session.state import Concluding, ExecutionRecord, TranscriptMessage, Undecided
from rolecall.world.targets import resolve_target

# ------------------------------------------------------------------------ flow
SELECT = "select"  # a step's `speaker: select` (selection.md)


async def flow_next(session: DriverSite, engine: FlowEngine) -> Next:
    """The flow's current step as a plan; a ``speaker: select`` step chooses its speaker
    first (selection.md), or stops the flow (``no_speaker``) when nobody may speak."""
    state = session.state
    pointer = state.pointer
    if not pointer.started and pointer.current is None:
        pointer.current = engine.start
    if pointer.current is None:
        return None
    step = engine.step(pointer.current)
    if step.speaker != SELECT:
        return flow_plan(session, engine)
    chosen = await _step_speaker(session, step.id, step.candidates)
    if chosen is None:
        if session.finished:
            return None
        return Stop("no_speaker", f"step {step.id}: no candidate may speak")
    return flow_plan(session, engine, speaker=chosen)


async def _step_speaker(session: DriverSite, step_id: str, allowed: list[str] | None) -> str | None:
    """The speaker chosen for this run of ``step_id``: chosen once, stored with its
    ``system/selection`` event, so a resumed turn speaks without choosing again."""
    state = session.state
    iteration = state.pointer.exec_counts.get(step_id, 0)
    stored = counters(state)
    made = stored.get("step")
    if isinstance(made, list) and made[:2] == [step_id, iteration]:
        return str(made[2])
    world = session.world
    latest = state.transcript.latest()
    last = latest.sender if latest is not None and latest.sender in world.role_ids else None
    limit = world.settings.turn_limit
    options = candidates(
        world.role_ids,
        last,
        allowed=allowed,
        allow_repeat=world.settings.allow_repeat,
        at_limit={r for r in world.role_ids if state.turn_counts.get(r, 0) >= limit},
    )
    mention = first_mention(latest.content) if latest is not None else None
    choice = await choose(session, options, latest, mention=mention)
    picked = choice.selection
    if picked.chosen is not None:
        stored["step"] = [step_id, iteration, picked.chosen]
    await session.emit(
        [
            SelectionEvent(
                candidates=list(picked.candidates),
                chosen=picked.chosen,
                by=picked.by,
                answer=picked.answer,
                answers=list(picked.answers),
                message_id=latest.id if latest is not None else None,
                step_id=step_id,
                model=choice.model,
                input_tokens=choice.input_tokens,
                output_tokens=choice.output_tokens,
                cost_usd=choice.cost_usd if choice.model is not None else None,
                error=choice.error,
            )
        ]
    )
    return picked.chosen if not session.finished else None


def flow_plan(session: DriverSite, engine: FlowEngine, *, speaker: str | None = None) -> Next:
    """The flow's current step as a plan (None when the flow has nowhere to go);
    ``speaker``: the one chosen for a ``speaker: select`` step."""
    state = session.state
    pointer = state.pointer
    if not pointer.started and pointer.current is None:
        pointer.current = engine.start
    if pointer.current is None:
        return None
    step = engine.step(pointer.current)
    if speaker is not None:
        step = step.model_copy(update={"speaker": speaker})
    target, warning = resolve_target(step.reply_to, state.transcript, step.speaker)
    if warning:
        session.bus.publish(WarningEvent(message=f"step {step.id}: {warning}"))
    iteration = pointer.exec_counts.get(step.id, 0)

    timed_out: list[ConditionTimeout] = []

    def decide_now(message: TranscriptMessage, started: datetime) -> list[Event]:
        if session.message_hooks:  # the decision waits for the hooks (a judge)
            state.undecided = Undecided(step.id, iteration, started, message.id)
            return []
        try:
            return decide(session, engine, step.id, message, iteration, started)
        except ConditionTimeout as exc:  # the message is kept; resume decides again
            state.undecided = Undecided(step.id, iteration, started, message.id)
            timed_out.append(exc)
            return [ErrorEvent(error=str(exc), source="flow")]

    async def then(spoken: Spoken) -> Next:
        if timed_out:
            raise timed_out[0]
        if spoken.message is not None and session.message_hooks:
            return await after_hooks(session, engine, spoken.message)
        return _concluding(session)

    return TurnPlan(
        step.speaker,
        target,
        step_id=step.id,
        loop_iteration=iteration,
        instruction=step.instruction,
        begin=True,
        decide=decide_now,
        then=then,
        # a step's messages are for its audience, or for everyone: the step says so
        audience=tuple(step.audience) if step.audience is not None else None,
        inherit=False,
    )


async def resume_flow(session: DriverSite, engine: FlowEngine) -> Next:
    """Redo an interrupted decision (hooks first), or go on to the final step."""
    undecided = session.state.undecided
    if undecided is not None:
        return await after_hooks(
            session, engine, session.state.transcript.by_id[undecided.message_id]
        )
    return _concluding(session)


async def after_hooks(session: DriverSite, engine: FlowEngine, message: TranscriptMessage) -> Next:
    """Run message hooks (a judge), then decide; also resumes an undecided step."""
    undecided = session.state.undecided
    assert undecided is not None
    for hook in session.message_hooks:
        await hook(session, message)
    if session.state.state == "paused":
        return None  # a hook's generation failed; resume runs the hooks again
    await session.emit(
        decide(session, engine, undecided.step_id, message, undecided.iteration, undecided.started)
    )
    return _concluding(session)


def _concluding(session: DriverSite) -> Next:
    concluding = session.state.concluding
    return None if concluding is None else Stop(concluding.reason, concluding.detail)


def decide(
    session: DriverSite,
    engine: FlowEngine,
    step_id: str,
    message: TranscriptMessage,
    iteration: int,
    started: datetime,
) -> list[Event]:
    """Evaluate what comes after ``step_id``; update the pointer; the events to publish."""
    state = session.state
    outcome = engine.after_step(step_id, state.pointer, session.ctx)
    events: list[Event] = condition_events(outcome.evaluations)
    events.append(  # the message's sender: a `speaker: select` step's chosen speaker
        make_record(session, step_id, message.sender, message, iteration, outcome.result, started)
    )
    state.pointer.current = outcome.next_step
    state.undecided = None
    if outcome.next_step is None:
        state.concluding = Concluding(outcome.stop_reason or "flow_end", outcome.stop_detail)
    return events


# -------------------------------------------------------------------- director
def director_plan(session: DriverSite, director: Director) -> Next:
    """The director's next turn as a plan (its message hooks run after it)."""
    planned = director.plan(session)
    if isinstance(planned, Stop):
        return planned

    def decide_now(message: TranscriptMessage, started: datetime) -> list[Event]:
        caused = director.completed(session, planned, message)
        step_id = planned.step_id or ""
        iteration = planned.loop_iteration or 0
        record = make_record(
            session, step_id, planned.speaker, message, iteration, "success", started
        )
        return [record, *caused]

    async def then(spoken: Spoken) -> Next:
        if spoken.message is not None and not session.finished:  # (a stall finishes it)
            for hook in session.message_hooks:
                await hook(session, spoken.message)
        return None

    return TurnPlan(
        planned.speaker,
        planned.target,
        step_id=planned.step_id,
        loop_iteration=planned.loop_iteration,
        instruction=planned.instruction,
        begin=True,
        decide=decide_now,
        then=then,
        audience=planned.audience,
        inherit=planned.inherit,
    )


# ----------------------------------------------------------------------- final
def conclude(session: DriverSite, stop: Stop) -> Next:
    """Finish, after the flow's final step (a synthesis) when it has one."""
    state = session.state
    final = session.engine.flow.final if session.engine is not None else None
    if final is None or stop.reason == "manual" or state.final_done:
        state.concluding = None
        session.finish(stop.reason, stop.detail)
        return None
    state.concluding = Concluding(stop.reason, stop.detail)
    target, warning = resolve_target(final.reply_to, state.transcript, final.speaker)
    if warning:
        session.bus.publish(WarningEvent(message=f"step {final.id}: {warning}"))
    instruction = (
        session.final_instruction(session)
        if session.final_instruction is not None
        else final.instruction
    )

    def decide_now(message: TranscriptMessage, started: datetime) -> list[Event]:
        state.final_done = True
        return [make_record(session, final.id, final.speaker, message, 0, "success", started)]

    async def then(spoken: Spoken) -> Next:
        if spoken.message is None and state.state == "paused":
            return None  # failed or cancelled: resume tries the final step again
        state.final_done = True
        state.concluding = None
        session.finish(stop.reason, stop.detail)
        return None

    return TurnPlan(
        final.speaker,
        target,
        step_id=final.id,
        loop_iteration=0,
        instruction=instruction,
        finish_on_budget=False,
        begin=True,
        decide=decide_now,
        then=then,
        inherit=False,  # the closing synthesis is said to everyone
    )


# ----------------------------------------------------------------------- extra
async def extra_turn(
    session: DriverSite,
    role_id: str,
    target: TranscriptMessage | None,
    *,
    step_id: str,
    instruction: str | None = None,
) -> TranscriptMessage | None:
    """A turn outside the flow's steps (a judge's verdict), from a message hook.

    Counted in every budget; it leaves no execution-log record. None when the
    budgets forbid it or the generation failed.
    """
    plan = TurnPlan(
        role_id,
        target,
        step_id=step_id,
        instruction=instruction,
        finish_on_budget=False,
        watched=False,
    )
    return (await session.speak(plan)).message


# --------------------------------------------------------------------- records
def condition_events(evaluations: list[tuple[str, Evaluation]]) -> list[Event]:
    """One ``system/condition`` event per evaluation made (flows.md, Conditions)."""
    return [
        ConditionEvent.trusted(
            condition=ev.condition, result=bool(ev.result), detail=ev.detail, context=where
        )
        for where, ev in evaluations
    ]


def make_record(
    session: DriverSite,
    step_id: str,
    speaker: str,
    message: TranscriptMessage,
    iteration: int,
    result: str,
    started: datetime,
) -> StepEvent:
    """Append one execution-log record; its ``system/step`` event (not yet published)."""
    state = session.state
    record = ExecutionRecord(
        execution_order=state.pointer.execution_order,
        step_id=step_id,
        speaker=speaker,
        message_id=message.id,
        loop_iteration=iteration,
        result=result,
        started_at=started,
        ended_at=session.clock(),
        input_tokens=message.input_tokens,
        output_tokens=message.output_tokens,
    )
    state.execution_log.append(record)
    return StepEvent.trusted(**record.__dict__)
