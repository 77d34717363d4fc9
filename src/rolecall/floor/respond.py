"""An agent's own decision whether to answer a message nobody was addressed in (chat.md).

With ``respond: {ask_model: true}`` on a role (its respond check), a chat message that
addresses nobody (a human's message without a mention, or another agent's reply without
one) is not answered by the routing rule alone: the agent's own model is asked, with the
recent history, whether this agent should answer it. The model replies ``YES`` or ``NO`` and a
short reason; anything else counts as no. Each decision is a ``system/respond`` event.

The question is not a turn: it is not streamed, not stored as a message and not counted
in the agent's turns; its tokens are reported in the event. An agent that has reached its
turn limit is not asked (it could not answer anyway): its decision is no, without a call.
The offline model answers it deterministically (:func:`rolecall.llm.offline.respond_answer`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Final, Protocol

from rolecall.bus import Bus, RespondEvent
from rolecall.errors import ProviderError
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    TextDelta,
    TurnInfo,
    Usage,
    well_formed,
)
from rolecall.prompt import persona, system_text
from rolecall.session.audience import latest_seen
from rolecall.session.state import SessionState, TranscriptMessage
from rolecall.world.models import Role, World

__all__ = ["CHECKED_REASONS", "RespondSite", "decide", "parse_answer", "question"]

# the routing reasons of a message that addresses nobody: a human's without a mention
# (everyone answers by the rule) and an agent's without one (nobody answers by the rule)
CHECKED_REASONS: Final = frozenset({"broadcast", "floor_to_human"})
_ANSWER = re.compile(r"^\W*(yes|no)\b\W*(.*)$", re.IGNORECASE | re.DOTALL)
_MAX_TOKENS: Final = 60  # a yes or no and one sentence


class RespondSite(Protocol):
    """What a decision needs of the session (``runtime.Dialogue``)."""

    world: World
    state: SessionState
    models: ModelRegistry
    bus: Bus

    @property
    def flow_active(self) -> bool: ...

    def model_name(self, role: Role) -> str: ...


def question(role: Role, message: TranscriptMessage, history: Sequence[TranscriptMessage]) -> str:
    """The user message the agent's model is asked."""
    lines = [f"[{m.id}] {m.sender}: {m.content}" for m in history]
    return "\n".join(
        [
            "The recent conversation:",
            *lines,
            "",
            f"The latest message, {message.id} from {message.sender}, is not addressed to "
            f"anyone in particular. Should you, {role.display_name}, answer it? Answer only if "
            "it concerns your role or you have something to add. Reply YES or NO, then one "
            "short sentence saying why.",
        ]
    )


def parse_answer(text: str) -> tuple[bool, str]:
    """``(respond, reason)`` from the model's reply; an unclear reply is a no."""
    found = _ANSWER.match(text.strip())
    if found is None:
        shown = " ".join(text.split())[:80]
        return False, f"unclear answer, counted as no: {shown!r}"
    reason = " ".join(found.group(2).split()) or "(no reason given)"
    return found.group(1).lower() == "yes", reason


async def decide(session: RespondSite, role: Role, message: TranscriptMessage) -> bool:
    """Ask ``role``'s model whether it answers ``message``; publish the decision."""
    settings = session.world.settings
    if session.state.turn_counts.get(role.id, 0) >= settings.turn_limit:
        _publish(session, role, message, False, "its turn limit is reached", None)
        return False
    rule = role.respond
    size = rule.history if rule is not None else 6
    transcript = session.state.transcript
    messages = transcript.messages
    end = len(messages)
    while end > 0 and messages[end - 1].id != message.id:  # it is the latest, or nearly
        end -= 1
    # the one read (audiences.md): the question's history is what the role saw
    history = latest_seen(messages, role.id, size, end=end, limit=role.sees)
    model_name = session.model_name(role)
    model = session.models.for_role(role.id, model_name, remote=role.transport == "nats")
    request = GenerationRequest(
        model=model_name,
        messages=(
            ChatMessage("system", system_text(session.world, role)),
            ChatMessage("user", question(role, message, history)),
        ),
        persona=persona(role),
        info=TurnInfo(
            turn=len(transcript) + 1,
            n=transcript.turns_by_role.get(role.id, 0) + 1,
            speaker=role.id,
            target=message.sender,
            target_text=message.content,
            topic=session.world.topic,
            purpose="respond",
        ),
        temperature=0.0,
        max_tokens=_MAX_TOKENS,
        api_base=role.api_base or settings.api_base,
        api_key_env=role.api_key_env or settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        client=settings.client,
        script=role.script_entries(),
        world_title=session.world.title or session.world.name,
        participants=tuple(session.world.role_ids),
    )
    parts: list[str] = []
    usage: Usage | None = None
    try:
        async for item in model.stream(request):
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, Usage):  # the question offers no tools
                usage = item
    except ProviderError as exc:  # a failed question is a no; the session goes on
        _publish(session, role, message, False, f"its model failed: {exc}", {"model": model_name})
        return False
    respond, reason = parse_answer(well_formed("".join(parts)))  # the reason is an event's
    extra: dict[str, Any] = {"model": model_name}
    if usage is not None:
        extra |= {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}
    _publish(session, role, message, respond, reason, extra)
    return respond


def _publish(
    session: RespondSite,
    role: Role,
    message: TranscriptMessage,
    respond: bool,
    reason: str,
    extra: dict[str, Any] | None,
) -> None:
    session.bus.publish(
        RespondEvent(
            agent=role.id, message_id=message.id, respond=respond, reason=reason, **(extra or {})
        )
    )
