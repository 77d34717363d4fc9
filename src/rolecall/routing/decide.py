"""Who answers a chat message: the "Who answers" table of chat.md as one pure function.

:func:`route` looks only at the sender and the *first* valid mention of the message
(``rolecall.routing.mentions``); later mentions are ordinary text. Answerers always come
in world role order, are always role ids, and never include the sender.

=========  ==========================================  ==================  ===============
sender     message (first mention)                     answerers           reason
=========  ==========================================  ==================  ===============
human      none, or only malformed ones                every agent         broadcast
human      an agent                                    that agent          direct
human      ``@all``                                    every agent         all
human      ``@human``                                  nobody              human_mention
human      an unknown name                             nobody (+ notice)   unknown_mention
agent A    another agent B                             B                   agent_direct
agent A    ``@all``                                    every agent but A   agent_all
agent A    none, or ``@human``                         nobody              floor_to_human
agent A    A itself                                    nobody              self
agent A    an unknown name                             nobody (+ notice)   unknown_mention
system     anything                                    nobody              system
=========  ==========================================  ==================  ===============

Decisions where chat.md is silent:

* The human writing ``@human`` first addresses nobody: no agent answers and no notice
  is given (the floor is already the human's).
* An agent writing ``@all`` first is answered by every *other* agent, in role order.
  This is bounded by the chat turn limit, which the caller enforces: each agent makes at
  most ``turn_limit`` LLM calls between two human or system messages, however replies
  fan out.
* An agent's unknown first mention returns the floor to the human with the same
  unknown-name information as the human's (the caller shows
  :func:`unknown_mention_notice`).
* ``@human`` and ``@all`` are reserved and win over a role with that id (world
  validation refuses such ids, and ``system``: ``rolecall.world.library.RESERVED_IDS``).
  ``@system`` is not a reserved mention: as no role may have that id, it is an unknown
  name.
* Suggestions for an unknown name are ``difflib.get_close_matches`` (at most 3, cutoff
  0.6), best first. When none is close the notice lists every role id instead.
* A system message's first mention is still reported in ``Route.mention``, but it never
  produces an unknown-name notice.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from rolecall.routing.mentions import first_mention

__all__ = ["Reason", "Route", "route", "unknown_mention_notice"]

Reason = Literal[
    "broadcast",
    "direct",
    "all",
    "human_mention",
    "unknown_mention",
    "agent_direct",
    "agent_all",
    "floor_to_human",
    "self",
    "system",
]

_MAX_SUGGESTIONS = 3
_SUGGESTION_CUTOFF = 0.6
_NOTICE_NAME_LIMIT = 40


@dataclass(frozen=True, slots=True)
class Route:
    """The routing decision for one message.

    ``answerers``: role ids that answer, in role order (empty: nobody; the floor is the
    human's). ``mention``: the first valid mention, lowercased, or ``None``.
    ``unknown``: the first mention when it names no agent and is not reserved (only for
    human and agent senders). ``suggestions``: role ids close to ``unknown``, best
    first. ``known``: every role id, in role order, filled only when ``unknown`` is set
    so the notice can list them. ``reason``: one machine word, see the module table.
    """

    answerers: tuple[str, ...]
    mention: str | None
    unknown: str | None
    suggestions: tuple[str, ...]
    reason: Reason
    known: tuple[str, ...] = ()


def route(sender: str, text: str, role_ids: Sequence[str]) -> Route:
    """Decide who answers ``text`` sent by ``sender``.

    ``sender`` is ``"human"``, ``"system"`` or a role id in ``role_ids``; ``role_ids``
    are the world's (lowercase) role ids in role order. Raises :class:`ValueError` for
    any other sender, and :class:`TypeError` when ``role_ids`` is a single string.
    """
    if isinstance(role_ids, str):
        raise TypeError("role_ids must be a sequence of role ids, not one string")
    if sender == "system":
        return Route((), first_mention(text), None, (), "system")
    if sender == "human":
        return _route_from_human(first_mention(text), role_ids)
    if sender in role_ids:
        return _route_from_agent(sender, first_mention(text), role_ids)
    raise ValueError(f"unknown sender {sender!r}: not 'human', 'system' or a role id")


def _route_from_human(mention: str | None, role_ids: Sequence[str]) -> Route:
    """Route a human message whose first mention is ``mention``."""
    if mention is None:
        return Route(tuple(role_ids), None, None, (), "broadcast")
    if mention == "all":
        return Route(tuple(role_ids), mention, None, (), "all")
    if mention == "human":
        return Route((), mention, None, (), "human_mention")
    if mention in role_ids:
        return Route((mention,), mention, None, (), "direct")
    return _unknown(mention, role_ids)


def _route_from_agent(sender: str, mention: str | None, role_ids: Sequence[str]) -> Route:
    """Route a message of agent ``sender`` whose first mention is ``mention``."""
    if mention is None or mention == "human":
        return Route((), mention, None, (), "floor_to_human")
    if mention == "all":
        others = tuple(role for role in role_ids if role != sender)
        return Route(others, mention, None, (), "agent_all")
    if mention == sender:
        return Route((), mention, None, (), "self")
    if mention in role_ids:
        return Route((mention,), mention, None, (), "agent_direct")
    return _unknown(mention, role_ids)


def _unknown(name: str, role_ids: Sequence[str]) -> Route:
    """The route of a first mention ``name`` that names no agent: nobody answers."""
    close = difflib.get_close_matches(
        name, list(role_ids), n=_MAX_SUGGESTIONS, cutoff=_SUGGESTION_CUTOFF
    )
    return Route((), name, name, tuple(close), "unknown_mention", tuple(role_ids))


def unknown_mention_notice(route: Route) -> str:
    """The one-line ``system`` notice for an unknown first mention.

    ``nobody answered: no agent 'alcie' (closest: alice; agents: alice, bob)``, or
    ``... (agents: alice, bob)`` when no role id is close. Names longer than 40
    characters are shortened with ``…``. Raises :class:`ValueError` when ``route`` has no
    unknown name.
    """
    if route.unknown is None:
        raise ValueError(f"route {route.reason!r} has no unknown mention")
    name = _shorten(route.unknown)
    agents = f"agents: {', '.join(route.known)}" if route.known else "no agents"
    if route.suggestions:
        agents = f"closest: {', '.join(route.suggestions)}; {agents}"
    return f"nobody answered: no agent '{name}' ({agents})"


def _shorten(name: str) -> str:
    """``name`` cut to the notice's limit, with ``…`` when it was longer."""
    if len(name) <= _NOTICE_NAME_LIMIT:
        return name
    return name[: _NOTICE_NAME_LIMIT - 1] + "…"
