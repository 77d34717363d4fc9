"""The ``judge:`` block of a world (modes.md, Judge roles): its model and its checks.

Pure: the loader checks a raw world mapping with :func:`check_world`; the judge
installer (:mod:`rolecall.modes.judge`) reads the validated block, and it and the
worst-case check (:mod:`rolecall.check`) take the judges of each step from
:func:`judges_by_step`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError

from rolecall.flows.model import Ident
from rolecall.world.library import suggest

if TYPE_CHECKING:
    from rolecall.world.models import World

DEFAULT_SCORES: tuple[str, ...] = ("score",)


class _Options(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)


class JudgeBlock(_Options):
    """The top-level ``judge:`` block of a world."""

    role: Ident = "judge"
    after: Literal["all"] | list[Ident] = "all"
    scores: list[Ident] = Field(default_factory=lambda: list(DEFAULT_SCORES))
    scale: tuple[StrictInt | StrictFloat, StrictInt | StrictFloat] = (0, 10)
    about: Literal["message", "exchange"] = "message"
    instruction: str | None = None


# ------------------------------------------------------------ option problems
def option_problems(prefix: str, exc: ValidationError, fields: list[str]) -> list[str]:
    """Pydantic errors of an options block as ``path: what (hint)`` lines."""
    out: list[str] = []
    for err in exc.errors():
        loc = [str(p) if not isinstance(p, int) else f"[{p}]" for p in err["loc"]]
        where = prefix
        for part in loc:
            if part.startswith("[") or ":" in part or "[" in part or "(" in part:
                where += part if part.startswith("[") else ""
            else:
                where += f".{part}"
        kind = err["type"]
        value = err.get("input")
        if kind == "extra_forbidden":
            key = str(err["loc"][-1])
            hint = suggest(key, fields, listing=False)
            out.append(f"{where}: unknown field{hint or ' (fields: ' + ', '.join(fields) + ')'}")
        elif kind == "missing":
            out.append(f"{where}: required field missing")
        elif kind == "string_pattern_mismatch":
            out.append(
                f"{where}: bad id {value!r} (use lowercase letters, digits, _ and -, "
                "starting with a letter)"
            )
        else:
            msg = err["msg"]
            shown = f" (got {value!r})" if not isinstance(value, dict | list) else ""
            out.append(f"{where}: {msg[0].lower() + msg[1:]}{shown}")
    return list(dict.fromkeys(out))


def parse_block(raw: Any) -> tuple[JudgeBlock | None, list[str]]:
    """The judge block as a model, or the problems with it (paths under ``judge``)."""
    block, problems, _ = _checked(raw)
    return (None if problems else block), problems


def _checked(raw: Any) -> tuple[JudgeBlock | None, list[str], frozenset[str]]:
    """The judge block's problems, every one of them, and the block its valid fields make
    (defaults for the others), with the names of the fields that are not valid.

    The block is None only when ``raw`` is not a mapping; a field in error is left out of
    the block and named among the invalid ones, so the checks that read it can skip it.
    """
    if raw is None:
        return None, [], frozenset()
    if not isinstance(raw, dict):
        wrong = f"judge: expected a mapping like {{role: judge, after: all}}, got {raw!r}"
        return None, [wrong], frozenset()
    fields = list(JudgeBlock.model_fields)
    problems: list[str] = []
    bad: set[str] = set()
    try:
        block = JudgeBlock.model_validate(raw)
    except ValidationError as exc:
        problems.extend(option_problems("judge", exc, fields))
        bad = {str(err["loc"][0]) for err in exc.errors() if err["loc"]}
        valid = {k: v for k, v in raw.items() if k in fields and k not in bad}
        try:
            block = JudgeBlock.model_validate(valid)
        except ValidationError:  # the fields do not depend on each other: not expected
            block = JudgeBlock()
            bad |= set(fields)
    lo, hi = block.scale
    if "scale" not in bad and lo >= hi:
        problems.append(f"judge.scale: the low end must be below the high end, got [{lo}, {hi}]")
        bad.add("scale")
    if "scores" not in bad and len(set(block.scores)) != len(block.scores):
        problems.append("judge.scores: duplicate score names")
        bad.add("scores")
    return block, problems, frozenset(bad)


def check_world(data: Mapping[str, Any]) -> list[str]:
    """Problems of a raw world mapping's ``judge:`` block, with paths and hints.

    Checks the block's fields, that its role exists and that ``after`` names steps, and
    reports every problem at once: a field in error is named once and not checked further,
    the other fields are still checked.
    """
    raw = data.get("judge")
    if raw is None:
        return []
    block, problems, bad = _checked(raw)
    if block is None:
        return problems
    roles = data.get("roles")
    role_ids: list[str] = []
    for role in roles if isinstance(roles, list) else []:
        rid = role.get("id", role.get("template")) if isinstance(role, dict) else None
        if isinstance(rid, str):
            role_ids.append(rid)
    if "role" not in bad and block.role not in role_ids:
        listing = ", ".join(role_ids) or "none defined"
        problems.append(
            f"judge.role: no role '{block.role}'{suggest(block.role, role_ids, listing=False)} "
            f"(roles: {listing}; add one, e.g. {{template: judge}})"
        )
    flow = data.get("flow")
    steps = flow.get("steps") if isinstance(flow, dict) else None
    if "after" not in bad and isinstance(block.after, list):
        if not isinstance(steps, list):
            problems.append("judge.after: the world has no flow, so no steps to judge after")
        else:
            step_ids = [s["id"] for s in steps if isinstance(s, dict) and "id" in s]
            for i, sid in enumerate(block.after):
                if sid not in step_ids:
                    problems.append(
                        f"judge.after[{i}]: no step '{sid}'"
                        f"{suggest(sid, step_ids, listing=False)} (steps: {', '.join(step_ids)})"
                    )
    return problems


def judges_by_step(world: World, block: JudgeBlock | None) -> dict[str, list[str]]:
    """Step id -> the judge roles that take a turn after it (pure)."""
    by_step: dict[str, list[str]] = {}
    if world.flow is None:
        return by_step
    for step in world.flow.steps:
        judges: list[str] = []
        if block is not None and (block.after == "all" or step.id in block.after):
            judges.append(block.role)
        if step.judge is not None and step.judge not in judges:
            judges.append(step.judge)
        judges = [j for j in judges if j != step.speaker]  # a judge never judges itself
        if judges:
            by_step[step.id] = judges
    return by_step
