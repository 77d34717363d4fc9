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
