"""Running summaries for long sessions (knowledge.md, Long sessions).

With ``settings.context_tokens`` set, a role's prompt holds every message since its
latest summary; when that would pass the budget, the oldest of them are folded into
the role's running summary by a model call (the role's model, or
``settings.summary_model``; the offline model's is deterministic), published as a
``system/summary`` event covering messages ``from_id``..``to_id``, and the summary
stands for them in the role's prompts from then on. The event is stored with the
session, so a resumed session starts from it (:func:`stored_summaries`) and never
asks again. Nothing in the transcript is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol

from rolecall.bus import Bus, ErrorEvent, SummaryEvent
from rolecall.errors import ProviderError
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    TextDelta,
    TurnInfo,
    Usage,
    estimate_tokens,
    well_formed,
)
from rolecall.prompt import persona
from rolecall.session.audience import seen
from rolecall.session.state import SessionState, TranscriptMessage
from rolecall.world.models import Role, World

__all__ = ["Summary", "fold", "stored_summaries"]

SUMMARY_WORDS: Final = 200  # what a summary is asked to stay within
_OVERHEAD: Final = 4  # tokens a message costs beyond its text (as prompt_tokens counts)


@dataclass(frozen=True, slots=True)
class Summary:
    """A role's running summary: it stands for messages ``from_id``..``to_id``, which
    end before transcript index ``end``."""

    from_id: str
    to_id: str
    text: str
    end: int

    def as_prompt(self) -> str:
        return (
            f"Summary of the conversation so far ({self.from_id} to {self.to_id}; "
            f"the messages after it follow):\n{self.text}"
        )


class SummarySite(Protocol):
    """What a summary needs of the session (``runtime.Dialogue``)."""

    world: World
    state: SessionState
    models: ModelRegistry
    bus: Bus
    summaries: dict[str, Summary]

    def model_name(self, role: Role) -> str: ...


def stored_summaries(
    events: Iterable[Mapping[str, Any]], messages: Sequence[TranscriptMessage]
) -> dict[str, Summary]:
    """Each role's latest summary from a stored session's events (resume)."""
    index = {m.id: i for i, m in enumerate(messages)}
    out: dict[str, Summary] = {}
    for record in events:
        if record.get("type") != "summary" or record.get("topic") != "system":
            continue
        to_id = str(record.get("to_id"))
        if to_id not in index:
            continue
        out[str(record["role"])] = Summary(
            str(record.get("from_id")), to_id, str(record.get("text", "")), index[to_id] + 1
        )
    return out


def request_text(previous: Summary | None, messages: Sequence[TranscriptMessage]) -> str:
    """What the summarising model is asked: the summary so far and the messages to fold."""
    first = previous.from_id if previous is not None else messages[0].id
    lines = [
        f"Messages {first} to {messages[-1].id} of the conversation are to be summarised.",
        "",
        "Summary so far:",
        previous.text if previous is not None else "(none)",
        "",
        "Messages to fold into it:",
        *(f"[{m.id}] {m.sender}: {' '.join(m.content.split())}" for m in messages),
        "",
        f"Write the updated summary in at most {SUMMARY_WORDS} words: what the "
        "conversation began with, who said what that still matters (decisions, claims, "
        "open questions), by name and message id. Only the summary.",
    ]
    return "\n".join(lines)


async def fold(
    session: SummarySite, role: Role, start: int, fixed_tokens: int, budget: int
) -> tuple[int, Summary | None]:
    """Where ``role``'s memory starts (a transcript index) and the summary before it.

    ``start``: the index the memory would start at without summaries; ``fixed_tokens``:
    the rest of the prompt. Over ``budget``, the oldest messages are folded into a new
    summary (one model call) so that the newest fill at most half the budget.
    """
    current = session.summaries.get(role.id)
    if current is not None:
        start = max(start, current.end)
    messages = session.state.transcript.messages
    # the one read (audiences.md): only what this role saw is counted and folded
    visible = seen(messages, role.id, start=start, limit=role.sees)
    summary_cost = estimate_tokens(current.as_prompt()) + _OVERHEAD if current else 0
    costs = [(len(m.content) + 3) // 4 + _OVERHEAD for m in visible]
    if fixed_tokens + summary_cost + sum(costs) <= budget:
        return start, current
    keep, cut = 0, len(visible)
    while cut > 0 and keep + costs[cut - 1] <= budget // 2:
        cut -= 1
        keep += costs[cut]
    if cut <= 0:
        return start, current  # nothing old enough to fold
    folded = visible[:cut]
    end = len(messages)
    if cut < len(visible):  # the first message kept, as a transcript index
        end = start
        while messages[end] is not visible[cut]:
            end += 1
    text = await _summarise(session, role, current, folded)
    if text is None:  # the call failed (an error event says so): the newest alone
        return end, current
    new = Summary(current.from_id if current else folded[0].id, folded[-1].id, text, end)
    session.summaries[role.id] = new
    return end, new


async def _summarise(
    session: SummarySite, role: Role, previous: Summary | None, folded: Sequence[TranscriptMessage]
) -> str | None:
    world = session.world
    settings = world.settings
    name = settings.summary_model or session.model_name(role)
    model = (
        session.models.get(name)
        if settings.summary_model
        else session.models.for_role(role.id, name, remote=role.transport == "nats")
    )
    transcript = session.state.transcript
    request = GenerationRequest(
        model=name,
        messages=(
            ChatMessage(
                "system",
                f"You keep the running summary of a conversation in {world.title or world.name} "
                f"for {role.display_name}, so it keeps its thread when older messages are "
                "no longer shown.",
            ),
            ChatMessage("user", request_text(previous, folded)),
        ),
        persona=persona(role),
        info=TurnInfo(
            turn=len(transcript) + 1,
            n=transcript.turns_by_role.get(role.id, 0) + 1,
            speaker=role.id,
            target=None,
            target_text=None,
            topic=world.topic,
            purpose="summary",
        ),
        temperature=0.0,
        max_tokens=SUMMARY_WORDS * 2,
        api_base=role.api_base or settings.api_base,
        api_key_env=role.api_key_env or settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        world_title=world.title or world.name,
        participants=tuple(world.role_ids),
        client=settings.client,
    )
    parts: list[str] = []
    usage: Usage | None = None
    try:
        async for item in model.stream(request):
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, Usage):  # a summary request offers no tools: no ToolCall
                usage = item
    except ProviderError as exc:
        session.bus.publish(
            ErrorEvent(error=f"summary for {role.id} failed: {exc}", source="summary")
        )
        return None
    text = well_formed("".join(parts)).strip()
    session.bus.publish(
        SummaryEvent.trusted(
            role=role.id,
            from_id=previous.from_id if previous else folded[0].id,
            to_id=folded[-1].id,
            text=text,
            model=name,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
        )
    )
    return text
