"""Which judge ``rolecall score --judge JUDGE`` names (docs/compare.md).

``JUDGE`` is ``offline`` (the library's ``judge`` role on the offline model: no key,
deterministic), a world (a folder, a ``world.yaml`` or a world's name) whose ``judge:``
block names its judging role, its criteria and scale (else its role ``judge``, scoring
``score`` 0..10), or a role of the library (built in or your own; criteria ``score``
0..10). ``--model`` puts the judge on another model.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rolecall.errors import UsageError
from rolecall.world.judge_block import DEFAULT_SCORES, parse_block
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world, load_world
from rolecall.world.models import Role, World


@dataclass(frozen=True)
class Judge:
    """A judge ready to score: its role (in a world, for its prompt), model and criteria."""

    label: str  # what --judge named
    world: World
    role: Role
    model: str
    names: tuple[str, ...]
    scale: tuple[float, float]
    instruction: str  # the block's own instruction, "" without one


def _looks_like_world(spec: str) -> bool:
    from rolecall.world.catalog import find

    if "/" in spec or spec.endswith((".yaml", ".yml")) or Path(spec).is_dir():
        return True
    return find(spec, Path.cwd() / "worlds") is not None


def _library_world(role_id: str, library: RoleLibrary) -> World:
    raw = {"name": "scoring", "roles": [{"template": role_id}]}
    return build_world(raw, source=f"role {role_id}", library=library).world


def resolve(spec: str, *, model: str | None, library: RoleLibrary) -> Judge:
    """The judge ``spec`` names; a UsageError saying what it may be when it names none."""
    if spec == "offline":
        world = _library_world("judge", library)
        role = world.role("judge")
        return Judge("offline", world, role, model or "offline", DEFAULT_SCORES, (0, 10), "")
    if _looks_like_world(spec):
        world = load_world(spec, library).world
        block, _ = parse_block(world.block("judge"))
        role_id = block.role if block is not None else "judge"
        if role_id not in world.role_ids:
            raise UsageError(
                f"world '{world.name}' ({spec}) has no judge role: give it a `judge:` block "
                f"naming one, or a role with id judge (roles: {', '.join(world.role_ids)})"
            )
        role = world.role(role_id)
        chosen = model or role.model or world.model
        if block is None:
            return Judge(spec, world, role, chosen, DEFAULT_SCORES, (0, 10), "")
        lo, hi = block.scale
        names = tuple(block.scores) or DEFAULT_SCORES
        return Judge(
            spec, world, role, chosen, names, (float(lo), float(hi)), block.instruction or ""
        )
    if spec in library:
        world = _library_world(spec, library)
        role = world.role(world.role_ids[0])
        return Judge(
            spec, world, role, model or role.model or "offline", DEFAULT_SCORES, (0, 10), ""
        )
    raise UsageError(
        f"no judge '{spec}': --judge takes `offline`, a world with a judge role (a folder, "
        f"a world.yaml or a world's name) or a role of the library (`rolecall roles list`)"
    )
