"""Judge roles in any world (modes.md, Judge roles), and the judging machinery of presets.

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
``session.state.extra["judge_scores"][judge]`` (latest value per score name), which
``{judge: persuasiveness, at_least: 8}`` conditions read before the flow decides what
comes next.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from rolecall.bus import JudgeEvent, WarningEvent
from rolecall.errors import WorldError
from rolecall.flows.model import Ident
from rolecall.modes import register_installer
from rolecall.world.library import suggest

if TYPE_CHECKING:
    from rolecall.runtime import Session
    from rolecall.session.state import Message

DEFAULT_SCORES: tuple[str, ...] = ("score",)


class _Options(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class JudgeBlock(_Options):
    """The top-level ``judge:`` block of a world."""

    role: Ident = "judge"
    after: Literal["all"] | list[Ident] = "all"
    scores: list[Ident] = Field(default_factory=lambda: list(DEFAULT_SCORES))
    scale: tuple[StrictInt | StrictFloat, StrictInt | StrictFloat] = (0, 10)
    about: Literal["message", "exchange"] = "message"
    instruction: str | None = None


# ------------------------------------------------------------ option problems
def option_problems(prefix: str, exc: ValidationError, fields: list[str]) -> list[str]:
    """Pydantic errors of an options block as ``path: what (hint)`` lines."""
    out: list[str] = []
    for err in exc.errors():
        loc = [str(p) if not isinstance(p, int) else f"[{p}]" for p in err["loc"]]
        where = prefix
        for part in loc:
            if part.startswith("[") or ":" in part or "[" in part or "(" in part:
                where += part if part.startswith("[") else ""
            else:
                where += f".{part}"
        kind = err["type"]
        value = err.get("input")
        if kind == "extra_forbidden":
            key = str(err["loc"][-1])
            hint = suggest(key, fields, listing=False)
            out.append(f"{where}: unknown field{hint or ' (fields: ' + ', '.join(fields) + ')'}")
        elif kind == "missing":
            out.append(f"{where}: required field missing")
        elif kind == "string_pattern_mismatch":
            out.append(
                f"{where}: bad id {value!r} (use lowercase letters, digits, _ and -, "
                "starting with a letter)"
            )
        else:
            msg = err["msg"]
            shown = f" (got {value!r})" if not isinstance(value, dict | list) else ""
            out.append(f"{where}: {msg[0].lower() + msg[1:]}{shown}")
    return list(dict.fromkeys(out))


def parse_block(raw: Any) -> tuple[JudgeBlock | None, list[str]]:
    """The judge block as a model, or the problems with it (paths under ``judge``)."""
    if raw is None:
        return None, []
    if not isinstance(raw, dict):
        return None, [f"judge: expected a mapping like {{role: judge, after: all}}, got {raw!r}"]
    try:
        block = JudgeBlock.model_validate(raw)
    except ValidationError as exc:
        return None, option_problems("judge", exc, list(JudgeBlock.model_fields))
    problems = []
    lo, hi = block.scale
    if lo >= hi:
        problems.append(f"judge.scale: the low end must be below the high end, got [{lo}, {hi}]")
    if len(set(block.scores)) != len(block.scores):
        problems.append("judge.scores: duplicate score names")
    return (None if problems else block), problems


def check_world(data: Mapping[str, Any]) -> list[str]:
    """Problems of a raw world mapping's ``judge:`` block, with paths and hints.

    Checks the block's fields, that its role exists and that ``after`` names steps.
    """
    raw = data.get("judge")
    if raw is None:
        return []
    block, problems = parse_block(raw)
    if block is None:
        return problems
    roles = data.get("roles")
    role_ids: list[str] = []
    for role in roles if isinstance(roles, list) else []:
        rid = role.get("id", role.get("template")) if isinstance(role, dict) else None
        if isinstance(rid, str):
            role_ids.append(rid)
    if block.role not in role_ids:
        listing = ", ".join(role_ids) or "none defined"
        problems.append(
            f"judge.role: no role '{block.role}'{suggest(block.role, role_ids, listing=False)} "
            f"(roles: {listing}; add one, e.g. {{template: judge}})"
        )
    flow = data.get("flow")
    steps = flow.get("steps") if isinstance(flow, dict) else None
    if isinstance(block.after, list):
        if not isinstance(steps, list):
            problems.append("judge.after: the world has no flow, so no steps to judge after")
        else:
            step_ids = [s["id"] for s in steps if isinstance(s, dict) and "id" in s]
            for i, sid in enumerate(block.after):
                if sid not in step_ids:
                    problems.append(
                        f"judge.after[{i}]: no step '{sid}'"
                        f"{suggest(sid, step_ids, listing=False)} (steps: {', '.join(step_ids)})"
                    )
    return problems


# --------------------------------------------------------------- JSON replies
def find_json_object(text: str) -> dict[str, Any] | None:
    """The first JSON object in ``text``: the whole text, a fenced block, or embedded."""
    decoder = json.JSONDecoder()
    stripped = text.strip()
    candidates = [stripped]
    if "```" in stripped:
        for chunk in stripped.split("```")[1::2]:
            body = chunk.split("\n", 1)[1] if chunk.lstrip().startswith("json") else chunk
            candidates.append(body.strip())
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    start = text.find("{")
    while start != -1:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
    return None


@dataclass(frozen=True)
class Parsed:
    """A judge's valid answer: the scores (for conditions) and the whole verdict."""

    scores: dict[str, float]
    verdict: dict[str, Any] = field(default_factory=dict)


class Invalid(ValueError):
    """A judge's answer that does not follow the JSON contract (says why)."""


Parser = Callable[[str], Parsed]


def score_parser(names: list[str], scale: tuple[float, float]) -> Parser:
    """Parses ``{"scores": {name: n, ...}, ...}`` (or the names at the top level)."""
    lo, hi = scale

    def parse(text: str) -> Parsed:
        obj = find_json_object(text)
        if obj is None:
            raise Invalid("no JSON object found")
        inner = obj.get("scores")
        source = inner if isinstance(inner, dict) else obj
        scores: dict[str, float] = {}
        for name in names:
            value = source.get(name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise Invalid(f"score {name!r} missing or not a number")
            if not lo <= value <= hi:
                raise Invalid(f"score {name!r} = {value} is outside {lo:g}..{hi:g}")
            scores[name] = float(value)
        return Parsed(scores, obj)

    return parse


def score_format(names: list[str], scale: tuple[float, float]) -> str:
    lo, hi = scale
    inner = ", ".join(f'"{n}": <number {lo:g}-{hi:g}>' for n in names)
    return '{"scores": {' + inner + '}, "comment": "<one sentence>"}'


async def ask_judge(
    session: Session,
    judge: str,
    about: Message,
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
        reply = await session.extra_turn(judge, about, step_id=step_id, instruction=prompt)
        if reply is None:
            return None
        try:
            parsed = parse(reply.content)
        except Invalid as exc:
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


def hooked_message(session: Session, message: Message) -> Message:
    """The flow step's message a hook is about.

    When a hook's turn failed, resume reruns the hooks with the session's latest message,
    which may be a judge's reply; the step still undecided names the right message.
    """
    undecided = session.state.extra.get("undecided")
    if isinstance(undecided, list) and len(undecided) == 4:
        return session.state.transcript.by_id.get(str(undecided[3]), message)
    return message


def store_scores(session: Session, judge: str, scores: Mapping[str, float]) -> None:
    """Keep the latest scores where ``{judge: NAME, at_least: N}`` conditions read them."""
    table = session.state.extra.setdefault("judge_scores", {})
    table.setdefault(judge, {}).update(scores)
    if session.ctx.judge_scores is not table:
        session.ctx.judge_scores = table


# ----------------------------------------------------------- judges in worlds
@dataclass(frozen=True)
class _Plan:
    """Which judge judges after which step, with what scores."""

    block: JudgeBlock | None
    by_step: dict[str, list[str]]  # step id -> judge role ids


def _plan(session: Session) -> _Plan | None:
    world = session.world
    block, _ = parse_block(world.judge)
    if world.judge is not None:
        data: dict[str, Any] = {"judge": world.judge, "roles": [{"id": r} for r in world.role_ids]}
        if world.flow is not None:
            data["flow"] = {"steps": [{"id": s.id} for s in world.flow.steps]}
        problems = check_world(data)
        if problems:
            raise WorldError(world.name, problems)
    by_step: dict[str, list[str]] = {}
    if world.flow is None:
        return None
    for step in world.flow.steps:
        judges: list[str] = []
        if block is not None and (block.after == "all" or step.id in block.after):
            judges.append(block.role)
        if step.judge is not None and step.judge not in judges:
            judges.append(step.judge)
        judges = [j for j in judges if j != step.speaker]  # a judge never judges itself
        if judges:
            by_step[step.id] = judges
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
    session: Session, about: Message, names: list[str], scale: tuple[float, float], scope: str
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


def install(session: Session) -> None:
    """Attach the world's judges (top-level block and step ``judge:``) to the session."""
    plan = _plan(session)
    if plan is None:
        return

    async def after_message(session: Session, message: Message) -> None:
        message = hooked_message(session, message)
        step_id = message.step_id
        if step_id is None or step_id not in plan.by_step:
            return
        done = session.state.extra.get("judged")
        if not isinstance(done, list) or len(done) != 2 or done[0] != message.id:
            done = [message.id, []]
        for judge in plan.by_step[step_id]:
            if session.finished:
                return
            if judge in done[1]:
                continue  # judged already: the hooks run again on resume after a failure
            names, scale, scope, extra = _settings_for(plan, judge)
            instruction, retry = _instruction(session, message, names, scale, scope)
            if extra:
                instruction = f"{extra} {instruction}"
            judge_step = f"judge:{step_id}"
            if not names:
                reply = await session.extra_turn(
                    judge, message, step_id=judge_step, instruction=instruction
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
                done[1].append(judge)
                session.state.extra["judged"] = done
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
            done[1].append(judge)
            session.state.extra["judged"] = done

    session.message_hooks.append(after_message)


register_installer(install)
