"""The floor scheduler: the messages awaiting answers, the agents' requests, one turn at a time.

A driver that will answer a message (chat routing in :mod:`rolecall.chat`) says so before
the message is published (:meth:`Floor.expect`); the agents answer those messages only,
each with a :class:`FloorRequest` (it wants to answer) or nothing. They read one routing
decision per message (:meth:`Floor.decision`), which the driver's unknown-name notice
reads too. Once the message is delivered the driver calls :meth:`Floor.collect`: the
requests in world role order, the order the routing table gives answerers. Agents take
part in-process, so they have all answered when the delivery returns. An agent that
decides with its model (``respond: {ask_model: true}``) defers its answer
(:meth:`Floor.defer`): :meth:`Floor.collect` runs the deferred decisions first, one at
a time in role order, so they never overlap a generation.

Granted turns are taken from the session's queue of due replies
(``SessionState.pending``, which is stored with the session) by :meth:`Floor.grant`:
one at a time, under the session's turn lock, so exactly one generation runs at once.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

from rolecall.routing import Reason, Route, route
from rolecall.session.state import PendingReply, SessionState

# messages expected and never collected (a store failure between the two): the newest few
_KEEP_EXPECTED = 8


@dataclass(frozen=True, slots=True)
class FloorRequest:
    """``agent`` asks for the floor to answer message ``message_id``.

    ``reason`` is the routing rule that made it an answerer (``direct``, ``broadcast``,
    ``agent_direct``...), so the scheduler can tell a direct address from a broadcast.
    """

    agent: str
    message_id: str
    reason: Reason | Literal["checked"]  # checked: its own model said yes (floor/respond.py)


Deliberation: TypeAlias = Callable[[], Awaitable["FloorRequest | None"]]

ReplyKind = Literal["chat", "interjection"]


class Floor:
    """One session's floor: which messages await answers, who asked, who speaks next."""

    def __init__(self, participants: Sequence[str]) -> None:
        self.participants = tuple(participants)
        self._order = {agent: i for i, agent in enumerate(self.participants)}
        # message id -> its routing decision (None until someone reads it), oldest first
        self._expected: dict[str, Route | None] = {}
        self._requests: dict[str, list[FloorRequest]] = {}
        # message id -> agent -> the decision it deferred to collect time
        self._deferred: dict[str, dict[str, Deliberation]] = {}

    # -------------------------------------------------------------- messages
    def expect(self, message_id: str) -> None:
        """The driver will collect the answers to ``message_id`` (called before it is
        published): the agents answer it. They answer no other message."""
        self._expected[message_id] = None
        while len(self._expected) > _KEEP_EXPECTED:
            self.discard(next(iter(self._expected)))

    def expects(self, message_id: str) -> bool:
        return message_id in self._expected

    def decision(self, message_id: str, sender: str, text: str) -> Route:
        """Who answers the message (chat.md's "Who answers"): computed once per expected
        message, read by every agent and by the driver's unknown-name notice."""
        if message_id not in self._expected:  # a notice on a message nobody answers
            return route(sender, text, self.participants)
        found = self._expected[message_id]
        if found is None:
            found = self._expected[message_id] = route(sender, text, self.participants)
        return found

    def discard(self, message_id: str) -> None:
        """Nobody will collect ``message_id`` after all (a director took it)."""
        self._expected.pop(message_id, None)
        self._requests.pop(message_id, None)
        self._deferred.pop(message_id, None)

    # ---------------------------------------------------------------- answers
    def ask(self, request: FloorRequest) -> None:
        """An agent asks for the floor to answer an expected message."""
        self._requests.setdefault(request.message_id, []).append(request)

    def defer(self, agent: str, message_id: str, deliberation: Deliberation) -> None:
        """``agent`` answers ``message_id`` once ``deliberation`` (run by :meth:`collect`)
        has decided: it returns the agent's request, or None to decline."""
        self._deferred.setdefault(message_id, {})[agent] = deliberation

    async def collect(self, message_id: str) -> list[FloorRequest]:
        """The requests to answer ``message_id``, in role order.

        Deferred decisions run first, one at a time in role order. Each message is
        collected once: its requests are forgotten afterwards.
        """
        deferred = self._deferred.pop(message_id, {})
        for agent in sorted(deferred, key=self._order.__getitem__):
            request = await deferred[agent]()
            if request is not None:
                self.ask(request)
        self._expected.pop(message_id, None)
        requests = self._requests.pop(message_id, [])
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
        return state.pending.pop(0)
