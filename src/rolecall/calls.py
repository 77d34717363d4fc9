"""One model call for a session's turn: the prompt, the budgets, the generation.

:func:`call_model` builds the speaker's prompt from the transcript (its memory window,
the reply target, the step's instruction), checks the budgets before the call
(``max_tokens``, ``max_cost``: over one, the session finishes), and runs the
generation; a failed or cancelled one leaves its partial text as a draft and pauses
the session. It sees the session only as a :class:`CallSite`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from rolecall.bus import Bus, ErrorEvent, WarningEvent
from rolecall.generation import Generated, GenerationFailed, Generator
from rolecall.llm import pricing
from rolecall.llm.hygiene import Participants, participants
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    Price,
    Reference,
    TurnInfo,
    estimate_tokens,
    prompt_tokens,
)
from rolecall.prompt import build_prompt, persona, system_text, turn_text
from rolecall.session.state import Draft, SessionState, TranscriptMessage
from rolecall.tools.approval import Approver
from rolecall.tools.box import ToolBox
from rolecall.tools.turn import FenceHook, generate_with_tools
from rolecall.world.models import Role, World
from rolecall.world.targets import budget_block

if TYPE_CHECKING:  # imported when a world uses them (start-up stays lean)
    from rolecall.knowledge.base import KnowledgeBase
    from rolecall.knowledge.summary import Summary

RequestHook = Callable[[], Awaitable[None]]
"""Awaited before a model is asked for a message (see :attr:`CallSite.request_hooks`), unless
asking it again would cost nothing (``repeatable``, see
:class:`rolecall.llm.protocol.ChatModel`)."""


class CallSite(Protocol):
    """What a model call needs of the session (``runtime.Dialogue``)."""

    world: World
    state: SessionState
    models: ModelRegistry
    generator: Generator
    bus: Bus
    log: Any
    request_hooks: list[RequestHook]
    fence_hooks: list[FenceHook]  # before every model request and tool call (nats.md)
    role_ids: list[str]  # the world's, in order
    system_texts: dict[str, str]  # each role's system prompt, built on its first call
    tools: ToolBox | None  # tools.md: the session's tools, None when the world has none
    approver: Approver | None
    knowledge: KnowledgeBase | None  # the world's collections, indexed (knowledge.md)
    summaries: dict[str, Summary]  # each role's running summary (long sessions)

    def clock(self) -> datetime: ...

    def emit(
        self, events: list[Any], message: TranscriptMessage | None = None
    ) -> Awaitable[None]: ...

    def model_name(self, role: Role) -> str: ...

    def finish(self, reason: str, detail: str) -> None: ...

    def pause_now(self, reason: str) -> None: ...


def reply_hygiene(world: World, role: Role) -> Participants | None:
    """The tags ``role``'s replies are filtered by (real-models.md), None when the
    world's ``reply_hygiene`` is off."""
    if world.settings.reply_hygiene == "off":
        return None
    others = tuple((r.id, r.display_name) for r in world.roles if r.id != role.id)
    return participants((role.id, role.display_name), others)


def stop_sequences(world: World, role: Role) -> tuple[str, ...]:
    """The stop sequences sent to providers that take them: the start of a line in
    which the human or another participant would speak (their bracketed and named
    tags): the human's first, then the others' bracketed tags (as the prompt shows
    their messages), then their names; a client sends what its provider accepts
    (llm/caps.py)."""
    others = [r for r in world.roles if r.id != role.id]
    out = ["\nhuman:", "\nUser:", *(f"\n[{r.id}]" for r in others)]
    out.extend(f"\n{r.display_name}:" for r in others)
    return tuple(dict.fromkeys(out))


async def call_model(
    session: CallSite,
    role: Role,
    target: TranscriptMessage | None,
    *,
    step_id: str | None,
    loop_iteration: int | None,
    instruction: str | None = None,
    finish_on_budget: bool = True,
    audience: Sequence[str] | None = None,
) -> Generated | None:
    """One model call under the budgets; None when it did not produce a message.

    Over a budget the session finishes (``finish_on_budget``); a failed or cancelled
    generation keeps its partial text as a draft and pauses the session.
    """
    world = session.world
    transcript = session.state.transcript
    system = session.system_texts.get(role.id)
    if system is None:
        system = session.system_texts[role.id] = system_text(world, role)
    message_id = transcript.next_id()
    context: list[str] = []
    references: tuple[Reference, ...] = ()
    found = None
    if role.knowledge and session.knowledge is not None:
        from rolecall.knowledge.turn import retrieve

        found = retrieve(session.knowledge, world, role, target, instruction, message_id)
        if found.block is not None:
            context.append(found.block)
            references = found.references
    lore = None
    if world.lore:
        from rolecall.knowledge.lore import lore_for

        lore = lore_for(world, role, transcript, target, message_id)
    if lore is not None and lore.block is not None:
        context.append(lore.block)
    memory_start = session.state.memory_start.get(role.id, 0)
    summary: Summary | None = None
    window: int | None = None
    settings = world.settings
    if settings.context_tokens is not None:  # fold older messages past the budget
        from rolecall.knowledge.summary import fold

        fixed = estimate_tokens(system) + sum(estimate_tokens(c) for c in context)
        fixed += estimate_tokens(turn_text(world, role, target, instruction)) + 12
        if target is not None:
            fixed -= (len(target.content) + 3) // 4  # quoted, not in the memory
        memory_start, summary = await fold(
            session, role, memory_start, fixed, settings.context_tokens
        )
        window = len(transcript)
    prompt = build_prompt(
        world,
        role,
        transcript,
        target=target,
        instruction=instruction,
        memory_start=memory_start,
        system=system,
        context=context,
        summary=summary.as_prompt() if summary is not None else None,
        window=window,
    )
    schema = role.output_schema
    if schema is not None:  # the reply's shape, said in the prompt (selection.md)
        from rolecall.llm.shape import instruction as shape_instruction

        last = prompt[-1]
        shaped = f"{last.content}\n\n{shape_instruction(schema)}"
        prompt = (*prompt[:-1], ChatMessage(last.role, shaped, last.name))
    hygiene = reply_hygiene(world, role)
    model_name = session.model_name(role)
    model = session.models.for_role(role.id, model_name, remote=role.transport == "nats")
    price = Price(role.price.input_per_mtok, role.price.output_per_mtok) if role.price else None
    next_cost: float | None = 0.0
    if settings.max_tokens is None and settings.max_cost is None:
        next_input = prompt_tokens(prompt)
    else:
        guess = await pricing.estimate(
            model,
            model_name,
            prompt,
            price=price,
            max_output=role.reply_cap(settings),
            want_tokens=settings.max_tokens is not None,
            want_cost=settings.max_cost is not None,
        )
        next_input, next_cost = guess.input_tokens, guess.cost_usd
    why = pricing.unpriced(model_name) if next_cost is None else ""
    blocked = budget_block(settings, transcript, next_input, next_cost, why)
    if blocked is not None:
        if finish_on_budget:
            session.finish(*blocked)
        return None
    request = GenerationRequest(
        model=model_name,
        messages=prompt,
        persona=persona(role),
        info=TurnInfo(
            turn=len(transcript) + 1,
            n=transcript.turns_by_role.get(role.id, 0) + 1,
            speaker=role.id,
            target=target.sender if target else None,
            target_text=target.content if target else None,
            topic=world.topic,
            instruction=instruction,
            step_id=step_id,
            target_name=(
                world.role(target.sender).display_name
                if target is not None and target.sender in session.role_ids
                else None
            ),
        ),
        temperature=role.temperature,
        max_tokens=role.reply_cap(settings),
        api_base=role.api_base or settings.api_base,
        api_key_env=role.api_key_env or settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        script=role.script_entries(),
        world_title=world.title or world.name,
        participants=tuple(session.role_ids),
        price=price,
        client=settings.client,
        references=references,
        output_schema=schema,
        stop=stop_sequences(world, role) if hygiene is not None else (),
    )
    if found is not None:
        session.bus.publish(found.event)  # before the model is asked (knowledge.md)
    for event in lore.events if lore is not None else ():
        session.bus.publish(event)
    if session.request_hooks and not getattr(model, "repeatable", False):
        for hook in session.request_hooks:
            await hook()
    for fence in session.fence_hooks:  # whatever the model: a session lost asks nothing
        await fence("request")
    try:
        generated = await _generate(
            session,
            role,
            model,
            request,
            message_id,
            target,
            step_id,
            loop_iteration,
            audience,
            hygiene,
        )
    except GenerationFailed as failure:
        _failed(session, failure, message_id, role, step_id, request)
        return None
    if schema is not None:
        generated = await _shaped(session, role, model, request, generated, schema)
    return generated


async def _shaped(
    session: CallSite,
    role: Role,
    model: Any,
    request: GenerationRequest,
    generated: Generated,
    schema: dict[str, Any],
) -> Generated:
    """The reply of a role with ``output:`` read as JSON and checked against its schema;
    once invalid, one repair round (the model shown the error); still invalid, stored with
    ``data_error`` and a ``system/warning`` (selection.md)."""
    from dataclasses import replace

    from rolecall.llm.shape import read, repair

    data, error = read(generated.text, schema)
    if error is None:
        return replace(generated, data=data)
    text, more_in, more_out, more_cost = await repair(model, request, generated.text, error)
    cost = generated.cost_usd
    cost = None if cost is None or more_cost is None else cost + more_cost
    if text is not None:
        repaired, still = read(text, schema)
        generated = replace(
            generated,
            text=text if text.strip() else generated.text,
            input_tokens=generated.input_tokens + more_in,
            output_tokens=generated.output_tokens + more_out,
            cost_usd=cost,
        )
        if still is None:
            return replace(generated, data=repaired)
        error = still
    session.bus.publish(
        WarningEvent(
            message=f"{role.id}'s reply does not match its output schema, even after one "
            f"repair: {error}"
        )
    )
    return replace(generated, data=None, data_error=error)


async def _generate(
    session: CallSite,
    role: Role,
    model: Any,
    request: GenerationRequest,
    message_id: str,
    target: TranscriptMessage | None,
    step_id: str | None,
    loop_iteration: int | None,
    audience: Sequence[str] | None = None,
    hygiene: Participants | None = None,
) -> Generated:
    """The generation itself: with the role's tools, or one streamed reply."""
    if role.tools and session.tools is not None:
        return await generate_with_tools(
            session,
            role,
            model,
            request,
            message_id,
            target=target.sender if target else None,
            step_id=step_id,
            loop_iteration=loop_iteration,
            reply_to=target.id if target else None,
            audience=audience,
            hygiene=hygiene,
        )
    return await session.generator.generate(
        model,
        request,
        message_id,
        target=target.sender if target else None,
        step_id=step_id,
        loop_iteration=loop_iteration,
        reply_to=target.id if target else None,
        draft_id=session.state.next_draft_id(),
        audience=audience,
        hygiene=hygiene,
    )


def _failed(
    session: CallSite,
    failure: GenerationFailed,
    message_id: str,
    role: Role,
    step_id: str | None,
    request: GenerationRequest,
) -> None:
    """A failed or cancelled generation: its partial text kept as a draft; paused."""
    session.state.drafts.append(
        Draft(
            id=session.state.next_draft_id(),
            message_id=message_id,
            sender=role.id,
            content=failure.partial,
            reason=failure.reason,
            step_id=step_id,
            ts=session.clock(),
        )
    )
    if failure.error is not None:
        session.bus.publish(ErrorEvent(error=str(failure.error), source=f"model:{request.model}"))
        session.log.info("generation_failed", model=request.model, error=str(failure.error))
    session.pause_now("error" if failure.reason == "error" else "cancelled")
