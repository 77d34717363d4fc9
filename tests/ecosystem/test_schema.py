"""`rolecall worlds schema`: the JSON Schema editors use to complete and check world files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from rolecall.world.catalog import shipped_dir


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    done = subprocess.run(
        [sys.executable, "-m", "rolecall", "worlds", "schema"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    schema = json.loads(done.stdout)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator: jsonschema.Draft202012Validator, data: dict[str, Any]) -> list[str]:
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(data)
    ]


@pytest.mark.parametrize(
    "path", sorted(shipped_dir().glob("*/world.yaml")), ids=lambda p: p.parent.name
)
def test_every_shipped_world_follows_the_schema(
    validator: jsonschema.Draft202012Validator, path: Path
) -> None:
    assert errors(validator, yaml.safe_load(path.read_text("utf-8"))) == []


def test_the_schema_catches_what_an_editor_should_flag(
    validator: jsonschema.Draft202012Validator,
) -> None:
    base: dict[str, Any] = {"name": "w", "roles": [{"template": "teacher"}, {"id": "b"}]}
    assert errors(validator, base) == []

    reserved = {**base, "roles": [{"id": "a"}, {"id": "human"}]}
    assert any(e.startswith("roles/1/id") for e in errors(validator, reserved))

    typo = {**base, "roles": [{"id": "a", "sytem_prompt": "x"}]}
    assert any("sytem_prompt" in e for e in errors(validator, typo))

    bad_price = {
        **base,
        "roles": [{"id": "a", "price": {"input_per_mtok": -1, "output_per_mtok": 1}}],
    }
    assert any(e.startswith("roles/0/price") for e in errors(validator, bad_price))

    # the preset blocks are typed: an unknown option and a wrong type are both flagged
    debate = {"name": "d", "mode": "debate", "debate": {"rounds": 3, "max_turns": "ten"}}
    found = errors(validator, debate)
    assert any("rounds" in e for e in found)
    assert any(e.startswith("debate") and "ten" in e for e in found)
    assert errors(validator, {"name": "d", "mode": "debate", "debate": {"max_turns": 6}}) == []

    no_role = {"name": "w", "roles": [{"name": "nobody"}]}
    assert errors(validator, no_role) != []  # neither an id nor a template


# (where in the world, value as written in YAML): every numeric kind of field, and the
# spellings people write: whole and fractional numbers, quoted numbers, booleans
FIELDS = [
    ("settings.max_turns", 10),
    ("settings.max_seconds", 1.5),
    ("settings.temperature", 0.5),
    ("settings.timeout", 30),
    ("loop.max", 3),
    ("title", "A title"),
]
SPELLINGS = ["3", "3.0", "3.5", "'10'", "'1.5'", "yes", "true", "'yes'", "0", "-1", "2.0e0"]


def _world_text(field: str, written: str) -> str:
    settings = f"settings: {{{field.split('.')[1]}: {written}}}\n" if field.startswith("s") else ""
    title = f"title: {written}\n" if field == "title" else ""
    loop = f", loop: {{to: one, max: {written}}}" if field == "loop.max" else ""
    return (
        f"name: generated\ntopic: t\nmodel: scripted\n{settings}{title}"
        "roles: [{id: a, script: [hi]}]\n"
        f"flow:\n  steps: [{{id: one, speaker: a{loop}}}]\n"
    )


def test_validate_and_the_schema_judge_every_generated_world_alike(
    validator: jsonschema.Draft202012Validator,
) -> None:
    """One rule for what a world file may say, whichever checks it: `worlds validate`
    (the loader) and `worlds schema` (an editor). Numbers are written as numbers; a
    count is whole (3 or 3.0, one number to JSON); a boolean is not text."""
    from rolecall.errors import WorldError
    from rolecall.world.loader import parse_world

    disagree = []
    for field, _ in FIELDS:
        for written in SPELLINGS:
            text = _world_text(field, written)
            by_schema = errors(validator, yaml.safe_load(text)) == []
            try:
                parse_world(text)
                by_loader = True
            except WorldError:
                by_loader = False
            if by_schema != by_loader:
                disagree.append(f"{field}: {written} (schema {by_schema}, validate {by_loader})")
    assert disagree == [], "\n".join(disagree)
