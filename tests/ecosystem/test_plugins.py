"""Model plugins (entry-point group rolecall.models) as the registry finds and makes them."""

from __future__ import annotations

from importlib import metadata

import pytest

from rolecall.errors import UsageError
from rolecall.llm import plugins
from rolecall.llm.registry import ModelRegistry, needs_litellm


def fake(name: str, value: str) -> plugins.Plugin:
    entry = metadata.EntryPoint(name=name, value=value, group=plugins.GROUP)
    return plugins.Plugin(name, value, "fake-plugin 1.0", entry)


@pytest.fixture
def installed(monkeypatch: pytest.MonkeyPatch) -> None:
    table = {
        "mine": fake("mine", "rolecall.llm.scripted:ScriptedModel"),
        "broken": fake("broken", "rolecall_no_such_module:Model"),
        "odd": fake("odd", "builtins:str"),
    }
    monkeypatch.setattr(plugins, "plugins", lambda: table)


@pytest.mark.usefixtures("installed")
def test_a_prefix_picks_the_plugin_and_keeps_litellm_away() -> None:
    assert plugins.plugin_for("mine/large") is not None
    assert plugins.plugin_for("openai/gpt-4o-mini") is None
    assert not needs_litellm("mine/large") and needs_litellm("anthropic/claude-3-5-haiku")
    # openai/... models take the lean client unless a world says client: litellm
    assert not needs_litellm("openai/gpt-4o-mini")
    assert needs_litellm("openai/gpt-4o-mini", "litellm")
    assert not needs_litellm("offline")


@pytest.mark.usefixtures("installed")
def test_a_broken_plugin_is_a_clear_usage_error() -> None:
    registry = ModelRegistry()
    with pytest.raises(
        UsageError,
        match=r"model plugin 'broken' \(rolecall_no_such_module:Model, from fake-plugin 1.0\) could not be loaded: ModuleNotFoundError",
    ):
        registry.get("broken/x")
    with pytest.raises(
        UsageError, match=r"model plugin 'odd' .* returned str, which has no stream\(\) method"
    ):
        registry.get("odd")


@pytest.mark.anyio
@pytest.mark.usefixtures("installed")
async def test_max_cost_with_a_plugin_model_says_the_plugin_gives_no_price() -> None:
    """Not "not in litellm's price map": litellm never sees a plugin's model."""
    from tests.helpers import run_flow, world_from

    world = world_from(
        {
            "name": "w",
            "topic": "t",
            "model": "mine/large",
            "settings": {"max_cost": 1.0},
            "roles": [{"id": "a", "script": ["hello"]}],
            "flow": {"steps": [{"id": "one", "speaker": "a"}]},
        }
    )
    _, rec = await run_flow(world)
    stop = rec.stop()
    assert stop.reason == "max_cost"
    assert "litellm" not in stop.detail
    assert "plugin fake-plugin 1.0" in stop.detail and "mine/large" in stop.detail
    assert "price:" in stop.detail  # and how to run it anyway
    assert rec.of("messages", "message") == []
