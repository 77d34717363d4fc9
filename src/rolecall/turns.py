"""Turns driven by a flow or a director, the closing final step, and extra turns.

Each function takes the :class:`Session` whose turn lock is held by the caller. A
flow turn stores its message and the decision that follows it (conditions, the
execution-log record, the pointer) in one transaction; with message hooks (a judge)
the decision is stored right after them, and an interrupted decision is redone on
resume without regenerating the message.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rolecall.bus import ConditionEvent, Event, StepEvent, WarningEvent
from rolecall.flows.conditions import Evaluation
from rolecall.flows.engine import FlowEngine
from rolecall.flows.targets import resolve_target
from rolecall.session.state import ExecutionRecord, Message

if TYPE_CHECKING:
    from rolecall.runtime import Director, Session


async def flow_turn(session: Session, engine: FlowEngine) -> None:
    state = session.state
    pointer = state.pointer
    if not pointer.started and pointer.current is None:
        pointer.current = engine.start
    if pointer.current is None:
        return
    step = engine.step(pointer.current)
    target, warning = resolve_target(step.reply_to, state.transcript)
    if warning:
        session.bus.publish(WarningEvent(message=f"step {step.id}: {warning}"))
    started = session.clock()
    iteration = pointer.exec_counts.get(step.id, 0)
    generated = await session._call(
        session.world.role(step.speaker),
        target,
        step_id=step.id,
        loop_iteration=iteration,
        instruction=step.instruction,
    )
    if generated is None:
        return
    message = session._message(
        step.speaker,
        "agent",
        generated.text,
        target=target,
        step_id=step.id,
        loop_iteration=iteration,
        generated=generated,
    )
    pointer.begin(step.id)
    if session.message_hooks:
        session.state.extra["undecided"] = [step.id, iteration, started.isoformat(), message.id]
        await session._commit(message)
        await after_hooks(session, engine, message)
    else:
        await session._commit(
            message, decide=lambda: decide(session, engine, step.id, message, iteration, started)
        )
    if "concluding" in session.state.extra:
        reason, detail = session.state.extra["concluding"]
        await conclude(session, reason, detail)


async def after_hooks(session: Session, engine: FlowEngine, message: Message) -> None:
    """Run message hooks (a judge), then decide; also resumes an undecided step."""
    step_id, iteration, started, _ = session.state.extra["undecided"]
    for hook in session.message_hooks:
        await hook(session, message)
    if session.state.state == "paused":
        return  # a hook's generation failed; resume runs the hooks again
    await session._emit(
        decide(session, engine, step_id, message, iteration, datetime.fromisoformat(started))
    )
    if "concluding" in session.state.extra:
        reason, detail = session.state.extra["concluding"]
        await conclude(session, reason, detail)


def decide(
    session: Session,
    engine: FlowEngine,
    step_id: str,
    message: Message,
    iteration: int,
    started: datetime,
) -> list[Event]:
    """Evaluate what comes after ``step_id``; update the pointer; the events to publish."""
    pointer = session.state.pointer
    outcome = engine.after_step(step_id, pointer, session.ctx)
    events: list[Event] = [
        ConditionEvent(condition=ev.condition, result=ev.result, detail=ev.detail, context=where)
        for where, ev in outcome.evaluations
    ]
    step = engine.step(step_id)
    events.append(
        make_record(session, step_id, step.speaker, message, iteration, outcome.result, started)
    )
    pointer.current = outcome.next_step
    session.state.extra.pop("undecided", None)
    if outcome.next_step is None:
        session.state.extra["concluding"] = [
            outcome.stop_reason or "flow_end",
            outcome.stop_detail,
        ]
    return events


async def director_turn(session: Session, director: Director) -> None:
    planned = director.plan(session)
    if isinstance(planned, tuple):
        await conclude(session, *planned)
        return
    started = session.clock()
    generated = await session._call(
        session.world.role(planned.speaker),
        planned.target,
        step_id=planned.step_id,
        loop_iteration=planned.loop_iteration,
        instruction=planned.instruction,
    )
    if generated is None:
        return
    message = session._message(
        planned.speaker,
        "agent",
        generated.text,
        target=planned.target,
        step_id=planned.step_id,
        loop_iteration=planned.loop_iteration,
        generated=generated,
    )
    session.state.pointer.begin(planned.step_id)
    caused = director.completed(session, planned, message)
    await session._commit(
        message,
        decide=lambda: [
            make_record(
                session,
                planned.step_id,
                planned.speaker,
                message,
                planned.loop_iteration,
                "success",
                started,
            ),
            *caused,
        ],
    )
    for hook in session.message_hooks:
        await hook(session, message)


async def conclude(session: Session, reason: str, detail: str) -> None:
    """Finish, after the flow's final step (a synthesis) when it has one."""
    final = session.engine.flow.final if session.engine is not None else None
    if final is None or reason == "manual" or session.state.extra.get("final_done"):
        session.state.extra.pop("concluding", None)
        session._finish(reason, detail)
        return
    session.state.extra["concluding"] = [reason, detail]
    target, warning = resolve_target(final.reply_to, session.state.transcript)
    if warning:
        session.bus.publish(WarningEvent(message=f"step {final.id}: {warning}"))
    started = session.clock()
    generated = await session._call(
        session.world.role(final.speaker),
        target,
        step_id=final.id,
        loop_iteration=0,
        instruction=(
            session.final_instruction(session)
            if session.final_instruction is not None
            else final.instruction
        ),
        finish_on_budget=False,
    )
    if generated is None and session.state.state == "paused":
        return  # failed or cancelled: resume tries the final step again
    if generated is not None:
        message = session._message(
            final.speaker,
            "agent",
            generated.text,
            target=target,
            step_id=final.id,
            loop_iteration=0,
            generated=generated,
        )
        session.state.pointer.begin(final.id)
        session.state.extra["final_done"] = True
        await session._commit(
            message,
            decide=lambda: [
                make_record(session, final.id, final.speaker, message, 0, "success", started)
            ],
        )
    session.state.extra["final_done"] = True
    session.state.extra.pop("concluding", None)
    session._finish(reason, detail)


async def extra_turn(
    session: Session,
    role_id: str,
    target: Message | None,
    *,
    step_id: str,
    instruction: str | None = None,
) -> Message | None:
    """A turn outside the flow's steps (a judge's verdict), from a message hook.

    Counted in every budget; it leaves no execution-log record. None when the
    budgets forbid it or the generation failed.
    """
    generated = await session._call(
        session.world.role(role_id),
        target,
        step_id=step_id,
        loop_iteration=None,
        instruction=instruction,
        finish_on_budget=False,
    )
    if generated is None:
        return None
    message = session._message(
        role_id, "agent", generated.text, target=target, step_id=step_id, generated=generated
    )
    await session._commit(message)
    return message


def publish_evaluations(session: Session, evaluations: list[tuple[str, Evaluation]]) -> None:
    for where, ev in evaluations:
        session.bus.publish(
            ConditionEvent(
                condition=ev.condition, result=ev.result, detail=ev.detail, context=where
            )
        )


def make_record(
    session: Session,
    step_id: str,
    speaker: str,
    message: Message,
    iteration: int,
    result: str,
    started: datetime,
) -> StepEvent:
    """Append one execution-log record; its ``system/step`` event (not yet published)."""
    record = ExecutionRecord(
        execution_order=session.state.pointer.execution_order,
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
    session.state.execution_log.append(record)
    return StepEvent(**record.model_dump())


def record(
    session: Session,
    step_id: str,
    speaker: str,
    message: Message,
    iteration: int,
    result: str,
    started: datetime,
) -> None:
    """Append one execution-log record and publish it."""
    session.bus.publish(make_record(session, step_id, speaker, message, iteration, result, started))
