"""The JSON Schema of world.yaml, from the same pydantic models that validate it.

Editors use it (yaml-language-server) to complete and check world files. The preset
blocks (``debate:``, ``consensus:``, ``study:``, ``judge:``) carry their own options'
schemas; what only rolecall can check (references between roles and steps, templates
from the role library) is left to ``rolecall worlds validate``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from rolecall.mode_registry import known_modes, spec
from rolecall.world.judge_block import JudgeBlock
from rolecall.world.library import RESERVED_IDS
from rolecall.world.models import World


def preset_blocks() -> dict[str, type[BaseModel]]:
    """Each registered mode's options block (its ``ModeSpec.options``), and ``judge:``."""
    blocks: dict[str, type[BaseModel]] = {}
    for name in known_modes():
        found = spec(name)
        if found is not None and found.options is not None:
            blocks[name] = found.options
    blocks["judge"] = JudgeBlock
    return blocks


def world_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) a world.yaml follows."""
    schema = World.model_json_schema(mode="validation")
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "rolecall world"
    defs = schema.setdefault("$defs", {})
    for field, options in preset_blocks().items():  # typed, not the model's dict[str, Any]
        block = options.model_json_schema(mode="validation", ref_template="#/$defs/{model}")
        defs.update(block.pop("$defs", {}))
        defs[options.__name__] = block
        described = schema["properties"].get(field, {}).get("description")
        schema["properties"][field] = {
            "anyOf": [{"$ref": f"#/$defs/{options.__name__}"}, {"type": "null"}],
            "default": None,
            **({"description": described} if described else {}),
        }
    # a preset (mode:) writes the roles and flow itself, so roles may be left out
    schema["required"] = [r for r in schema.get("required", []) if r != "roles"]
    role = defs.get("Role")
    if role is not None:
        # a role from the library: `- template: teacher` (the id defaults to the template)
        role["required"] = [r for r in role.get("required", []) if r != "id"]
        role["anyOf"] = [{"required": ["id"]}, {"required": ["template"]}]
        props = role.get("properties", {})
        if "id" in props:  # human, all, system: chat gives them a meaning (worlds.md)
            props["id"]["not"] = {"enum": list(RESERVED_IDS)}
        if "template" in props:
            props["template"]["description"] = (
                "a role from the role library (rolecall roles list) to start from"
            )
    _bounds(schema)
    return schema


_BOUNDS = {"ge": "minimum", "le": "maximum", "gt": "exclusiveMinimum", "lt": "exclusiveMaximum"}


def _bounds(node: Any) -> None:
    """Bounds in JSON Schema's words: pydantic writes a whole number's (``Whole``: a
    validator before the bound) as ``ge``/``le``, which a JSON Schema checker ignores."""
    if isinstance(node, dict):
        if node.get("type") in ("integer", "number"):
            for ours, theirs in _BOUNDS.items():
                if ours in node:
                    node[theirs] = node.pop(ours)
        for value in node.values():
            _bounds(value)
    elif isinstance(node, list):
        for value in node:
            _bounds(value)
