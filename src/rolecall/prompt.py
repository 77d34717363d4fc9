"""Building a turn's prompt (chat.md, Passive memory; flows.md, Reply targets). Pure.

A prompt is: the role's system prompt, style and constraints, the world's constraints
and topic; then the last K memory entries of this agent; then the turn's instruction
with the reply target quoted. The message being answered appears exactly once: it is
left out of the memory entries and quoted at the end, even when it is older than
the window.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rolecall.llm.types import ChatMessage, Persona
from rolecall.session.audience import latest_seen
from rolecall.session.state import Transcript, TranscriptMessage
from rolecall.world.models import Role, World


def persona(role: Role) -> Persona:
    """What a model may know of the role it plays (the offline model voices it)."""
    return Persona(
        role.id,
        role.display_name,
        role.description,
        role.system_prompt,
        role.style,
        tuple(role.constraints),
    )


def system_text(world: World, role: Role) -> str:
    parts = [role.system_prompt.strip() or f"You are {role.display_name}."]
    parts.append(f"You are {role.display_name} (id: {role.id}) in {world.title or world.name}.")
    if role.description:
        parts.append(f"Your role: {role.description}.")
    others = [f"{r.display_name} (@{r.id})" for r in world.roles if r.id != role.id]
    if others:
        parts.append("Other participants: " + ", ".join(others) + ", and the human (@human).")
    if role.style:
        parts.append(f"Style: {role.style}.")
    rules = [*role.constraints, *world.settings.constraints]
    if rules:
        parts.append("Constraints:\n" + "\n".join(f"- {c}" for c in rules))
    if world.topic:
        parts.append(f"Topic: {world.topic}")
    return "\n".join(parts)


def memory_entry(message: TranscriptMessage, agent_id: str, *, named: bool = False) -> ChatMessage:
    """One memory entry as this agent sees it (own messages as assistant); ``named``:
    as the prompt gives it, another's message saying who wrote it."""
    if message.kind == "system":
        return ChatMessage("system", message.content, "system")
    if message.sender == agent_id:
        return ChatMessage("assistant", message.content, agent_id)
    if named and message.sender:
        return ChatMessage("user", f"[{message.sender}] {message.content}", message.sender)
    return ChatMessage("user", message.content, message.sender)


def memory_window(
    transcript: Transcript,
    agent_id: str,
    start: int,
    window: int,
    exclude: str | None,
    limit: Collection[str] | None = None,
) -> list[ChatMessage]:
    """The last ``window`` entries from index ``start`` on that the agent saw (the one
    read, :func:`rolecall.session.audience.latest_seen`; ``limit``: its ``sees:``),
    without message ``exclude``, as the prompt gives them to the agent."""
    seen = latest_seen(
        transcript.messages, agent_id, window, start=start, exclude=exclude, limit=limit
    )
    return [memory_entry(msg, agent_id, named=True) for msg in seen]


def turn_text(
    world: World, role: Role, target: TranscriptMessage | None, instruction: str | None
) -> str:
    lines = []
    if instruction:
        lines.append(f"Instruction for this turn: {instruction}")
    if target is not None:
        who = target.sender
        if who not in ("human", "system"):
            who = f"{world.role(who).display_name} (@{who})" if who in world.role_ids else who
        lines.append(f"You are answering {who}, message {target.id}:")
        lines.extend(f"> {line}" for line in target.content.splitlines() or [""])
    elif instruction:
        lines.append("You are not answering one message: follow the instruction above.")
    else:
        lines.append("Nobody in particular is being answered; continue the conversation.")
    lines.append(f"Reply now as {role.display_name}.")
    return "\n".join(lines)


def build_prompt(
    world: World,
    role: Role,
    transcript: Transcript,
    *,
    target: TranscriptMessage | None,
    instruction: str | None = None,
    memory_start: int = 0,
    system: str | None = None,
    context: Sequence[str] = (),
    summary: str | None = None,
    window: int | None = None,
) -> tuple[ChatMessage, ...]:
    """The turn's prompt; ``system`` is the role's system text when already built;
    ``context``: system texts given just before the turn (retrieved passages, lore);
    ``summary``: what stands for the messages before ``memory_start`` (a running
    summary); ``window``: memory entries at most (default: ``memory_window``)."""
    memory = memory_window(
        transcript,
        role.id,
        memory_start,
        world.settings.memory_window if window is None else window,
        target.id if target is not None else None,
        role.sees,
    )
    return (
        ChatMessage("system", system if system is not None else system_text(world, role)),
        *((ChatMessage("system", summary),) if summary is not None else ()),
        *memory,
        *(ChatMessage("system", text) for text in context),
        ChatMessage("user", turn_text(world, role, target, instruction)),
    )
