"""Reply targets (flows.md) and hard budgets, as pure functions."""

from __future__ import annotations

from rolecall.flows.model import ReplyTo, ReplyToMessage, ReplyToRole, ReplyToStep
from rolecall.session.state import Transcript, TranscriptMessage
from rolecall.world.models import Settings


def resolve_target(
    reply_to: ReplyTo, transcript: Transcript, speaker: str
) -> tuple[TranscriptMessage | None, str | None]:
    """The message ``speaker``'s step answers, and a warning when the target does not exist.

    ``previous`` is the latest message by anyone but the speaker: a role never answers
    itself, so after an interjection by the step's own speaker (or a self-loop) it is
    the message before that one (flows.md, Reply targets).
    """
    if reply_to == "none":
        return None, None
    if reply_to == "previous":
        return transcript.latest_not_by(speaker), None
    if isinstance(reply_to, ReplyToRole):
        msg = transcript.latest(reply_to.role)
        return msg, None if msg else f"reply target: {reply_to.role} has not spoken yet; no target"
    if isinstance(reply_to, ReplyToStep):
        msg = transcript.latest_by_step.get(reply_to.step)
        return (
            msg,
            None if msg else f"reply target: step {reply_to.step} has not run yet; no target",
        )
    if isinstance(reply_to, ReplyToMessage):
        msg = transcript.by_id.get(reply_to.message)
        return (
            msg,
            None
            if msg
            else f"reply target: message {reply_to.message} does not exist yet; no target",
        )
    raise TypeError(f"not a reply target: {reply_to!r}")


def budget_block(
    settings: Settings,
    transcript: Transcript,
    next_input: int,
    next_cost: float | None = 0.0,
    unpriced: str = "the model is not in litellm's price map",
) -> tuple[str, str] | None:
    """Why the next call may not start (reason, detail), or None when it fits the budgets.

    ``next_cost`` is the next call's estimated cost in USD (``None``: unknown).
    """
    if transcript.agent_turns >= settings.max_turns:
        return (
            "max_turns",
            f"{transcript.agent_turns} agent messages reached max_turns {settings.max_turns}",
        )
    if settings.max_tokens is not None:
        used = transcript.tokens
        if used + next_input > settings.max_tokens:
            return (
                "max_tokens",
                f"{used} tokens used + about {next_input} for the next prompt exceeds max_tokens "
                f"{settings.max_tokens}",
            )
    if settings.max_cost is not None:
        spent = transcript.cost_usd
        if spent is None or next_cost is None:
            if spent is None:
                why = "a message of it was of a model without a price"
                what = "the session so far"
            else:
                why, what = unpriced, "the next call"
            return (
                "max_cost",
                f"the cost of {what} is unknown ({why}); "
                "give the role a price: to run under max_cost",
            )
        if spent + next_cost > settings.max_cost:
            return (
                "max_cost",
                f"${spent:.6f} spent + about ${next_cost:.6f} for the next call exceeds "
                f"max_cost ${settings.max_cost:g}",
            )
    if settings.max_seconds is not None and transcript.seconds >= settings.max_seconds:
        return (
            "max_seconds",
            f"{transcript.seconds:.2f} s generating reached max_seconds {settings.max_seconds:g}",
        )
    return None
