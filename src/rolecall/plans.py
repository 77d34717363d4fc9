"""Turns as data: what a driver wants next, and the session surface drivers use.

Every kind of turn (a flow step, a director's turn, the final synthesis, a judge's
extra turn, a chat reply, an interjection, a notice, a human or system message) is a
:class:`TurnPlan` run by one primitive, :meth:`DriverSite.speak`: call the model (unless the
plan carries its text), build the message, store it with the events of its decision,
publish. Drivers (the flow in :mod:`rolecall.turns`, chat in :mod:`rolecall.chat`, a
mode's :class:`Director`) never run a turn themselves: they return the next node,
``TurnPlan | Stop | None``, in the style of pydantic-graph's nodes, and a plan's
``then`` returns the node after it.

:class:`DriverSite` is the port: drivers and modes import it, never the runtime.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Protocol

from rolecall.bus import Bus, Event
from rolecall.session.state import SessionState, TranscriptMessage

if TYPE_CHECKING:
    from rolecall.floor import Floor
    from rolecall.flows.conditions import ConditionContext
    from rolecall.flows.engine import FlowEngine
    from rolecall.llm.registry import ModelRegistry
    from rolecall.world.models import World


@dataclass(frozen=True)
class Spoken:
    """What running a plan gave: the stored message (if any) and whether a model answered."""

    message: TranscriptMessage | None
    generated: bool  # False: the budgets forbade the call, or it failed or was cancelled
    # real-models.md: the second reply in a row nearly identical to a recent message
    stalled: bool = False


@dataclass(frozen=True)
class Stop:
    """The dialogue is complete: finish (after the flow's final step, when it has one)."""

    reason: str
    detail: str  # the rule that decided it (world/stop.detail)


@dataclass(frozen=True)
class TurnPlan:
    """One turn: who speaks, to which message, as which step, and what follows it.

    ``text`` set: no model call (human and system messages, notices). ``shape`` turns
    the generated text into the stored text (None: nothing is stored). ``begin`` counts
    the step in the flow pointer. ``decide`` runs once the message is in the transcript
    and returns the events stored with it in one transaction and published right after
    it. ``then`` runs after the commit and returns the next node. ``watched``: the
    reply is checked for a stall (real-models.md).
    """

    speaker: str
    target: TranscriptMessage | None = None
    step_id: str | None = None
    loop_iteration: int | None = None
    instruction: str | None = None
    text: str | None = None
    finish_on_budget: bool = True
    begin: bool = False
    shape: Callable[[str], str | None] | None = None
    decide: Callable[[TranscriptMessage, datetime], list[Event]] | None = None
    then: Callable[[Spoken], Awaitable[TurnPlan | Stop | None]] | None = None
    # audiences.md: who the message is for (None: everyone, or the target's audience
    # when ``inherit``: a reply to a private message stays private)
    audience: tuple[str, ...] | None = None
    inherit: bool = True
    # real-models.md, Stalls: a turn of the dialogue, checked for near-identical replies
    # (False for a judge's verdict, which may well repeat itself)
    watched: bool = True


Next = TurnPlan | Stop | None
MessageHook = Callable[["DriverSite", TranscriptMessage], Awaitable[None]]


class Director(Protocol):
    """Decides the speaking order instead of a flow (e.g. study mode's role queues)."""

    def plan(self, session: DriverSite) -> TurnPlan | Stop:
        """The next turn, or a :class:`Stop` when the dialogue is complete."""
        ...

    def completed(
        self, session: DriverSite, turn: TurnPlan, message: TranscriptMessage
    ) -> list[Event]:
        """The planned turn's message is final: update state, return the events it causes.

        Called just before the message is stored; the state and the returned events
        are stored with it and published right after it.
        """
        ...

    def human(self, session: DriverSite, message: TranscriptMessage) -> bool:
        """A human message arrived; True when the director consumed it (no routing)."""
        ...


class DriverSite(Protocol):
    """The session as drivers and modes see it (implemented by ``runtime.Dialogue``)."""

    world: World
    state: SessionState
    bus: Bus
    engine: FlowEngine | None
    floor: Floor
    models: ModelRegistry
    ctx: ConditionContext
    director: Director | None
    message_hooks: list[MessageHook]
    final_instruction: Callable[[DriverSite], str | None] | None

    def clock(self) -> datetime: ...

    @property
    def finished(self) -> bool: ...

    @property
    def flow_active(self) -> bool: ...

    async def speak(self, plan: TurnPlan) -> Spoken:
        """Run one turn: the model call (or the plan's text), the message, the commit."""
        ...

    async def emit(self, events: list[Event]) -> None:
        """Store ``events`` (one transaction), then publish them."""
        ...

    def finish(self, reason: str, detail: str) -> None:
        """Finish the session now (no final step)."""
        ...

    def pause(self, reason: str = "manual") -> None:
        """Pause after the current turn (at once when no turn is running)."""
        ...
