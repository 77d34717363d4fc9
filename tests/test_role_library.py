"""The built-in role library: src/rolecall/library/roles.yaml."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import pytest
import yaml

from rolecall.llm.offline import compose
from rolecall.llm.types import GenerationRequest, Persona, TurnInfo

KEYS = {"id", "name", "description", "system_prompt", "style", "constraints"}
ID_PATTERN = re.compile(r"^[a-z][a-z0-9_-]*$")

CORE = ["teacher", "professor", "official", "student", "lawyer", "judge", "moderator"]
STUDY = ["explainer", "challenger", "summarizer", "example_generator", "misconception_spotter"]
DEBATE_PROFILES = ["classic", "technical", "business", "scientific", "ethical", "political"]
CONSENSUS = [
    "analyst",
    "creative",
    "critic",
    "engineer",
    "architect",
    "tester",
    "dreamer",
    "realist",
    "synthesizer",
    "pragmatist",
    "stakeholder",
]
REQUIRED = [
    *CORE,
    *STUDY,
    *(f"{p}_{side}" for p in DEBATE_PROFILES for side in ("pro", "con")),
    *CONSENSUS,
]


def load() -> list[dict[str, Any]]:
    text = resources.files("rolecall").joinpath("library/roles.yaml").read_text("utf-8")
    data = yaml.safe_load(text)
    assert isinstance(data, list)
    return data


def test_loads_as_a_list_of_mappings() -> None:
    roles = load()
    assert roles
    assert all(isinstance(role, dict) for role in roles)


def test_every_item_has_exactly_the_keys_with_the_right_types() -> None:
    for role in load():
        assert set(role) == KEYS, role.get("id")
        for key in KEYS - {"constraints"}:
            assert isinstance(role[key], str), (role["id"], key)
            assert role[key].strip(), (role["id"], key)
            assert role[key] == role[key].strip(), (role["id"], key)
        assert isinstance(role["constraints"], list), role["id"]
        assert len(role["constraints"]) <= 3, role["id"]
        assert all(isinstance(c, str) and c.strip() for c in role["constraints"]), role["id"]


def test_ids_are_unique_and_well_formed() -> None:
    ids = [role["id"] for role in load()]
    assert len(ids) == len(set(ids))
    assert all(ID_PATTERN.match(role_id) for role_id in ids)


@pytest.mark.parametrize("role_id", REQUIRED)
def test_required_role_is_present(role_id: str) -> None:
    assert role_id in {role["id"] for role in load()}


def test_fields_are_reasonable() -> None:
    for role in load():
        assert "\n" not in role["description"], role["id"]
        assert len(role["style"].split()) <= 4, role["id"]
        prompt = role["system_prompt"]
        assert prompt.startswith("You "), role["id"]
        count = len(re.findall(r"[.!?](?:\s|$)", prompt))
        assert 2 <= count <= 4, (role["id"], count)
        assert "<world>" not in prompt


def test_every_role_speaks_offline() -> None:
    for role in load():
        persona = Persona(
            id=role["id"],
            name=role["name"],
            description=role["description"],
            system_prompt=role["system_prompt"],
            style=role["style"],
            constraints=tuple(role["constraints"]),
        )
        info = TurnInfo(
            turn=2,
            n=1,
            speaker=role["id"],
            target="human",
            target_text="Should our city ban private cars downtown?",
            topic="Car-free city centres",
        )
        text = compose(GenerationRequest("offline", (), persona, info))
        assert 10 <= len(text.split()) <= 70, (role["id"], text)
