"""A turn with tools (tools.md): the model asks for calls, they are approved and run, it
is asked again with their results, until it answers in text.

Each call is a ``messages/tool_call`` event, its decision a ``system/tool_approval``,
its result a ``messages/tool_result``: each stored before it is published (through the
session's ``emit``). The turn in progress is kept in the session's state
(``extra["tool_turn"]``), stored with every event, so a resumed session goes on from
the stored results: a stored call is never run again (one cut while it ran gets an
error result saying so).

Every call of a model round is kept in the turn as soon as the model asked for it,
marked ``pending`` until it starts (its ``messages/tool_call``): a session stopped
during the first of two calls, resumed, gives the first the error result and runs the
second, as the uninterrupted session would have, and asks the model with both results.
So a recording made across the stop and the resume (``--record`` both times) replays
(docs/replay.md): the cut call's error result is recorded as its result.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol

from rolecall.bus import (
    Bus,
    Event,
    ToolApprovalEvent,
    ToolCallEvent,
    ToolResultEvent,
    WarningEvent,
)
from rolecall.generation import Generated, Generator
from rolecall.llm.hygiene import Participants
from rolecall.llm.protocol import ChatModel
from rolecall.llm.types import ChatMessage, GenerationRequest, ToolCall, ToolDef
from rolecall.session.state import SessionState
from rolecall.tools.approval import Approver, PendingCall, decide
from rolecall.tools.box import ToolBox
from rolecall.tools.names import NameMap
from rolecall.tools.specs import CallOutcome, ToolSpec
from rolecall.world.models import Role, World

TURN_KEY = "tool_turn"  # the turn in progress, in SessionState.extra
TOTAL_KEY = "tool_calls_total"  # calls made in the session
FenceHook = Callable[[Literal["request", "tool"]], Awaitable[None]]
"""Awaited before every model request (``"request"``) and every tool call (``"tool"``)
of a session, whatever the model: it raises when the session is no longer this
process's to run (a NATS worker that lost its lease, nats.md), so nothing is asked and no
tool runs for it."""
INTERRUPTED = "the call was interrupted (the session stopped while it ran); it is not run again"


class ToolSite(Protocol):
    """What a turn with tools needs of the session (``runtime.Dialogue``)."""

    world: World
    state: SessionState
    generator: Generator
    bus: Bus
    tools: ToolBox | None
    approver: Approver | None
    fence_hooks: list[FenceHook]

    def emit(self, events: list[Event]) -> Awaitable[None]: ...


def tool_defs(specs: list[ToolSpec], names: NameMap) -> tuple[ToolDef, ...]:
    return tuple(
        ToolDef(names.to_provider[s.name], s.description, s.parameters, s.name) for s in specs
    )


def _offer(box: ToolBox, role: Role) -> tuple[NameMap, tuple[ToolDef, ...]]:
    """The names and definitions ``role`` is offered: the same every turn (the tools are
    listed once per session), so worked out on its first turn only."""
    key = (role.id, tuple(role.tools or ()))
    offer: tuple[NameMap, tuple[ToolDef, ...]] | None = box.offers.get(key)
    if offer is None:
        specs = box.for_role(role)
        names = NameMap(s.name for s in specs)
        offer = box.offers[key] = (names, tool_defs(specs, names))
    return offer


def _record(session: ToolSite, message_id: str, speaker: str) -> dict[str, Any]:
    """The stored turn in progress for this message, or a new one."""
    extra = session.state.extra
    record = extra.get(TURN_KEY)
    if (
        isinstance(record, dict)
        and record.get("message_id") == message_id
        and record.get("speaker") == speaker
    ):
        return record
    record = {
        "message_id": message_id,
        "speaker": speaker,
        "rounds": [],
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "seconds": 0.0,
    }
    extra[TURN_KEY] = record
    return record


def _round_messages(rounds: list[dict[str, Any]]) -> list[ChatMessage]:
    """The stored rounds as the speaker's prompt continues: its calls, their results."""
    out: list[ChatMessage] = []
    for rnd in rounds:
        calls = rnd["calls"]
        out.append(
            ChatMessage(
                "assistant",
                rnd.get("text", ""),
                tool_calls=tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in calls),
            )
        )
        for c in calls:
            content = c.get("content")
            out.append(
                ChatMessage(
                    "tool", INTERRUPTED if content is None else content, tool_call_id=c["id"]
                )
            )
    return out


async def generate_with_tools(
    session: ToolSite,
    role: Role,
    model: ChatModel,
    request: GenerationRequest,
    message_id: str,
    *,
    target: str | None,
    step_id: str | None,
    loop_iteration: int | None,
    reply_to: str | None,
    audience: Sequence[str] | None = None,
    hygiene: Participants | None = None,
) -> Generated:
    """The turn's generation with the role's tools; its final text, summed usage, and
    the ids of the calls made. Raises GenerationFailed as one generation does."""
    box = session.tools
    assert box is not None
    settings = session.world.settings
    names, defs = _offer(box, role)
    if defs and not await _calls_tools(box, model, request, role):
        defs = ()
    extra = session.state.extra
    record = _record(session, message_id, role.id)
    rounds: list[dict[str, Any]] = record["rounds"]
    await _finish_interrupted(session, record)
    for stored in rounds:  # asked for, not started when the session stopped: run them now
        for entry in stored["calls"]:
            if entry.get("pending"):
                await _one_call(session, role, box, names, entry, message_id)
    first = not rounds
    asked_before = False  # the session's call_model checked the fence before the first
    while True:
        if asked_before:
            await _fence(session, "request")
        asked_before = True
        made = sum(len(r["calls"]) for r in rounds)
        total = int(extra.get(TOTAL_KEY, 0))
        room = settings.max_tool_calls - made
        if settings.max_tool_calls_total is not None:
            room = min(room, settings.max_tool_calls_total - total)
        asked = dataclasses.replace(
            request,
            messages=(*request.messages, *_round_messages(rounds)),
            tools=defs if room > 0 else (),
        )
        generated = await session.generator.generate(
            model,
            asked,
            message_id,
            target=target,
            step_id=step_id,
            loop_iteration=loop_iteration,
            reply_to=reply_to,
            start=first,
            draft_id=session.state.next_draft_id(),
            counted=(record["input_tokens"], record["output_tokens"]),
            audience=audience,
            hygiene=hygiene,
        )
        first = False
        _add_usage(record, generated)
        if not generated.calls:
            extra.pop(TURN_KEY, None)
            ids = [c["call_id"] for r in rounds for c in r["calls"]]
            cost = record["cost_usd"]
            return Generated(
                generated.text,
                record["input_tokens"],
                record["output_tokens"],
                record["seconds"],
                None if cost is None else cost,
                tool_calls=ids,
                finish_reason=generated.finish_reason,
            )
        rnd: dict[str, Any] = {"text": generated.text, "calls": []}
        rounds.append(rnd)
        for call in generated.calls:  # all kept (pending) before the first one starts
            total = int(extra.get(TOTAL_KEY, 0)) + 1
            extra[TOTAL_KEY] = total
            rnd["calls"].append(_entry(names, call, f"c{total}", room))
            room -= 1
        for entry in rnd["calls"]:
            await _one_call(session, role, box, names, entry, message_id)


def _entry(names: NameMap, call: ToolCall, call_id: str, room: int) -> dict[str, Any]:
    """A call the model asked for, as the turn keeps it; ``room``: how many more calls
    the limits allow, this one included."""
    return {
        "id": call.call_id or call_id,
        "name": call.name,
        "arguments": call.arguments or "{}",
        "call_id": call_id,
        "tool": names.full(call.name) or call.name,
        "content": None,
        "is_error": False,
        "pending": True,  # until it starts: a session resumed runs it then
        "room": room,
    }


async def _one_call(
    session: ToolSite,
    role: Role,
    box: ToolBox,
    names: NameMap,
    entry: dict[str, Any],
    message_id: str,
) -> None:
    full = names.full(entry["name"])
    tool = entry["tool"]
    call_id = entry["call_id"]
    room = int(entry.get("room", 1))
    arguments: dict[str, Any] = {}
    problem: str | None = None
    try:
        parsed = json.loads(entry["arguments"])
    except ValueError as exc:
        parsed, problem = {}, f"refused: the arguments are not JSON ({exc})"
    if isinstance(parsed, dict):
        arguments = parsed
    elif problem is None:
        problem = "refused: the arguments are not a JSON object"
    entry.pop("pending", None)  # started: stored so with its tool_call event
    await session.emit(
        [
            ToolCallEvent(
                call_id=call_id,
                sender=role.id,
                tool=tool,
                arguments=arguments,
                message_id=message_id,
            )
        ]
    )
    events: list[Event] = []
    if full is None:
        outcome = CallOutcome(f"no tool {entry['name']} (tools: {', '.join(names.to_full)})", True)
    elif room <= 0:
        limit = session.world.settings
        outcome = CallOutcome(
            f"not run: the limit of tool calls is reached (max_tool_calls {limit.max_tool_calls}"
            + (
                f", max_tool_calls_total {limit.max_tool_calls_total}"
                if limit.max_tool_calls_total is not None
                else ""
            )
            + ")",
            True,
        )
    elif problem is not None:
        outcome = CallOutcome(problem, True)
    else:
        decision = await decide(
            role, PendingCall(call_id, role.id, full, arguments), session.approver
        )
        approval = ToolApprovalEvent(
            call_id=call_id,
            decision=decision.decision,
            by=decision.by,
            reason=decision.reason,
            arguments=(decision.arguments or {}) if decision.decision == "allow" else {},
        )
        if decision.decision == "deny":
            outcome = CallOutcome(f"refused: {decision.reason or 'not approved'}", True)
            if decision.by != "policy":
                events.append(
                    WarningEvent(message=f"tool call {call_id} refused: {decision.reason}")
                )
            await session.emit([approval, *events])
            events = []
        else:
            if decision.arguments is not None:
                arguments = decision.arguments
                entry["arguments"] = json.dumps(arguments, ensure_ascii=False)
            await session.emit([approval])
            await _fence(session, "tool")  # the side effect happens only for a session still held
            outcome = await box.call(full, arguments)
    entry["content"] = outcome.content
    entry["is_error"] = outcome.is_error
    await session.emit(
        [
            *events,
            ToolResultEvent(
                call_id=call_id,
                tool=tool,
                content=outcome.content,
                is_error=outcome.is_error,
                duration_ms=outcome.duration_ms,
            ),
        ]
    )


async def _fence(session: ToolSite, before: Literal["request", "tool"]) -> None:
    for hook in session.fence_hooks:
        await hook(before)


async def _calls_tools(
    box: ToolBox, model: ChatModel, request: GenerationRequest, role: Role
) -> bool:
    """Whether ``model`` can be offered tools; when it cannot, the role gets none and the
    session a warning, once per model (tools.md, A turn with tools). A model that does
    not say (scripted, offline, a remote agent's) can."""
    answer = getattr(model, "calls_tools", None)
    if answer is None:
        return True
    name = request.model or model.name
    if name not in box.capable:  # the model's map is read once a session, not every turn
        box.capable[name] = await answer(request)
    if box.capable[name]:
        return True
    box.warn_once(
        f"no-tools:{name}",
        f"{name} cannot call tools (litellm's model map says it has no function calling): "
        f"{role.id} and every role on it are offered none",
    )
    return False


async def _finish_interrupted(session: ToolSite, record: dict[str, Any]) -> None:
    """A call stored without a result (the process stopped while it ran) gets an error
    result now: it is never run again. Recording (``--record``), that result is kept as
    the call's, so a replay of the recording gives the same transcript."""
    tape = session.tools.tape if session.tools is not None else None
    for rnd in record["rounds"]:
        for c in rnd["calls"]:
            if c.get("content") is None and not c.get("pending"):
                c["content"] = INTERRUPTED
                c["is_error"] = True
                if tape is not None and not tape.replaying:
                    arguments = json.loads(c.get("arguments") or "{}")
                    if isinstance(arguments, dict):
                        tape.keep_unrecorded(c["tool"], arguments, CallOutcome(INTERRUPTED, True))
                await session.emit(
                    [
                        ToolResultEvent(
                            call_id=c["call_id"], tool=c["tool"], content=INTERRUPTED, is_error=True
                        )
                    ]
                )


def _add_usage(record: dict[str, Any], generated: Generated) -> None:
    record["input_tokens"] += generated.input_tokens
    record["output_tokens"] += generated.output_tokens
    record["seconds"] += generated.seconds
    if record["cost_usd"] is None or generated.cost_usd is None:
        record["cost_usd"] = None
    else:
        record["cost_usd"] += generated.cost_usd
