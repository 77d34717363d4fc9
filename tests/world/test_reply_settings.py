"""The world's reply settings (real-models.md): ``max_reply_tokens`` and
``reply_hygiene``, with their defaults, YAML's bare on/off, and clear refusals."""

from __future__ import annotations

import pytest

from rolecall.errors import WorldError
from rolecall.world.loader import parse_world

ROLES = "roles: [{id: a}, {id: b, max_reply_tokens: 50}, {id: c, max_tokens: 70}]\n"


def test_the_defaults_and_a_roles_own_cap() -> None:
    world = parse_world("name: w\n" + ROLES).world
    assert world.settings.max_reply_tokens == 1024
    assert world.settings.reply_hygiene == "on"
    caps = [world.role(r).reply_cap(world.settings) for r in ("a", "b", "c")]
    assert caps == [1024, 50, 70]  # max_tokens is the older name of the same cap


@pytest.mark.parametrize(("written", "read"), [("off", "off"), ("on", "on"), ("'off'", "off")])
def test_yamls_bare_on_and_off_are_the_words(written: str, read: str) -> None:
    world = parse_world(f"name: w\nsettings: {{reply_hygiene: {written}}}\n" + ROLES).world
    assert world.settings.reply_hygiene == read


@pytest.mark.parametrize(
    ("settings", "says"),
    [
        ("{reply_hygiene: sometimes}", "settings.reply_hygiene"),
        ("{max_reply_tokens: 0}", "settings.max_reply_tokens"),
    ],
)
def test_a_bad_reply_setting_is_named(settings: str, says: str) -> None:
    with pytest.raises(WorldError) as info:
        parse_world(f"name: w\nsettings: {settings}\n" + ROLES)
    assert any(says in p for p in info.value.problems), info.value.problems


def test_two_different_caps_on_one_role_are_refused() -> None:
    with pytest.raises(WorldError) as info:
        parse_world("name: w\nroles: [{id: a, max_tokens: 10, max_reply_tokens: 20}]\n")
    (problem,) = info.value.problems
    assert "max_tokens 10 and max_reply_tokens 20 are the same cap: give one" in problem
    assert "roles[0]" in problem
