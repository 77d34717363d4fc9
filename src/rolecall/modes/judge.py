"""Judge roles in any world (modes.md, Judge roles), and the judging turns of presets.

A world adds a judge with a top-level block and/or ``judge: <role>`` on steps::

    judge:
      role: judge                  # the judging role (default: judge); must be in roles:
      after: [argue, rebut]        # step ids after which it judges, or `all` (default)
      scores: [persuasiveness]     # score names (default [score]); [] = comments only
      scale: [0, 10]               # the range every score must lie in (default 0..10)
      about: message               # message (the step's message) | exchange (all so far)
      instruction: Weigh evidence over rhetoric.   # optional, added to the judge's prompt

After each chosen step the judge takes an extra turn (a normal message, counted in the
budgets) answering the step's message and asked for JSON::

    {"scores": {"persuasiveness": 7}, "comment": "one sentence"}

(the scores may also stand at the top level: ``{"persuasiveness": 7}``). Prose around
the object is tolerated. A reply without a valid object is retried once with a reminder
of the format, then ignored with a ``system/warning``. Each reply gives a
``system/judge`` event; valid scores are stored in
``session.state.judge_scores[judge]`` (latest value per score name), which
``{judge: persuasiveness, at_least: 8}`` conditions read before the flow decides what
comes next.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, Field, ValidationError, model_serializer, model_validator

from rolecall.bus import JudgeEvent, WarningEvent
from rolecall.errors import WorldError
from rolecall.modes.install import register_installer
from rolecall.modes.judgments import Invalid, Parsed, Parser, score_format, score_parser
from rolecall.plans import DriverSite
from rolecall.turns import extra_turn
from rolecall.world.judge_block import (
    DEFAULT_SCORES,
    JudgeBlock,
    check_world,
    judges_by_step,
    parse_block,
)

if TYPE_CHECKING:
    from rolecall.session.state import TranscriptMessage


def _judged(session: DriverSite, judge: str, reply: TranscriptMessage) -> str:
    """What a judge's parser reads: with an ``output:`` schema, the reply's validated
    ``data`` (selection.md), never JSON found in its text; else the text."""
    if session.world.role(judge).output is None:
        return reply.content
    if reply.data is None:
        raise Invalid(f"the reply does not match the judge's output schema: {reply.data_error}")
    return json.dumps(reply.data, ensure_ascii=False)


async def ask_judge(
    session: DriverSite,
    judge: str,
    about: TranscriptMessage,
    *,
    step_id: str,
    instruction: str,
    retry_instruction: str,
    parse: Parser,
) -> Parsed | None:
    """The judge's turn on ``about``: ask, parse, retry once, else warn and ignore.

    Every reply gives a ``system/judge`` event (``valid`` false for a malformed one).
    Returns the parsed answer, or None when it was ignored or no turn could run.
    """
    prompt = instruction
    for attempt in (1, 2):
        reply = await extra_turn(session, judge, about, step_id=step_id, instruction=prompt)
        if reply is None:
            return None
        try:
            parsed = parse(_judged(session, judge, reply))
        except (ValueError, RecursionError) as exc:  # Invalid, or a parser's own surprise
            if not isinstance(exc, Invalid):
                exc = Invalid(f"the reply could not be read ({type(exc).__name__})")
            session.bus.publish(
                JudgeEvent(
                    judge=judge,
                    message_id=reply.id,
                    about=about.id,
                    verdict={"error": str(exc), "attempt": attempt},
                    valid=False,
                )
            )
            prompt = f"{retry_instruction} (Your previous reply {reply.id}: {exc}.)"
            continue
        session.bus.publish(
            JudgeEvent(
                judge=judge,
                message_id=reply.id,
                about=about.id,
                scores=parsed.scores,
                verdict=parsed.verdict,
            )
        )
        return parsed
    session.bus.publish(
        WarningEvent(
            message=f"judge {judge}: no valid JSON verdict on {about.id} after one retry; "
            "the verdict is ignored"
        )
    )
    return None


def hooked_message(session: DriverSite, message: TranscriptMessage) -> TranscriptMessage:
    """The flow step's message a hook is about.

    When a hook's turn failed, resume reruns the hooks with the session's latest message,
    which may be a judge's reply; the step still undecided names the right message.
    """
    undecided = session.state.undecided
    if undecided is not None:
        return session.state.transcript.by_id.get(undecided.message_id, message)
    return message


def store_scores(session: DriverSite, judge: str, scores: Mapping[str, float]) -> None:
    """Keep the latest scores where ``{judge: NAME, at_least: N}`` conditions read them."""
    table = session.state.judge_scores
    table.setdefault(judge, {}).update(scores)
    if session.ctx.judge_scores is not table:
        session.ctx.judge_scores = table


# ----------------------------------------------------------- judges in worlds
@dataclass(frozen=True)
class _Plan:
    """Which judge judges after which step, with what scores."""

    block: JudgeBlock | None
    by_step: dict[str, list[str]]  # step id -> judge role ids


def _plan(session: DriverSite) -> _Plan | None:
    world = session.world
    block, _ = parse_block(world.block("judge"))
    if world.block("judge") is not None:
        data: dict[str, Any] = {
            "judge": world.block("judge"),
            "roles": [{"id": r} for r in world.role_ids],
        }
        if world.flow is not None:
            data["flow"] = {"steps": [{"id": s.id} for s in world.flow.steps]}
        problems = check_world(data)
        if problems:
            raise WorldError(world.name, problems)
    by_step = judges_by_step(world, block)
    if not by_step:
        return None
    return _Plan(block, by_step)


def _settings_for(plan: _Plan, judge: str) -> tuple[list[str], tuple[float, float], str, str]:
    block = plan.block
    if block is not None and block.role == judge:
        lo, hi = block.scale
        return list(block.scores), (float(lo), float(hi)), block.about, block.instruction or ""
    return list(DEFAULT_SCORES), (0.0, 10.0), "message", ""


def _instruction(
    session: DriverSite,
    about: TranscriptMessage,
    names: list[str],
    scale: tuple[float, float],
    scope: str,
) -> tuple[str, str]:
    world = session.world
    who = about.sender
    if who in world.role_ids:
        who = f"{world.role(who).display_name} (@{who})"
    if scope == "exchange":
        what = f"the whole exchange so far, up to {who}'s message {about.id}"
    else:
        what = f"{who}'s message {about.id}"
    if not names:
        return f"As the judge, comment briefly on {what}.", ""
    lo, hi = scale
    fmt = score_format(names, scale)
    text = (
        f"As the judge, score {what} on {', '.join(names)} ({lo:g} worst, {hi:g} best). "
        f"Reply with only a JSON object in this format and nothing else: {fmt}"
    )
    retry = f"Reply again with ONLY the JSON object, exactly in this format: {fmt}"
    return text, retry


class Judged(BaseModel):
    """``extra["judged"]``: the judges done with ``message_id`` (the hooks run again on
    resume after a failure, and skip them). Stored as ``[message_id, [judge, ...]]``."""

    message_id: str
    judges: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_stored(cls, data: Any) -> Any:
        if isinstance(data, list) and len(data) == 2:
            return {"message_id": data[0], "judges": data[1]}
        return data

    @model_serializer
    def _stored(self) -> list[Any]:
        return [self.message_id, list(self.judges)]

    def add(self, session: DriverSite, judge: str) -> None:
        """``judge`` is done with the message: kept in the session's state."""
        self.judges.append(judge)
        session.state.extra["judged"] = self


def judged(session: DriverSite, message_id: str) -> Judged:
    """The judges done with ``message_id`` (none for a newer message or a damaged entry);
    stored back in ``extra`` by :meth:`Judged.add`."""
    done = session.state.extra.get("judged")
    if not isinstance(done, Judged):
        try:
            done = Judged.model_validate(done)
        except ValidationError:
            done = None
    if done is None or done.message_id != message_id:
        done = Judged(message_id=message_id)
    return done


def install(session: DriverSite) -> None:
    """Attach the world's judges (top-level block and step ``judge:``) to the session."""
    plan = _plan(session)
    if plan is None:
        return

    async def after_message(session: DriverSite, message: TranscriptMessage) -> None:
        message = hooked_message(session, message)
        step_id = message.step_id
        if step_id is None or step_id not in plan.by_step:
            return
        done = judged(session, message.id)
        for judge in plan.by_step[step_id]:
            if session.finished:
                return
            if judge in done.judges:
                continue  # judged already: the hooks run again on resume after a failure
            names, scale, scope, extra = _settings_for(plan, judge)
            instruction, retry = _instruction(session, message, names, scale, scope)
            if extra:
                instruction = f"{extra} {instruction}"
            judge_step = f"judge:{step_id}"
            if not names:
                reply = await extra_turn(
                    session, judge, message, step_id=judge_step, instruction=instruction
                )
                if session.state.state == "paused":
                    return  # failed or cancelled: resume runs this judge again
                if reply is not None:
                    session.bus.publish(
                        JudgeEvent(
                            judge=judge,
                            message_id=reply.id,
                            about=message.id,
                            verdict={"comment": reply.content},
                        )
                    )
                done.add(session, judge)
                continue
            parsed = await ask_judge(
                session,
                judge,
                message,
                step_id=judge_step,
                instruction=instruction,
                retry_instruction=retry,
                parse=score_parser(names, scale),
            )
            if session.state.state == "paused":
                return  # failed or cancelled: resume runs this judge again
            if parsed is not None:
                store_scores(session, judge, parsed.scores)
            done.add(session, judge)

    session.message_hooks.append(after_message)


register_installer(install)
