"""A flow's worst case as a graph problem (pure; no model, no I/O).

The flow is a graph of steps. Each step has *exit* edges (its ``next``, its branches, or
the step after it) and, when it closes a loop, a *loop* edge back to ``loop.to``. The
engine's rules (flows.md) make the walk an adversary's game: ``until`` and ``when`` may
hold or not, global ``stop`` conditions never hold (a worst case), and a loop step jumps
back while its per-session count is below ``max`` (always without ``until``, at the
adversary's choice with it). Counters never reset, so the state of the walk is the step
plus the counts of the loop steps still reachable from it.

* A cycle made of exit edges alone is unbounded: only a stop condition or a cap ends it.
* Otherwise every cycle takes a loop edge, whose count strictly grows, so the state graph
  is acyclic and the longest walk is a memoised longest path over it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from rolecall.flows.model import Flow, Step

END = "end"
STATE_LIMIT = 1_000_000  # states explored before the analysis gives up (then: unbounded)


@dataclass(frozen=True)
class Graph:
    """The flow's steps with their exit and loop edges, and what reaches what."""

    steps: dict[str, Step]
    start: str
    exits: dict[str, tuple[str, ...]]  # step -> exit targets (END for the flow's end)
    loops: dict[str, tuple[str, int, bool]]  # loop step -> (to, max, has until)
    bit: dict[str, int]  # step -> its bit in the masks
    mask: dict[str, int]  # step -> the steps reachable from it (itself included), as bits
    relevant: dict[str, tuple[str, ...]]  # step -> loop steps whose counts matter there

    def reaches(self, a: str, b: str) -> bool:
        return bool(self.mask[a] & self.bit[b])

    @property
    def reachable(self) -> set[str]:
        return {sid for sid in self.steps if self.reaches(self.start, sid)}


def _exits(flow: Flow, index: int) -> tuple[str, ...]:
    step = flow.steps[index]
    following = flow.steps[index + 1].id if index + 1 < len(flow.steps) else END
    nxt = step.next
    if isinstance(nxt, str):
        return (nxt,)
    if isinstance(nxt, list):
        out: list[str] = []
        for branch in nxt:
            out.append(branch.goto)
            if branch.when is None:  # always holds: later branches and the fall-through never run
                return tuple(dict.fromkeys(out))
        out.append(following)
        return tuple(dict.fromkeys(out))
    return (following,)


def _reach(
    order: list[str], edges: dict[str, tuple[str, ...]], bit: dict[str, int]
) -> dict[str, int]:
    """What each step reaches (itself included): bitsets relaxed in reverse flow order."""
    mask = dict(bit)
    changed = True
    while changed:
        changed = False
        for sid in reversed(order):
            value = mask[sid]
            for nxt in edges[sid]:
                if nxt != END:
                    value |= mask[nxt]
            if value != mask[sid]:
                mask[sid] = value
                changed = True
    return mask


def graph(flow: Flow) -> Graph:
    steps = {s.id: s for s in flow.steps}
    exits = {s.id: _exits(flow, i) for i, s in enumerate(flow.steps)}
    loops = {
        s.id: (s.loop.to, s.loop.max, s.loop.until is not None)
        for s in flow.steps
        if s.loop is not None
    }
    edges = {
        sid: (*targets, *([loops[sid][0]] if sid in loops else []))
        for sid, targets in exits.items()
    }
    bit = {sid: 1 << i for i, sid in enumerate(steps)}
    mask = _reach(list(steps), edges, bit)
    # A loop step's count matters at X only if it may run again (X reaches it) and may have
    # run already (it reaches X): only the loop steps of X's strongly connected component.
    relevant = {
        sid: tuple(lp for lp in loops if mask[sid] & bit[lp] and mask[lp] & bit[sid])
        for sid in steps
    }
    return Graph(steps, flow.start_id, exits, loops, bit, mask, relevant)


def unreachable(g: Graph) -> list[str]:
    """Steps no walk from the start can execute, in flow order."""
    return [sid for sid in g.steps if not g.reaches(g.start, sid)]


def cap_only(g: Graph) -> list[str]:
    """Reachable steps from which no walk reaches the flow's end."""
    ends = sum(g.bit[sid] for sid in g.steps if END in g.exits[sid])
    return [sid for sid in g.steps if g.reaches(g.start, sid) and not g.mask[sid] & ends]


def exit_cycle(g: Graph) -> list[str] | None:
    """A reachable cycle of exit edges alone (the flow can go round it for ever), or None."""
    colour: dict[str, int] = {}
    for root in (s for s in g.steps if g.reaches(g.start, s)):
        if root in colour:
            continue
        stack: list[tuple[str, Iterable[str]]] = [(root, iter(g.exits[root]))]
        path = [root]
        colour[root] = 1
        while stack:
            node, it = stack[-1]
            nxt = next((t for t in it if t != END), None)
            if nxt is None:
                colour[node] = 2
                stack.pop()
                path.pop()
                continue
            if colour.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in colour:
                colour[nxt] = 1
                stack.append((nxt, iter(g.exits[nxt])))
                path.append(nxt)
    return None


class TooComplex(Exception):
    """The state space exceeded :data:`STATE_LIMIT`."""


Key = tuple[str, tuple[int, ...]]


def longest(
    g: Graph,
    weight: Callable[[str], int],
    end_weight: int,
    moves: dict[Key, list[Key | None]] | None = None,
) -> tuple[int, list[str]]:
    """The most ``weight`` a walk from the start to the end can collect, and that walk.

    ``weight(step)`` is what executing the step adds; ``end_weight`` what the end adds
    (the ``final`` turn). Call only when :func:`exit_cycle` found no cycle. ``moves``
    caches the state graph between calls on one flow with other weights.
    """
    moves = {} if moves is None else moves
    relevant = g.relevant

    def key(step: str, counts: dict[str, int]) -> Key:
        return step, tuple(counts.get(lp, 0) for lp in relevant[step])

    def successors(k: Key) -> list[Key | None]:
        step, values = k
        counts = dict(zip(relevant[step], values, strict=True))
        out: list[Key | None] = []
        loop = g.loops.get(step)
        may_exit = True
        if loop is not None:
            to, most, has_until = loop
            n = counts.get(step, 0) + 1
            counts[step] = n
            if n < most:
                out.append(key(to, counts))
                may_exit = has_until
        if may_exit:
            out.extend(None if t == END else key(t, counts) for t in g.exits[step])
        return out

    value: dict[Key, int] = {}
    choice: dict[Key, Key | None] = {}
    root = key(g.start, {})
    stack = [root]
    while stack:
        k = stack[-1]
        if k in value:
            stack.pop()
            continue
        succ = moves.get(k)
        if succ is None:
            succ = moves[k] = successors(k)
        pending = [s for s in succ if s is not None and s not in value]
        if pending:
            stack.extend(pending)
            if len(stack) > STATE_LIMIT:
                raise TooComplex
            continue
        best: Key | None = None
        best_value = -1
        for s in succ:
            v = end_weight if s is None else value[s]
            if v > best_value:
                best, best_value = s, v
        value[k] = weight(k[0]) + best_value
        choice[k] = best
        stack.pop()
        if len(value) > STATE_LIMIT:
            raise TooComplex
    walk: list[str] = []
    at: Key | None = root
    while at is not None:
        walk.append(at[0])
        at = choice[at]
    return value[root], walk
