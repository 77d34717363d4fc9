"""The floor: agents as bus participants, and the scheduler that grants them the floor.

Each :class:`Agent` subscribes to a session's committed messages and, for each message
the driver will answer (:meth:`Floor.expect`), asks for the floor when the pure routing
rules (:func:`rolecall.routing.route`) make it an answerer. The :class:`Floor` collects
the requests and grants the floor one agent at a time, in world role order (see
docs/architecture.md, "Agents on the bus").
"""

from rolecall.floor.participant import Agent
from rolecall.floor.scheduler import Floor, FloorRequest

__all__ = ["Agent", "Floor", "FloorRequest"]
