"""The plan of a batch: ``--vary`` axes, their cross product times ``--runs``.

Pure: parses ``KEY=V1,V2,...`` texts, applies one combination of values to a world's
raw document (the YAML mapping, before templates and presets are expanded, so a varied
topic or persona flows through a preset exactly as if written in the file), and builds
every combination's world up front; the runs themselves (each combination ``--runs``
times) are made as they are reached (:class:`RunSpecs`). Every problem (a bad key, a
role that does not exist, a value the world rejects) is collected and reported at once
as a usage error, before anything runs.
"""

from __future__ import annotations

import copy
import itertools
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, overload

import yaml

from rolecall import paths
from rolecall.batch import KEYS_HELP
from rolecall.errors import NotTextError, UsageError, WorldError
from rolecall.modes.debate import persona_prompt
from rolecall.world.library import RoleLibrary, suggest
from rolecall.world.loader import build_world
from rolecall.world.models import Settings, World

_ROLE_KEY = re.compile(r"^role\.([^.]+)\.(model|persona)$")
_SETTINGS_KEY = re.compile(r"^settings\.([^.]+)$")


class VaryError(UsageError):
    """One or more ``--vary`` problems; all of them are in ``problems``."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = problems
        lines = "\n".join(f"  {p}" for p in problems)
        count = f"{len(problems)} problem" + ("" if len(problems) == 1 else "s")
        super().__init__(f"--vary: {count}\n{lines}")


@dataclass(frozen=True)
class Axis:
    """One ``--vary`` option: a key and its values, in the order given."""

    key: str
    values: tuple[str, ...]


@dataclass(frozen=True)
class RunSpec:
    """One run of a batch: its number (1, 2, ...) and the values it varies."""

    run: int
    combination: int  # index into the plan's worlds
    values: dict[str, str] = field(hash=False)


class RunSpecs(Sequence[RunSpec]):
    """Every run of a plan, in order, made when asked for: ``--runs 100000000`` costs
    nothing until a run is reached, and iterating holds one run at a time."""

    def __init__(self, combinations: tuple[dict[str, str], ...], runs: int) -> None:
        self._combinations = combinations
        self._runs = runs

    def __len__(self) -> int:
        return len(self._combinations) * self._runs

    @overload
    def __getitem__(self, index: int) -> RunSpec: ...

    @overload
    def __getitem__(self, index: slice) -> list[RunSpec]: ...

    def __getitem__(self, index: int | slice) -> RunSpec | list[RunSpec]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(f"run index {index} out of range")
        combination = index // self._runs
        return RunSpec(index + 1, combination, self._combinations[combination])

    def __iter__(self) -> Iterator[RunSpec]:
        for combination, values in enumerate(self._combinations):
            first = combination * self._runs + 1
            for run in range(first, first + self._runs):
                yield RunSpec(run, combination, values)


@dataclass(frozen=True)
class BatchPlan:
    axes: tuple[Axis, ...]
    runs_per_combination: int
    worlds: tuple[World, ...]  # one per combination, in cross-product order
    runs: RunSpecs  # lazy: made as they are reached

    @property
    def total(self) -> int:
        return len(self.runs)


def _key_problem(key: str) -> str | None:
    if key in ("topic", "model", "max_turns") or _ROLE_KEY.match(key):
        return None
    settings = _SETTINGS_KEY.match(key)
    if settings:
        name = settings.group(1)
        if name in Settings.model_fields:
            return None
        return f"{key}: no setting '{name}'{suggest(name, list(Settings.model_fields))}"
    return f"{key}: unknown key (keys: {KEYS_HELP})"


def parse_vary(
    texts: Sequence[str], *, read_text: Callable[[Path], str] | None = None
) -> list[Axis]:
    """Axes from ``--vary`` texts; ``KEY=@FILE`` reads the values one per line."""
    axes, problems = read_vary(texts, read_text=read_text)
    if problems:
        raise VaryError(problems)
    return axes


def read_vary(
    texts: Sequence[str], *, read_text: Callable[[Path], str] | None = None
) -> tuple[list[Axis], list[str]]:
    """The axes of the well-formed ``--vary`` texts, and the problems of the others."""
    read = read_text or paths.read_text
    problems: list[str] = []
    axes: list[Axis] = []
    seen: set[str] = set()
    for text in texts:
        key, eq, rest = text.partition("=")
        key = key.strip()
        if not eq or not key:
            problems.append(f"{text!r}: expected KEY=V1,V2,... (keys: {KEYS_HELP})")
            continue
        if (problem := _key_problem(key)) is not None:
            problems.append(problem)
            continue
        if key in seen:
            problems.append(f"{key}: given twice (put all its values in one --vary)")
            continue
        seen.add(key)
        if rest.startswith("@"):
            try:
                raw = [line.strip() for line in read(Path(rest[1:])).splitlines()]
            except OSError as exc:
                problems.append(f"{key}: cannot read {rest[1:]} ({exc.strerror or exc})")
                continue
            except NotTextError as exc:
                problems.append(f"{key}: {exc}")
                continue
            values = [v for v in raw if v]
        else:
            values = [v.strip() for v in split_values(rest)]
            if any(not v for v in values):
                problems.append(f"{key}: empty value in {rest!r} (values are comma-separated)")
                continue
        if not values:
            problems.append(f"{key}: no values")
            continue
        if len(set(values)) != len(values):
            dup = next(v for v in values if values.count(v) > 1)
            problems.append(f"{key}: value {dup!r} given twice")
            continue
        axes.append(Axis(key, tuple(values)))
    return axes, problems


_CLOSING = {"[": "]", "{": "}"}


def split_values(text: str) -> list[str]:
    """``V1,V2,...`` split at its commas, but not at those inside a value that is a YAML
    flow collection or a quoted string (``[a, b]``, ``{x: 1, y: 2}``, ``"a, b"``): such
    a value starts with its bracket or quote and runs to the matching close. Brackets
    and quotes elsewhere in a value are plain text (``Don't panic``, ``x [y], z``). A
    bracket or quote never closed: a plain split at every comma, as before.
    """
    values: list[str] = []
    current = ""
    closers: list[str] = []  # the brackets (and the quote) open at this point
    i = 0
    while i < len(text):
        c = text[i]
        quote = closers[-1] if closers and closers[-1] in "'\"" else None
        if quote is not None:
            if quote == '"' and c == "\\" and i + 1 < len(text):  # "a \" b": an escape
                current += text[i : i + 2]
                i += 2
                continue
            if c == quote and quote == "'" and text[i + 1 : i + 2] == "'":  # 'it''s'
                current += "''"
                i += 2
                continue
            if c == quote:
                closers.pop()
        elif closers or not current.strip():  # inside a flow value, or at a value's start
            if c in _CLOSING:
                closers.append(_CLOSING[c])
            elif c in "'\"" and current.rstrip()[-1:] in ("", "[", "{", ",", ":"):
                closers.append(c)  # a quoted scalar: at the start of a value or an item
            elif closers and c == closers[-1]:
                closers.pop()
            elif c == "," and not closers:
                values.append(current)
                current = ""
                i += 1
                continue
        elif c == ",":
            values.append(current)
            current = ""
            i += 1
            continue
        current += c
        i += 1
    if closers:  # never closed: not a flow value after all
        return text.split(",")
    values.append(current)
    return values


def _scalar(value: str) -> Any:
    """A settings value as YAML reads it (``3`` → 3, ``null`` → None, ``[a, b]`` → a
    list); text YAML cannot read stays text."""
    try:
        return yaml.safe_load(value)
    except yaml.YAMLError:
        return value


def _text(value: str) -> str:
    """A text value (a topic, a model, a persona): a quoted one without its quotes
    (``"a, b"`` → ``a, b``); any other as given."""
    if value[:1] in ("'", '"') and value[-1:] == value[:1]:
        parsed = _scalar(value)
        if isinstance(parsed, str):
            return parsed
    return value


def value_of(key: str, value: str) -> Any:
    """One ``--vary`` value as it is written into the world: read as YAML for
    ``max_turns`` and ``settings.NAME``, text (unquoted) for the other keys."""
    if key == "max_turns" or _SETTINGS_KEY.match(key):
        return _scalar(value)
    return _text(value)


def recorded_values(values: Mapping[str, str]) -> dict[str, Any]:
    """A run's varied values as its result row records them: as written into its world
    (``max_turns: 6``, not ``"6"``; a list as a list)."""
    return {key: value_of(key, value) for key, value in values.items()}


def _role_entry(raw: dict[str, Any], role_id: str) -> dict[str, Any]:
    roles = raw.setdefault("roles", [])
    if not isinstance(roles, list):
        raise UsageError("the world's roles are not a list")
    for index, entry in enumerate(roles):
        if isinstance(entry, dict) and (entry.get("id") or entry.get("template")) == role_id:
            roles[index] = entry = dict(entry)
            return entry
    entry = {"id": role_id}  # a preset's role (debate's pro, ...): overridden by id
    roles.append(entry)
    return entry


def apply_values(raw: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """The raw world document with one combination of varied values written into it."""
    out = copy.deepcopy(dict(raw))
    for key, text in values.items():
        value = value_of(key, text)
        if key == "topic":
            out["topic"] = value
        elif key == "model":
            out["model"] = value
        elif key == "max_turns":
            settings = dict(out.get("settings") or {})
            settings["max_turns"] = value
            out["settings"] = settings
        elif match := _SETTINGS_KEY.match(key):
            settings = dict(out.get("settings") or {})
            settings[match.group(1)] = value
            out["settings"] = settings
        elif match := _ROLE_KEY.match(key):
            entry = _role_entry(out, match.group(1))
            if match.group(2) == "model":
                entry["model"] = value
            else:
                entry["description"] = value
                entry["system_prompt"] = persona_prompt(value)
        else:  # parse_vary admits no other key
            raise UsageError(f"{key}: unknown key (keys: {KEYS_HELP})")
    return out


def combinations(axes: Sequence[Axis]) -> list[dict[str, str]]:
    """The cross product, first axis slowest; one empty combination without axes."""
    keys = [a.key for a in axes]
    return [
        dict(zip(keys, combo, strict=True))
        for combo in itertools.product(*(a.values for a in axes))
    ]


def build_plan(
    raw: Mapping[str, Any],
    axes: Sequence[Axis],
    runs: int,
    *,
    base: World,
    source: str,
    library: RoleLibrary,
    path: Path | None = None,
    problems: Sequence[str] = (),
) -> BatchPlan:
    """Every combination's world, validated; VaryError listing every problem found.

    ``problems`` are those already found (by :func:`read_vary`): reported with the rest.
    """
    if runs < 1:
        raise UsageError(f"--runs must be at least 1, got {runs}")
    problems = list(problems)
    for axis in axes:
        role = _ROLE_KEY.match(axis.key)
        if role and role.group(1) not in base.role_ids:
            hint = suggest(role.group(1), base.role_ids)
            problems.append(f"{axis.key}: no role '{role.group(1)}'{hint}")
            continue
        for value in axis.values:  # each value alone first: its problems named once
            problems.extend(_check(raw, {axis.key: value}, source, library, path))
    if problems:
        raise VaryError(_dedupe(problems))
    worlds: list[World] = []
    combos = combinations(axes)
    for values in combos:
        try:
            built = build_world(
                apply_values(raw, values), source=source, library=library, path=path
            )
        except WorldError as exc:
            problems.extend(f"{_where(values)}: {p}" for p in exc.problems)
            continue
        worlds.append(built.world)
    if problems:
        raise VaryError(_dedupe(problems))
    return BatchPlan(tuple(axes), runs, tuple(worlds), RunSpecs(tuple(combos), runs))


def _dedupe(items: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _where(values: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def _check(
    raw: Mapping[str, Any],
    values: Mapping[str, str],
    source: str,
    library: RoleLibrary,
    path: Path | None,
) -> list[str]:
    try:
        build_world(apply_values(raw, values), source=source, library=library, path=path)
    except WorldError as exc:
        return [f"{_where(values)}: {p}" for p in exc.problems]
    return []
