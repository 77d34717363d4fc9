"""The floor scheduler: collects the agents' answers to a message, grants one turn at a time.

Every participant answers every committed ``messages/message`` event: a
:class:`FloorRequest` (it wants to answer that message) or a decline. The driver that
owns the message (chat routing in :mod:`rolecall.chat`) calls :meth:`Floor.collect`
once the message is delivered: it returns the requests in world role order, the order
the routing table gives answerers, once every participant has answered. An agent that
decides with its model (``respond: {judge: true}``) defers its answer
(:meth:`Floor.defer`): :meth:`Floor.collect` runs the deferred decisions first, one at a
time in role order, so they never overlap a generation. In-process
agents answer during the delivery itself, so nothing waits; a participant on another
transport answers later, and :meth:`Floor.collect` waits for it (at most
``answer_timeout`` seconds, then its silence counts as a decline).

Granted turns are taken from the session's queue of due replies
(``SessionState.pending``, which is stored with the session) by :meth:`Floor.grant`:
one at a time, under the session's turn lock, so exactly one generation runs at once.
Requests and grants are reported to watchers (:meth:`Floor.watch`) in the order they
happen.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

import anyio

from rolecall.log import get_logger
from rolecall.routing import Reason
from rolecall.session.state import PendingReply, SessionState

log = get_logger(__name__)

# answers kept for messages nobody collected (flow steps, passes): the newest few
_KEEP_ANSWERED = 8


@dataclass(frozen=True, slots=True)
class FloorRequest:
    """``agent`` asks for the floor to answer message ``message_id``.

    ``reason`` is the routing rule that made it an answerer (``direct``, ``broadcast``,
    ``agent_direct``...), so the scheduler can tell a direct address from a broadcast.
    """

    agent: str
    message_id: str
    reason: Reason | Literal["judged"]  # judged: its own model said yes (floor/respond.py)


Deliberation: TypeAlias = Callable[[], Awaitable["FloorRequest | None"]]

ReplyKind = Literal["chat", "interjection"]


@dataclass(frozen=True, slots=True)
class FloorGrant:
    """The floor goes to ``agent``, to answer ``message_id`` (a chat reply or an interjection)."""

    agent: str
    message_id: str
    kind: ReplyKind


FloorWatcher = Callable[[FloorRequest | FloorGrant], None]


class Floor:
    """One session's floor: who has asked to answer which message, and who speaks next."""

    def __init__(self, participants: Sequence[str], *, answer_timeout: float = 30.0) -> None:
        self._order = {agent: i for i, agent in enumerate(participants)}
        self.answer_timeout = answer_timeout
        # message id -> agent -> its request (None: it declined), newest message last
        self._answers: dict[str, dict[str, FloorRequest | None]] = {}
        self._complete: dict[str, anyio.Event] = {}
        # message id -> agent -> the decision it deferred to collect time
        self._deferred: dict[str, dict[str, Deliberation]] = {}
        self._watchers: list[FloorWatcher] = []

    @property
    def participants(self) -> tuple[str, ...]:
        return tuple(self._order)

    def watch(self, watcher: FloorWatcher) -> Callable[[], None]:
        """Call ``watcher`` with every request and grant from now on; returns an unwatch."""
        self._watchers.append(watcher)
        return lambda: self._watchers.remove(watcher)

    # ---------------------------------------------------------------- answers
    def answer(self, agent: str, message_id: str, request: FloorRequest | None) -> None:
        """``agent``'s answer to ``message_id``: a request for the floor, or None (decline)."""
        if agent not in self._order:
            raise ValueError(
                f"{agent!r} is not a participant of this floor "
                f"(participants: {', '.join(self._order)})"
            )
        if request is not None and (request.agent, request.message_id) != (agent, message_id):
            raise ValueError(f"{agent!r} answered {message_id!r} with another's request")
        answers = self._answers.get(message_id)
        if answers is None:
            answers = self._answers[message_id] = {}
            while len(self._answers) > _KEEP_ANSWERED:
                oldest = next(iter(self._answers))
                del self._answers[oldest]
                self._complete.pop(oldest, None)
                self._deferred.pop(oldest, None)
        answers[agent] = request
        if request is not None:
            for watcher in self._watchers:
                watcher(request)
        if len(answers) == len(self._order):
            done = self._complete.pop(message_id, None)
            if done is not None:
                done.set()

    def defer(self, agent: str, message_id: str, deliberation: Deliberation) -> None:
        """``agent`` answers ``message_id`` once ``deliberation`` (run by :meth:`collect`)
        has decided: it returns the agent's request, or None to decline."""
        self._answers.setdefault(message_id, {})
        self._deferred.setdefault(message_id, {})[agent] = deliberation

    async def collect(self, message_id: str) -> list[FloorRequest]:
        """The requests to answer ``message_id``, in role order, once everyone answered.

        Deferred decisions run first, one at a time in role order. Each message is
        collected once: its answers are forgotten afterwards.
        """
        deferred = self._deferred.pop(message_id, {})
        for agent in sorted(deferred, key=self._order.__getitem__):
            self.answer(agent, message_id, await deferred[agent]())
        answers = self._answers.get(message_id)
        if answers is None or len(answers) < len(self._order):
            done = self._complete.setdefault(message_id, anyio.Event())
            with anyio.move_on_after(self.answer_timeout):
                await done.wait()
            answers = self._answers.get(message_id, {})
            missing = [agent for agent in self._order if agent not in answers]
            if missing:
                log.warning("floor_answers_missing", message_id=message_id, agents=missing)
        self._complete.pop(message_id, None)
        answers = self._answers.pop(message_id, {})
        requests = [r for r in answers.values() if r is not None]
        requests.sort(key=lambda r: self._order[r.agent])
        return requests

    # ----------------------------------------------------------------- grants
    def queue(self, state: SessionState, requests: Sequence[FloorRequest], kind: ReplyKind) -> None:
        """Queue ``requests`` as due replies of ``kind`` (``chat`` or ``interjection``)."""
        state.pending.extend(
            PendingReply(agent=r.agent, message_id=r.message_id, kind=kind) for r in requests
        )

    def grant(self, state: SessionState) -> PendingReply:
        """Give the floor to the first due reply (the caller holds the turn lock)."""
        item = state.pending.pop(0)
        if self._watchers:
            grant = FloorGrant(item.agent, item.message_id, item.kind)
            for watcher in self._watchers:
                watcher(grant)
        return item
