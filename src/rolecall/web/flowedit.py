"""Saving the flow page's form back to world.yaml: loops and stop conditions.

The file is read and written with ruamel.yaml's round-trip mode, so its comments,
key order and quoting are kept wherever the edit does not touch them. The edited text
goes through the same loader as ``rolecall run`` (:func:`rolecall.world.loader.
parse_world`); a world with any problem is not saved, and each problem is shown next
to the field it names (a loop's ``to``/``max``/``until``, or the stop list).

The form's fields: ``loop.<i>.to`` (a step id, or empty for no loop), ``loop.<i>.max``,
``loop.<i>.until`` (a condition in YAML, e.g. ``{contains: UNDERSTOOD}``, or empty) for
step number ``i``; ``stop``: one condition per line, in YAML.
"""

from __future__ import annotations

import io
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError

from rolecall.errors import WorldError
from rolecall.paths import write_atomically
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import parse_world

__all__ = ["EditResult", "apply_form", "editable_steps", "field_value", "stop_text"]

_STEP_PATH = re.compile(r"^flow\.steps\[(\d+)\]\.loop(?:\.(to|max|until))?")
_STOP_PATH = re.compile(r"^flow\.stop(?:\[\d+\])?")


@dataclass
class EditResult:
    saved: bool
    errors: dict[str, list[str]] = field(default_factory=dict)  # field name -> problems
    other: list[str] = field(default_factory=list)  # problems no field names

    def add(self, name: str, problem: str) -> None:
        self.errors.setdefault(name, []).append(problem)


def _round_trip() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def editable_steps(path: Path) -> list[dict[str, Any]] | None:
    """The flow's steps as written in the file, or None when it has no ``flow.steps``
    of its own (a preset world's flow is made by its mode)."""
    try:
        doc = YAML(typ="safe").load(path.read_text("utf-8"))
    except (OSError, YAMLError):
        return None
    flow = doc.get("flow") if isinstance(doc, dict) else None
    steps = flow.get("steps") if isinstance(flow, dict) else None
    return steps if isinstance(steps, list) else None


def _condition(text: str, name: str, result: EditResult) -> Any:
    try:
        value = YAML(typ="safe").load(text)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        mark = getattr(exc, "problem_mark", None)
        where = f" at column {mark.column + 1}" if mark is not None else ""
        result.add(name, f"not YAML: {' '.join(str(problem).split())}{where}")
        return None
    if not isinstance(value, dict):
        result.add(name, "a condition is a mapping, e.g. {contains: DONE}")
        return None
    flow_map = CommentedMap(value)
    flow_map.fa.set_flow_style()
    return flow_map


def _loop(form: Mapping[str, str], i: int, result: EditResult) -> CommentedMap | str | None:
    """The new loop of step ``i``: a map, None for no loop, "" when a field is wrong."""
    to = form.get(f"loop.{i}.to", "").strip()
    if not to:
        return None
    loop = CommentedMap()
    loop["to"] = to
    raw_max = form.get(f"loop.{i}.max", "").strip()
    try:
        loop["max"] = int(raw_max)
    except ValueError:
        result.add(f"loop.{i}.max", f"max must be a whole number from 1 to 10000, got {raw_max!r}")
        return ""
    until = form.get(f"loop.{i}.until", "").strip()
    if until:
        cond = _condition(until, f"loop.{i}.until", result)
        if cond is None:
            return ""
        loop["until"] = cond
    loop.fa.set_flow_style()
    return loop


def apply_form(path: Path, form: Mapping[str, str], *, roles_dir: Path | None) -> EditResult:
    """Apply the form to the world file at ``path``; save it only when the world is valid."""
    result = EditResult(saved=False)
    yaml = _round_trip()
    text = path.read_text("utf-8")
    doc = yaml.load(text)
    steps: CommentedSeq = doc["flow"]["steps"]
    for i, step in enumerate(steps):
        loop = _loop(form, i, result)
        if loop == "":
            continue
        if loop is None:
            step.pop("loop", None)
        else:
            step["loop"] = loop
    stops = CommentedSeq()
    for n, line in enumerate(form.get("stop", "").splitlines(), 1):
        if line.strip():
            cond = _condition(line.strip(), "stop", result)
            if cond is None:
                result.errors["stop"][-1] = f"line {n}: {result.errors['stop'][-1]}"
            stops.append(cond)
    if stops:
        doc["flow"]["stop"] = stops
    else:
        doc["flow"].pop("stop", None)
    if result.errors:
        return result
    out = io.StringIO()
    yaml.dump(doc, out)
    new_text = out.getvalue()
    try:
        parse_world(new_text, source=str(path), library=RoleLibrary(roles_dir), path=path)
    except WorldError as exc:
        for problem in exc.problems:
            _place(problem, result)
        return result
    write_atomically(path, new_text)
    result.saved = True
    return result


def _place(problem: str, result: EditResult) -> None:
    where = problem.split(":", 1)[0].strip()
    step = _STEP_PATH.match(where)
    if step:
        result.add(f"loop.{step.group(1)}.{step.group(2) or 'to'}", problem)
    elif _STOP_PATH.match(where):
        result.add("stop", problem)
    else:
        result.other.append(problem)


def flow_yaml(value: Any) -> str:
    """``value`` as one line of YAML (a condition as the form shows it)."""
    yaml = YAML(typ="safe")
    yaml.default_flow_style = True
    yaml.width = 4096
    out = io.StringIO()
    yaml.dump(value, out)
    return out.getvalue().strip()


def field_value(step: dict[str, Any], key: str) -> str:
    """A step's loop field (``max``, ``until``) as the form shows it."""
    value = (step.get("loop") or {}).get(key)
    if value is None:
        return ""
    return flow_yaml(value) if isinstance(value, dict) else str(value)


def stop_text(path: Path) -> str:
    """The file's stop conditions, one per line."""
    doc = YAML(typ="safe").load(path.read_text("utf-8"))
    flow = doc.get("flow") if isinstance(doc, dict) else None
    stops = flow.get("stop") if isinstance(flow, dict) else None
    return "\n".join(flow_yaml(c) for c in stops or [])
