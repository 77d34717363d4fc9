"""Choosing the next speaker (selection.md): the rules, and the selector model's calls.

:func:`choose` returns one :class:`~rolecall.routing.selection.Selection` value: the
candidates, who was chosen, by which rule and the selector's raw answer. The rule is
``settings.speaker_selection``: ``round_robin`` and ``random`` are pure
(:mod:`rolecall.routing.selection`); ``model`` asks the selector model (``settings.selector``,
default the world's model) with the recent transcript, reads its answer leniently, asks
once more when it names no candidate, and then takes the pure fallback: the next
candidate in role order after the last speaker. A failed or timed-out call counts as an
answer naming nobody. The excluded speaker can never be chosen: every path returns a
member of the candidates.

The selector's calls go through the session's model registry, so ``--record`` keeps them
and ``--replay`` serves them; their tokens and cost are charged to the session
(:func:`charge`) and checked against ``max_tokens``/``max_cost`` before each call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from rolecall.errors import ProviderError
from rolecall.llm import pricing
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    Persona,
    TextDelta,
    TurnInfo,
    Usage,
    well_formed,
)
from rolecall.routing.selection import (
    By,
    Selection,
    fallback,
    random_choice,
    read_answer,
    round_robin,
)
from rolecall.session.state import SessionState, TranscriptMessage
from rolecall.world.models import World
from rolecall.world.targets import budget_block

__all__ = ["KEY", "Choice", "SelectorSite", "charge", "choose", "counters", "restore_usage"]

KEY: Final = "selection"  # state.extra[KEY]: the selector's counters (stored)
_MAX_TOKENS: Final = 40  # an id, perhaps a few words
_HISTORY: Final = 8  # recent messages the selector reads

DEFAULT_INSTRUCTIONS: Final = (
    "You choose who speaks next in a group conversation. Read the conversation and pick "
    "the participant best placed to speak next."
)


class SelectorSite(Protocol):
    """What a choice needs of the session (``runtime.Dialogue``)."""

    world: World
    state: SessionState
    models: ModelRegistry

    def finish(self, reason: str, detail: str) -> None: ...


@dataclass
class _Spent:
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    models: list[str] = field(default_factory=list)
    error: str | None = None  # the last failed call's error


def counters(state: SessionState) -> dict[str, Any]:
    """The selector's stored counters: choices made, calls, tokens, cost."""
    found = state.extra.get(KEY)
    if not isinstance(found, dict):
        found = state.extra[KEY] = {
            "choices": 0,
            "calls": 0,
            "input_tokens": 0,
            "output_tokens": 0,
            "cost_usd": 0.0,
            "unpriced": 0,
        }
    return found


def charge(state: SessionState, usage: Usage) -> None:
    """Count one selector call in the session's tokens and cost (and store it)."""
    stored = counters(state)
    stored["calls"] += 1
    stored["input_tokens"] += usage.input_tokens
    stored["output_tokens"] += usage.output_tokens
    if usage.cost_usd is None:
        stored["unpriced"] += 1
    else:
        stored["cost_usd"] += usage.cost_usd
    state.transcript.charge(usage.input_tokens, usage.output_tokens, usage.cost_usd)


def restore_usage(state: SessionState) -> None:
    """A restored session's transcript counts its stored selector calls again."""
    stored = state.extra.get(KEY)
    if not isinstance(stored, dict):
        return
    transcript = state.transcript
    transcript.input_tokens += int(stored.get("input_tokens", 0))
    transcript.output_tokens += int(stored.get("output_tokens", 0))
    transcript.known_cost += float(stored.get("cost_usd", 0.0))
    transcript.unpriced += int(stored.get("unpriced", 0))


def _label(world: World, sender: str) -> str:
    if sender in ("human", "system"):
        return sender
    try:
        return f"{sender} ({world.role(sender).display_name})"
    except KeyError:
        return sender


def question(
    world: World,
    history: Sequence[TranscriptMessage],
    options: Sequence[str],
    previous: str | None,
) -> str:
    """What the selector is asked (``previous``: its last answer, which named nobody)."""
    lines = [f"[{m.id}] {_label(world, m.sender)}: {m.content}" for m in history]
    listing = []
    for rid in options:
        role = world.role(rid)
        about = f": {role.description}" if role.description else ""
        listing.append(f"- {rid} ({role.display_name}){about}")
    text = [
        "The conversation so far:",
        *(lines or ["(nothing yet)"]),
        "",
        "Who speaks next? The candidates:",
        *listing,
        "",
        f"Answer with the id of exactly one candidate ({', '.join(options)}), and nothing else.",
    ]
    if previous is not None:
        shown = " ".join(previous.split())[:200] or "(an empty answer)"
        text += [
            "",
            f"Your last answer, {shown!r}, named no candidate. Answer with one of: "
            f"{', '.join(options)}.",
        ]
    return "\n".join(text)


async def _ask(
    session: SelectorSite,
    options: Sequence[str],
    last: TranscriptMessage | None,
    previous: str | None,
    spent: _Spent,
) -> tuple[str | None, bool]:
    """One selector call: (its answer, or None when it failed; False when a budget
    forbade the call, after which the session is finished)."""
    world = session.world
    settings = world.settings
    selector = settings.selector
    name = selector.model or world.model
    model = session.models.get(name)
    transcript = session.state.transcript
    history = transcript.messages[-_HISTORY:]
    instructions = selector.instructions.strip() or DEFAULT_INSTRUCTIONS
    prompt = (
        ChatMessage("system", instructions),
        ChatMessage("user", question(world, history, options, previous)),
    )
    stored = counters(session.state)
    if settings.max_tokens is not None or settings.max_cost is not None:
        guess = await pricing.estimate(
            model,
            name,
            prompt,
            price=None,
            max_output=_MAX_TOKENS,
            want_tokens=settings.max_tokens is not None,
            want_cost=settings.max_cost is not None,
        )
        why = pricing.unpriced(name) if guess.cost_usd is None else ""
        blocked = budget_block(settings, transcript, guess.input_tokens, guess.cost_usd, why)
        if blocked is not None:
            session.finish(*blocked)
            return None, False
    request = GenerationRequest(
        model=name,
        messages=prompt,
        persona=Persona(id="selector", name="Selector", system_prompt=instructions),
        info=TurnInfo(
            turn=len(transcript) + 1,
            n=int(stored["calls"]) + 1,
            speaker="selector",
            target=last.sender if last is not None else None,
            target_text=last.content if last is not None else None,
            topic=world.topic,
            purpose="select",
        ),
        temperature=0.0,
        max_tokens=_MAX_TOKENS,
        api_base=settings.api_base,
        api_key_env=settings.api_key_env,
        timeout=settings.timeout,
        retries=settings.retries,
        client=settings.client,
        script=tuple(selector.script or ()),
        world_title=world.title or world.name,
        participants=tuple(options),
    )
    parts: list[str] = []
    usage: Usage | None = None
    try:
        async for item in model.stream(request):
            if isinstance(item, TextDelta):
                parts.append(item.text)
            elif isinstance(item, Usage):
                usage = item
    except ProviderError as exc:  # a failed or timed-out call names nobody
        usage = None
        parts = []
        failed = True
        spent.error = str(exc)
    else:
        failed = False
    if usage is None:
        usage = Usage(0, 0, 0.0)
    charge(session.state, usage)
    spent.input_tokens += usage.input_tokens
    spent.output_tokens += usage.output_tokens
    if spent.cost_usd is not None:
        spent.cost_usd = None if usage.cost_usd is None else spent.cost_usd + usage.cost_usd
    spent.models.append(name)
    return (None if failed else well_formed("".join(parts))), True


@dataclass(frozen=True)
class Choice:
    """A :class:`Selection` and what its selector calls cost."""

    selection: Selection
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = 0.0
    model: str | None = None
    error: str | None = None  # the selector's last failure (a timeout...), if any


async def choose(
    session: SelectorSite,
    options: Sequence[str],
    last: TranscriptMessage | None,
    *,
    mention: str | None = None,
) -> Choice:
    """Choose among ``options`` (already without the excluded speaker) after ``last``.

    ``mention``: a role the message being answered addresses first; when it is a
    candidate it is chosen (``by: mention``) without asking anyone.
    """
    world = session.world
    settings = world.settings
    role_ids = world.role_ids
    last_speaker = last.sender if last is not None else None
    stored = counters(session.state)
    index = int(stored["choices"])
    stored["choices"] = index + 1
    options = tuple(options)
    if not options:
        return Choice(Selection(options, None, "fallback"))
    if mention is not None and mention in options:
        return Choice(Selection(options, mention, "mention"))
    rule = settings.speaker_selection
    if rule == "random":
        return Choice(Selection(options, random_choice(options, settings.seed, index), "random"))
    if rule != "model":  # round_robin (and mentions without a mention: its fallback)
        chosen = round_robin(role_ids, options, last_speaker)
        by: By = "round_robin" if rule == "round_robin" else "fallback"
        return Choice(Selection(options, chosen, by))
    spent = _Spent()
    names = {rid: world.role(rid).name for rid in options}
    answers: list[str] = []
    answer: str | None = None
    for _ in range(2):  # the question, and once more when the answer named nobody
        answer, allowed = await _ask(session, options, last, answer, spent)
        if not allowed:
            return Choice(
                Selection(options, None, "fallback", None, tuple(answers)),
                spent.input_tokens,
                spent.output_tokens,
                spent.cost_usd,
                spent.models[-1] if spent.models else None,
                spent.error,
            )
        if answer is not None:
            answers.append(answer)
            chosen = read_answer(answer, options, names)
            if chosen is not None:
                return Choice(
                    Selection(options, chosen, "model", answer, tuple(answers)),
                    spent.input_tokens,
                    spent.output_tokens,
                    spent.cost_usd,
                    spent.models[-1],
                    spent.error,
                )
    return Choice(
        Selection(
            options, fallback(role_ids, options, last_speaker), "fallback", answer, tuple(answers)
        ),
        spent.input_tokens,
        spent.output_tokens,
        spent.cost_usd,
        spent.models[-1] if spent.models else None,
        spent.error,
    )
