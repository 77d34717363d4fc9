"""The registries: a mode is one ModeSpec; a condition kind is one row of KINDS."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from rolecall.errors import WorldError
from rolecall.flows import conditions
from rolecall.modes import ModeSpec, register_mode, unregister_mode
from rolecall.plans import DriverSite
from tests.helpers import run_flow, world_from

pytestmark = pytest.mark.anyio


class QuorumOptions(BaseModel):
    size: int = 3


def _expand(raw: dict[str, Any], library: Any, problems: list[str]) -> dict[str, Any]:
    data = dict(raw)
    opts = QuorumOptions.model_validate(data.pop("quorum_options", None) or {})
    data["roles"] = [{"id": "a", "script": ["a {n}"]}, {"id": "b", "script": ["b {n}"]}]
    data["flow"] = {
        "steps": [
            {"id": "one", "speaker": "a"},
            {"id": "two", "speaker": "b", "loop": {"to": "one", "max": 50}},
        ],
        "stop": ["quorum"],
    }
    data["topic"] = f"a quorum of {opts.size}"
    return data


def _install(session: DriverSite) -> None:
    def quorum() -> tuple[bool, str, str]:
        n = session.state.transcript.agent_turns
        return n >= 3, "quorum", f"{n} of 3 voices"

    session.ctx.mode_checks = {**session.ctx.mode_checks, "quorum": quorum}


@pytest.fixture
def quorum_mode() -> Iterator[None]:
    register_mode(
        ModeSpec(
            "quorum",
            _expand,
            options=QuorumOptions,
            conditions={"quorum": "three voices were heard"},
        ),
        _install,
    )
    yield
    unregister_mode("quorum")


async def test_a_registered_mode_and_its_condition_run_end_to_end(quorum_mode: None) -> None:
    world = world_from("name: q\nmode: quorum\nmodel: scripted\n")
    assert world.mode == "quorum"
    session, rec = await run_flow(world)
    stop = rec.stop()
    assert (stop.reason, stop.detail) == ("quorum", "3 of 3 voices")
    assert [m.content for m in session.transcript] == ["a 1", "b 1", "a 2"]


def test_an_unregistered_mode_and_its_words_are_refused() -> None:
    with pytest.raises(WorldError) as caught:
        world_from("name: q\nmode: quorum\nroles: [{id: a}]\n")
    assert "mode: no mode 'quorum' (modes: consensus, debate, study)" in caught.value.problems
    with pytest.raises(WorldError) as caught:
        world_from(
            "name: q\nroles: [{id: a}]\n"
            "flow: {steps: [{id: s, speaker: a}], stop: [{mode: quorum}]}\n"
        )
    assert caught.value.problems == [
        "flow.stop[0].mode: no mode condition 'quorum' "
        "(mode conditions: concession, stalemate, consensus)"  # the value said once
    ]


def test_a_bare_mode_word_reads_as_itself_wherever_it_is_nested() -> None:
    world = world_from(
        "name: q\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], "
        "stop: [concession, {not: stalemate}, {any: [consensus, {max_turns: 3}]}]}\n"
    )
    assert world.flow is not None
    assert [conditions.describe(c) for c in world.flow.stop] == [
        "concession",
        "{not: stalemate}",
        "{any: [consensus, {max_turns: 3}]}",
    ]


def test_every_condition_kind_is_in_the_loader_hints_and_the_error_text() -> None:
    with pytest.raises(WorldError) as caught:
        world_from("name: q\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: a}], stop: [7]}\n")
    (problem,) = caught.value.problems
    for kind in conditions.KINDS:
        if kind.words is None:
            assert kind.key in problem
        assert set(kind.fields) <= set(conditions.fields())
    assert "concession, stalemate, consensus" in problem


def test_a_registered_mode_has_its_own_block_in_the_world_file(quorum_mode: None) -> None:
    from rolecall.storage.document import world_dict
    from rolecall.world.schema import world_schema

    world = world_from("name: q\nmode: quorum\nmodel: scripted\nquorum: {size: 5}\n")
    assert world.block("quorum") == {"size": 5}
    assert world_dict(world)["quorum"] == {"size": 5}  # stored at the top level, as written
    assert world_schema()["properties"]["quorum"]["anyOf"][0] == {"$ref": "#/$defs/QuorumOptions"}


def test_a_block_of_an_unregistered_mode_is_an_unknown_field() -> None:
    with pytest.raises(WorldError) as caught:
        world_from("name: q\nroles: [{id: a}]\nquorum: {size: 5}\n")
    assert caught.value.problems[0].startswith("quorum: unknown field")


def test_the_built_in_condition_words_are_the_words_each_mode_declares() -> None:
    from rolecall import mode_registry

    for name in mode_registry.BUILTIN:
        spec = mode_registry.spec(name)  # loads the mode's module
        assert spec is not None
        assert tuple(spec.conditions) == mode_registry.BUILTIN_CONDITIONS[name], name


def test_a_mode_condition_is_validated_without_importing_any_mode() -> None:
    """Checking ``stop: [concession]`` reads the words as data; only a world that names a
    mode loads that mode's module."""
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from rolecall.flows.model import Flow\n"
        "Flow.model_validate({'steps': [{'id': 's', 'speaker': 'a'}], 'stop': ['concession']})\n"
        "print(sorted(m for m in sys.modules if m.startswith('rolecall.modes')))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
