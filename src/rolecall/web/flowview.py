"""The flow page: a world's flow drawn as a diagram (pure: a world in, shapes out).

Steps stand in one column in the order of the world file, each a box reading
``step ID`` and ``speaker → target``. Edges:

* ``next`` (solid, down the middle): the step that follows when nothing else decides;
* ``goto`` (solid, on the right): ``next: S`` and each branch, labelled with its ``when``;
* ``loop`` (bold, on the left): from the loop-closing step back to ``to``, labelled
  ``loop max N`` and its ``until``;
* ``reply`` (dashed, far right): from a step to the step whose message it answers
  (``{step: S}``; ``{role: R}``: the nearest earlier step of R; ``previous``: the step
  before).

With a session, the current step is highlighted and every step shows how often it ran
(``×n``, the loop counters); the stop conditions and the final step are listed below.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from rolecall.flows.conditions import describe
from rolecall.flows.model import Flow, ReplyToMessage, ReplyToRole, ReplyToStep, Step
from rolecall.world.models import World

__all__ = ["Diagram", "Edge", "Node", "diagram"]

BOX_W, BOX_H, GAP = 280, 56, 40
LEFT = 170  # room for loop edges and their labels
WIDTH = LEFT + BOX_W + 330


@dataclass(frozen=True)
class Node:
    step_id: str
    speaker: str
    target: str
    x: int
    y: int
    runs: int = 0
    current: bool = False
    instruction: str = ""

    @property
    def cx(self) -> int:
        return self.x + BOX_W // 2


@dataclass(frozen=True)
class Edge:
    kind: str  # next, goto, loop, reply
    source: str
    target: str
    label: str
    path: str  # SVG path data
    lx: int  # label position
    ly: int


@dataclass
class Diagram:
    nodes: list[Node]
    edges: list[Edge]
    stops: list[str]
    final: str | None
    start: str
    width: int = WIDTH
    height: int = 0
    by_id: dict[str, Node] = field(default_factory=dict)


def _target_text(step: Step, names: dict[str, str]) -> str:
    reply = step.reply_to
    if reply == "none":
        return "no target"
    if reply == "previous":
        return "previous"
    if isinstance(reply, ReplyToRole):
        return names.get(reply.role, reply.role)
    if isinstance(reply, ReplyToStep):
        return f"step {reply.step}"
    if isinstance(reply, ReplyToMessage):
        return reply.message
    return str(reply)


def _reply_source(flow: Flow, index: int) -> str | None:
    """The step whose message ``flow.steps[index]`` answers, when one step can be named."""
    step = flow.steps[index]
    reply = step.reply_to
    if isinstance(reply, ReplyToStep):
        return reply.step
    if isinstance(reply, ReplyToRole):
        for earlier in reversed(flow.steps[:index]):
            if earlier.speaker == reply.role:
                return earlier.id
        return None
    if reply == "previous" and index > 0:
        return flow.steps[index - 1].id
    return None


def diagram(
    world: World, *, runs: dict[str, int] | None = None, current: str | None = None
) -> Diagram:
    """The shapes of ``world``'s flow; ``runs`` and ``current`` from a session's pointer."""
    flow = world.flow
    assert flow is not None
    names = {r.id: r.name or r.id for r in world.roles}
    counts = runs or {}
    nodes = [
        Node(
            step_id=s.id,
            speaker=names.get(s.speaker, s.speaker),
            target=_target_text(s, names),
            x=LEFT,
            y=20 + i * (BOX_H + GAP),
            runs=counts.get(s.id, 0),
            current=s.id == current,
            instruction=s.instruction or "",
        )
        for i, s in enumerate(flow.steps)
    ]
    by_id = {n.step_id: n for n in nodes}
    edges: list[Edge] = []
    for i, step in enumerate(flow.steps):
        node = by_id[step.id]
        edges += _step_edges(flow, i, step, node, by_id)
    height = 40 + len(nodes) * (BOX_H + GAP)
    return Diagram(
        nodes=nodes,
        edges=edges,
        stops=[describe(c) for c in flow.stop],
        final=(
            f"{flow.final.id}: {names.get(flow.final.speaker, flow.final.speaker)}"
            if flow.final
            else None
        ),
        start=flow.start_id,
        height=height,
        by_id=by_id,
    )


def _step_edges(flow: Flow, i: int, step: Step, node: Node, by_id: dict[str, Node]) -> list[Edge]:
    edges: list[Edge] = []
    bottom = node.y + BOX_H
    falls_through = i + 1 < len(flow.steps)
    if isinstance(step.next, str):
        falls_through = False
        if step.next != "end" and step.next in by_id:
            edges.append(_side_edge("goto", node, by_id[step.next], "next", 0))
    elif isinstance(step.next, list):
        falls_through = falls_through and all(b.when is not None for b in step.next)
        for k, branch in enumerate(step.next):
            label = f"when {describe(branch.when)}" if branch.when else "otherwise"
            if branch.goto in by_id:
                edges.append(_side_edge("goto", node, by_id[branch.goto], label, k))
    if falls_through:
        nxt = by_id[flow.steps[i + 1].id]
        edges.append(
            Edge(
                "next",
                step.id,
                nxt.step_id,
                "",
                f"M{node.cx},{bottom} L{nxt.cx},{nxt.y}",
                node.cx,
                bottom + GAP // 2,
            )
        )
    if step.loop is not None and step.loop.to in by_id:
        to = by_id[step.loop.to]
        label = f"loop max {step.loop.max}"
        if step.loop.until is not None:
            label += f" until {describe(step.loop.until)}"
        x = LEFT - 30
        path = (
            f"M{node.x},{node.y + BOX_H // 2} C{x - 40},{node.y + BOX_H // 2} "
            f"{x - 40},{to.y + BOX_H // 2} {to.x},{to.y + BOX_H // 2}"
        )
        edges.append(Edge("loop", step.id, to.step_id, label, path, 4, (node.y + to.y) // 2 + 30))
    source = _reply_source(flow, i)
    if source is not None and source in by_id and source != step.id:
        other = by_id[source]
        x = LEFT + BOX_W + 250
        path = (
            f"M{node.x + BOX_W},{node.y + 12} C{x},{node.y + 12} {x},{other.y + BOX_H - 12} "
            f"{other.x + BOX_W},{other.y + BOX_H - 12}"
        )
        edges.append(
            Edge("reply", step.id, source, "answers", path, x - 60, (node.y + other.y) // 2)
        )
    return edges


def _side_edge(kind: str, node: Node, to: Node, label: str, k: int) -> Edge:
    x = LEFT + BOX_W + 60 + 40 * k
    y1 = node.y + BOX_H // 2 + 6 * k
    y2 = to.y + BOX_H // 2
    path = f"M{node.x + BOX_W},{y1} C{x},{y1} {x},{y2} {to.x + BOX_W},{y2}"
    return Edge(kind, node.step_id, to.step_id, label, path, x + 4, (y1 + y2) // 2)
