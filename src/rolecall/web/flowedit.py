"""Saving the flow page's form back to world.yaml: loops and stop conditions.

The file is read and written with ruamel.yaml's round-trip mode, with the file's own
indentation, so its comments, key order, quoting and indentation are kept wherever
the edit does not touch them (an unchanged form leaves the file as it was). The edited text
goes through the same loader as ``rolecall run`` (:func:`rolecall.world.loader.
parse_world`); a world with any problem is not saved, and each problem is shown next
to the field it names (a loop's ``to``/``max``/``until``, or the stop list).

The form's fields: ``loop.<i>.to`` (a step id, or empty for no loop), ``loop.<i>.max``,
``loop.<i>.until`` (a condition in YAML, e.g. ``{contains: UNDERSTOOD}``, or empty) for
the form's row ``i``, whose step is named by ``step.<i>`` (its id: rows are matched to
steps by id, never by position); ``stop``: one condition per line, in YAML; ``version``:
the file as the form was made from it (:func:`version`), so a form made before the file
changed is refused (:class:`FormConflict`) rather than written over the change.

The file itself is kept as it is: an unchanged form writes nothing (a byte order mark, a
long line, an unused anchor stay); a change is written through a symbolic link to the
file it points to, with its mode and its line endings (CRLF stays CRLF); and a change
that the round trip cannot write as asked (a loop shared with another step through a
YAML alias, a merge key) is refused, naming the step, instead of saving something else.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark, YAMLError
from ruamel.yaml.tokens import CommentToken

from rolecall.errors import RolecallError, WorldError
from rolecall.paths import write_atomically
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import parse_world

__all__ = [
    "STALE",
    "EditResult",
    "FormConflict",
    "apply_form",
    "editable_steps",
    "field_value",
    "stop_text",
    "version",
]

_STEP_PATH = re.compile(r"^flow\.steps\[(\d+)\]\.loop(?:\.(to|max|until))?")
_STOP_PATH = re.compile(r"^flow\.stop(?:\[\d+\])?")


class FormConflict(RolecallError):
    """The form cannot be applied to the file as it is now: nothing was saved."""


def version(path: Path) -> str:
    """The file as it is now, in a few characters: a form carries the version it was
    made from."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:20]


@dataclass
class _Text:
    """A world file's text as the round trip handles it (``\n`` line ends, no byte
    order mark), and how to write it back like the file."""

    raw: bytes
    text: str
    bom: bool
    crlf: bool

    @classmethod
    def read(cls, path: Path) -> _Text:
        raw = path.read_bytes()
        text = raw.decode("utf-8")  # a file that is not UTF-8 does not load: never here
        bom = text.startswith("\ufeff")
        text = text.removeprefix("\ufeff")
        crlf = "\r\n" in text
        return cls(raw, text.replace("\r\n", "\n") if crlf else text, bom, crlf)

    def encode(self, text: str) -> bytes:
        if self.crlf:
            text = text.replace("\n", "\r\n")
        return (("\ufeff" if self.bom else "") + text).encode("utf-8")


@dataclass
class EditResult:
    saved: bool
    errors: dict[str, list[str]] = field(default_factory=dict)  # field name -> problems
    other: list[str] = field(default_factory=list)  # problems no field names

    def add(self, name: str, problem: str) -> None:
        self.errors.setdefault(name, []).append(problem)


# (mapping indent, a list item's indent, its dash's offset), the usual styles first
_INDENTS = tuple(
    dict.fromkeys(
        [
            (2, 4, 2),  # roles:\n  - id: a
            (2, 2, 0),  # roles:\n- id: a
            *(
                (mapping, offset + gap, offset)
                for mapping in (2, 4, 3)
                for offset in (0, 2, 4)
                for gap in (2, 4)
                if offset <= mapping
            ),
        ]
    )
)


def _round_trip(text: str) -> YAML:
    """ruamel.yaml's round trip with the indentation ``text`` is written with.

    ruamel.yaml does not detect it (it writes ``roles:`` ``- id: a`` whatever the file
    had, which also moves the inline comments of those lines): of the usual styles, the
    one that writes the unedited file back most like the original is used (a file that
    mixes styles gets the one most of its lines use)."""
    best: tuple[int, YAML] | None = None
    for mapping, sequence, offset in _INDENTS:
        yaml = YAML()
        yaml.preserve_quotes = True
        yaml.width = 1 << 30  # a long line stays one line
        yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        out = io.StringIO()
        yaml.dump(yaml.load(text), out)
        written = out.getvalue()
        if written == text:
            return yaml
        kept = sum(a == b for a, b in zip(written.splitlines(), text.splitlines(), strict=False))
        if best is None or kept > best[0]:
            best = (kept, yaml)
    assert best is not None
    return best[1]


def editable_steps(path: Path) -> list[dict[str, Any]] | None:
    """The flow's steps as written in the file, or None when it has no ``flow.steps``
    of its own (a preset world's flow is made by its mode)."""
    try:
        doc = YAML(typ="safe").load(path.read_text("utf-8"))
    except (OSError, ValueError, YAMLError):  # not UTF-8 (a ValueError): it does not load
        return None
    flow = doc.get("flow") if isinstance(doc, dict) else None
    steps = flow.get("steps") if isinstance(flow, dict) else None
    if not isinstance(steps, list) or not all(isinstance(step, dict) for step in steps):
        return None  # a step that is not a mapping: the world does not load
    return steps


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


def form_fields(step_count: int) -> list[str]:
    """The fields the flow form always sends for a flow of ``step_count`` steps."""
    names = [
        f"{kind}.{i}{key}"
        for i in range(step_count)
        for kind, key in (("step", ""), ("loop", ".to"), ("loop", ".max"), ("loop", ".until"))
    ]
    return [*names, "stop", "version"]


def _loop(form: Mapping[str, str], i: int, result: EditResult) -> dict[str, Any] | None:
    """The new loop of step ``i`` (None for no loop); each wrong field is added to
    ``result`` (then the value returned is not to be used)."""
    to = form.get(f"loop.{i}.to", "").strip()
    raw_max = form.get(f"loop.{i}.max", "").strip()
    until = form.get(f"loop.{i}.until", "").strip()
    if not to:
        return None
    loop: dict[str, Any] = {"to": to}
    try:
        loop["max"] = int(raw_max)
    except ValueError:
        result.add(f"loop.{i}.max", f"max must be a whole number from 1 to 10000, got {raw_max!r}")
    if until:
        cond = _condition(until, f"loop.{i}.until", result)
        if cond is not None:
            loop["until"] = cond
    return loop


# ---------------------------------------------------------------- comments
# ruamel.yaml keeps the comment lines that follow a block with the last key (or item)
# of its innermost block, together with that line's own end-of-line comment. Adding a
# key after it or removing it would move or drop those lines (the comment above the
# next step, say): these helpers hand them on to the line that now ends the block.


def _slot(node: Any, key: Any) -> tuple[list[Any], int]:
    """Where the comment after ``node[key]`` lives: a comment list and its index."""
    value = node[key]
    if isinstance(value, CommentedMap | CommentedSeq) and value and not value.fa.flow_style():
        return _slot(value, list(value)[-1] if isinstance(value, CommentedMap) else len(value) - 1)
    items = node.ca.items.setdefault(key, [None, None, None, None])
    return items, 2 if isinstance(node, CommentedMap) else 0


def _take_trailer(node: Any, key: Any, column: int | None = None) -> str:
    """The comment lines after ``node[key]``'s line, removed (its own comment stays);
    with ``column``, only from the first one indented no deeper than it (those above it
    belong to the inner block), each with the blank lines before it."""
    items, at = _slot(node, key)
    token = items[at]
    if token is None:
        return ""
    own, _, rest = str(token.value).partition("\n")
    kept = ""
    if column is not None:
        lines = rest.splitlines(keepends=True)
        start = 0
        for n, line in enumerate(lines):
            if line.strip() and len(line) - len(line.lstrip()) > column:
                start = n + 1  # this comment, and the blank lines before it, stay
            elif line.strip():
                break
        kept, rest = "".join(lines[:start]), "".join(lines[start:])
    if own.strip() or kept:
        token.value = own + "\n" + kept
    else:
        items[at] = None
    return rest


def _give_trailer(node: Any, key: Any, rest: str) -> None:
    """Put comment lines taken by :func:`_take_trailer` after ``node[key]``."""
    if not rest:
        return
    items, at = _slot(node, key)
    token = items[at]
    if token is None:
        items[at] = CommentToken("\n" + rest, CommentMark(0))
    else:
        token.value = str(token.value).rstrip("\n") + "\n" + rest


def _put(node: CommentedMap, key: str, value: Any) -> None:
    """``node[key] = value``; a new last key takes the comment lines after the block."""
    if key in node or not node:
        node[key] = value
        return
    rest = _take_trailer(node, list(node)[-1], getattr(node.lc, "col", None))
    node[key] = value
    _give_trailer(node, key, rest)


def _drop(node: CommentedMap, key: str) -> None:
    """``del node[key]``; the comment lines after it go to the line before it."""
    if key not in node:
        return
    keys = list(node)
    at = keys.index(key)
    rest = _take_trailer(node, key)
    del node[key]
    node.ca.items.pop(key, None)
    if at > 0:
        _give_trailer(node, keys[at - 1], rest)


def _set_loop(step: CommentedMap, loop: dict[str, Any] | None) -> bool:
    """Write ``loop`` into the step, touching the file's text only where it changed: an
    unchanged loop keeps its style, quoting and comments; a changed one keeps the style
    of the loop it replaces (a new one is written in flow style). A loop with an anchor
    may be another step's too: it is replaced, never changed in place. Whether it
    changed."""
    old = step.get("loop")
    if loop is None:
        if "loop" not in step:
            return False
        _drop(step, "loop")
        return True
    if old == loop:
        return False
    if isinstance(old, CommentedMap) and old.anchor.value is None:
        for key in [k for k in old if k not in loop]:
            _drop(old, key)
        for key, value in loop.items():
            if old.get(key) != value:
                _put(old, key, value)
        return True
    new = CommentedMap(loop)
    new.fa.set_flow_style()
    if old is None:
        _put(step, "loop", new)
    else:
        step["loop"] = new
    return True


def _set_stops(flow: CommentedMap, stops: list[Any]) -> bool:
    """Write the stop list (unchanged: left as it is, with its comments); whether it
    changed."""
    if flow.get("stop", []) == stops:
        return False
    if not stops:
        _drop(flow, "stop")
        return True
    old = flow.get("stop")
    seq = CommentedSeq(stops)
    if isinstance(old, CommentedSeq) and old.fa.flow_style():
        seq.fa.set_flow_style()
    if old is None:
        _put(flow, "stop", seq)
    else:
        rest = _take_trailer(flow, "stop")
        flow["stop"] = seq
        _give_trailer(flow, "stop", rest)
    return True


def apply_form(
    path: Path, form: Mapping[str, str], *, roles_dir: Path | None, expected: str | None = None
) -> EditResult:
    """Apply the form to the world file at ``path``; save it only when the world is valid.

    Every problem is listed: a field that is wrong by itself (a ``max`` that is not a
    number, a condition that is not YAML) is named, and the rest of the form is still
    checked with the world (the wrong field's step keeps its loop from the file for
    that check, and problems the check finds in it are not repeated).

    With ``expected`` (the form's ``version``), a file that changed since is refused
    (:class:`FormConflict`), as is a row naming a step the file no longer has."""
    result = EditResult(saved=False)
    source = _Text.read(path)
    if expected is not None and hashlib.sha256(source.raw).hexdigest()[:20] != expected:
        raise FormConflict(STALE)
    text = source.text
    yaml = _round_trip(text)
    doc = yaml.load(text)
    steps: CommentedSeq = doc["flow"]["steps"]
    rows = _rows(steps, form)
    changed = False
    wanted: dict[int, dict[str, Any] | None] = {}
    for i, step in rows:
        before = len(result.errors)
        loop = _loop(form, i, result)
        if len(result.errors) == before:
            wanted[id(step)] = loop
            changed = _set_loop(step, loop) or changed
    stops: list[Any] = []
    stop_errors = 0
    for n, line in enumerate(form.get("stop", "").splitlines(), 1):
        if line.strip():
            cond = _condition(line.strip(), "stop", result)
            if cond is None:
                result.errors["stop"][-1] = f"line {n}: {result.errors['stop'][-1]}"
                stop_errors += 1
            stops.append(cond)
    if not stop_errors:
        changed = _set_stops(doc["flow"], stops) or changed
    new_text = text
    if changed:
        out = io.StringIO()
        yaml.dump(doc, out)
        new_text = out.getvalue()
    wrong = set(result.errors)
    try:
        parse_world(new_text, source=str(path), library=RoleLibrary(roles_dir), path=path)
    except WorldError as exc:
        for problem in exc.problems:
            _place(problem, result, skip=wrong)
    if result.errors or result.other:
        return result
    if changed:
        unfaithful = _unfaithful(text, new_text, steps, wanted, None if stop_errors else stops)
        if unfaithful:
            result.other.append(unfaithful)
            return result
        _write(path, source, source.encode(new_text))
    result.saved = True
    return result


STALE = (
    "world.yaml changed since this form was shown (another editor, or the file itself): "
    "nothing was saved; reload the page to edit it as it is now"
)


def _rows(steps: CommentedSeq, form: Mapping[str, str]) -> list[tuple[int, Any]]:
    """The form's rows and the steps they edit: by the id in ``step.<i>`` (a form made
    before the steps changed cannot land on another step), else by position."""
    if any(not isinstance(step, CommentedMap) for step in steps):
        raise FormConflict("a step of this flow is not a mapping: fix world.yaml first")
    by_id = {str(step.get("id")): step for step in steps}
    rows: list[tuple[int, Any]] = []
    for i, step in enumerate(steps):
        named = form.get(f"step.{i}")
        if named is None:
            rows.append((i, step))
        elif named in by_id:
            rows.append((i, by_id[named]))
        else:
            raise FormConflict(f"world.yaml has no step {named!r} any more: {STALE}")
    return rows


def _unfaithful(
    text: str,
    new_text: str,
    steps: CommentedSeq,
    wanted: dict[int, dict[str, Any] | None],
    stops: list[Any] | None,
) -> str | None:
    """What the written text would say other than what the form asked (None: nothing).

    The round trip writes the document's nodes; a node shared through an alias, or a
    merge key, can make it write another value than the one edited."""
    safe = YAML(typ="safe")
    before, after = safe.load(text), safe.load(new_text)
    expected_steps = []
    for step, old in zip(steps, before["flow"]["steps"], strict=True):
        want = dict(old)
        if id(step) in wanted:
            loop = wanted[id(step)]
            want.pop("loop", None)
            if loop is not None:
                want["loop"] = dict(loop)
        expected_steps.append(want)
    for want, got in zip(expected_steps, after["flow"]["steps"], strict=False):
        if want != got:
            return (
                f"step {want.get('id')!r} would be written as {flow_yaml(got)}, not as the form "
                "asks: it shares its loop with another step (a YAML anchor and alias, or a "
                "merge key), which this form cannot write faithfully; edit world.yaml "
                "itself: nothing was saved"
            )
    if stops is not None and [dict(s) for s in stops] != (after["flow"].get("stop") or []):
        return (
            "the stop conditions would not be written as the form asks (YAML aliases in "
            "world.yaml): edit world.yaml itself; nothing was saved"
        )
    before_rest = {k: v for k, v in before.items() if k != "flow"}
    after_rest = {k: v for k, v in after.items() if k != "flow"}
    if before_rest != after_rest or len(after["flow"]["steps"]) != len(expected_steps):
        return (
            "saving would change more of world.yaml than the loops and stop conditions "
            "(YAML aliases shared with them): edit world.yaml itself; nothing was saved"
        )
    return None


def _write(path: Path, source: _Text, data: bytes) -> None:
    """Write the new text where the file is (through a symbolic link, to the file it
    names), keeping its mode; refused if the file changed while the form was applied."""
    target = Path(os.path.realpath(path))
    if target.read_bytes() != source.raw:
        raise FormConflict(STALE)
    mode = stat.S_IMODE(target.stat().st_mode)
    write_atomically(target, data)
    os.chmod(target, mode)


def _place(problem: str, result: EditResult, *, skip: set[str]) -> None:
    """Put a problem the loader found next to its field (not one whose own value was
    already refused: the check saw the file's value there, not the form's)."""
    where = problem.split(":", 1)[0].strip()
    step = _STEP_PATH.match(where)
    stepped = {name.split(".")[1] for name in skip if name.startswith("loop.")}
    if step:
        if step.group(1) not in stepped:
            result.add(f"loop.{step.group(1)}.{step.group(2) or 'to'}", problem)
    elif _STOP_PATH.match(where):
        if "stop" not in skip:
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
