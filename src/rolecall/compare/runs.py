"""What ``rolecall compare`` and the web view's compare page show (docs/compare.md).

Pure: each run's figures come from its stored document (:func:`figures`); the first
message where two transcripts differ, with a word diff of the two texts, from their
messages (:func:`first_difference`). The store is read by the callers.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from rolecall.session.state import TranscriptMessage
    from rolecall.storage.document import SessionDocument
    from rolecall.storage.scores import StoredScore

_TOKEN = re.compile(r"\S+")


@dataclass(frozen=True, slots=True)
class RunFigures:
    """One stored run's figures."""

    session_id: str
    world: str
    models: tuple[str, ...]  # the models its agent messages ran on, as the world names them
    turns: int  # agent messages
    input_tokens: int
    output_tokens: int
    cost_usd: float | None  # None when a message's cost is unknown
    wall_seconds: float  # from its creation to the end of its last message
    state: str
    stop_reason: str | None
    scores: tuple[StoredScore, ...] = ()
    values: tuple[tuple[str, Any], ...] = ()  # a batch run's varied values

    def record(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "session_id": self.session_id,
            "world": self.world,
            "models": list(self.models),
            "turns": self.turns,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cost_usd": self.cost_usd,
            "wall_seconds": round(self.wall_seconds, 3),
            "state": self.state,
            "stop_reason": self.stop_reason,
            "scores": [s.record() for s in self.scores],
        }
        if self.values:
            out["values"] = dict(self.values)
        return out


def _models(doc: SessionDocument) -> tuple[str, ...]:
    """The models of the world's roles (a --model override wins), in role order."""
    if doc.model_override:
        return (doc.model_override,)
    world = doc.world
    default = world.get("model")
    found: list[str] = []
    for role in world.get("roles") or []:
        if not isinstance(role, dict):
            continue
        model = role.get("model", default)
        if isinstance(model, str) and model not in found:
            found.append(model)
    if not found and isinstance(default, str):
        found.append(default)
    return tuple(found)


def figures(
    doc: SessionDocument,
    scores: Sequence[StoredScore] = (),
    values: dict[str, Any] | None = None,
) -> RunFigures:
    """A stored session's figures (its messages' sums, its state, its scores)."""
    agents = [m for m in doc.messages if m.kind == "agent"]
    costs = [m.cost_usd for m in agents]
    wall = 0.0
    if doc.messages:
        last = doc.messages[-1]
        wall = max(0.0, (last.ts - doc.created_at).total_seconds() + last.seconds)
    return RunFigures(
        session_id=doc.session_id,
        world=str(doc.world.get("name", "")),
        models=_models(doc),
        turns=len(agents),
        input_tokens=sum(m.input_tokens for m in agents),
        output_tokens=sum(m.output_tokens for m in agents),
        cost_usd=None if None in costs else sum(c or 0.0 for c in costs),
        wall_seconds=wall,
        state=doc.state.state,
        stop_reason=doc.state.stop_reason,
        scores=tuple(scores),
        values=tuple((values or {}).items()),
    )


# ------------------------------------------------------------ the first difference
DiffOp = tuple[Literal["same", "removed", "added"], str]


def word_diff(old: str, new: str) -> list[DiffOp]:
    """The two texts as runs of words kept, removed (only in ``old``) and added (only
    in ``new``), in order; whitespace is normalised to single spaces."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    ops: list[DiffOp] = []
    matcher = difflib.SequenceMatcher(a=a, b=b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            ops.append(("same", " ".join(a[i1:i2])))
            continue
        if i2 > i1:
            ops.append(("removed", " ".join(a[i1:i2])))
        if j2 > j1:
            ops.append(("added", " ".join(b[j1:j2])))
    return ops


def render_diff(ops: Sequence[DiffOp]) -> str:
    """A word diff as text: ``[-removed-]`` and ``{+added+}`` (git's --word-diff=plain)."""
    parts = []
    for kind, text in ops:
        if kind == "removed":
            parts.append(f"[-{text}-]")
        elif kind == "added":
            parts.append(f"{{+{text}+}}")
        else:
            parts.append(text)
    return " ".join(parts)


@dataclass(frozen=True, slots=True)
class Side:
    """One run's message at the difference (None: its transcript ended before it)."""

    session_id: str
    message_id: str | None
    sender: str | None
    content: str | None

    def record(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "message_id": self.message_id,
            "sender": self.sender,
            "content": self.content,
        }


@dataclass(frozen=True, slots=True)
class Difference:
    """Where two transcripts first part: the position (0-based), both sides, and the
    word diff of the two texts (empty when one side has no message there)."""

    index: int
    a: Side
    b: Side
    what: Literal["sender", "content", "length"]
    diff: tuple[DiffOp, ...]

    def record(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "position": self.index + 1,
            "what": self.what,
            "a": self.a.record(),
            "b": self.b.record(),
            "word_diff": [{"op": k, "text": t} for k, t in self.diff],
            "word_diff_text": render_diff(self.diff),
        }


def _same(x: TranscriptMessage, y: TranscriptMessage) -> bool:
    return x.sender == y.sender and x.kind == y.kind and x.content == y.content


def first_difference(
    a_id: str,
    a: Sequence[TranscriptMessage],
    b_id: str,
    b: Sequence[TranscriptMessage],
) -> Difference | None:
    """The first position where the two transcripts differ (sender or text), or where
    one ends and the other goes on; None when they are the same."""
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        if x is not None and y is not None and _same(x, y):
            continue
        side_a = Side(a_id, *(_parts(x)))
        side_b = Side(b_id, *(_parts(y)))
        if x is None or y is None:
            return Difference(i, side_a, side_b, "length", ())
        what: Literal["sender", "content"] = "sender" if x.sender != y.sender else "content"
        return Difference(i, side_a, side_b, what, tuple(word_diff(x.content, y.content)))
    return None


def _parts(m: TranscriptMessage | None) -> tuple[str | None, str | None, str | None]:
    if m is None:
        return None, None, None
    return m.id, m.sender, m.content


# ------------------------------------------------------------ batches
def grouped(runs: Sequence[RunFigures]) -> list[tuple[dict[str, Any], list[RunFigures]]]:
    """A batch's runs grouped by their varied values, groups in the order first seen."""
    groups: dict[str, tuple[dict[str, Any], list[RunFigures]]] = {}
    for run in runs:
        key = repr(run.values)
        if key not in groups:
            groups[key] = (dict(run.values), [])
        groups[key][1].append(run)
    return list(groups.values())
