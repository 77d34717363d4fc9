"""The floor: agents as bus participants, and the scheduler that grants them the floor.

Each :class:`Agent` subscribes to the four topics of a session's bus and answers every
committed message with a :class:`FloorRequest` or a decline, decided by the pure
routing rules (:func:`rolecall.routing.route`). The :class:`Floor` collects the answers
and grants the floor one agent at a time, in world role order. A participant on another
transport implements the same exchange (see docs/architecture.md, "Agents on the bus").
"""

from rolecall.floor.participant import Agent
from rolecall.floor.scheduler import Floor, FloorGrant, FloorRequest, FloorWatcher

__all__ = ["Agent", "Floor", "FloorGrant", "FloorRequest", "FloorWatcher"]
