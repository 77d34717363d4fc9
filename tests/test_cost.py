"""Money: each message's cost, the session's, prices per role, and the max_cost budget."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from rolecall.llm.litellm_model import LiteLLMModel
from rolecall.llm.pricing import estimate
from rolecall.llm.registry import aclose_clients
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    StreamItem,
    TextDelta,
    Usage,
    prompt_tokens,
)
from tests.helpers import run_flow, world_from
from tests.llm.openai_server import OpenAITestServer, Reply

pytestmark = pytest.mark.filterwarnings(
    "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
    ":pydantic.warnings.PydanticDeprecatedSince211",
    "ignore:Item '.*' on TypedDict class .* `ReadOnly` qualifier",
)


def priced_world(**settings: Any) -> dict[str, Any]:
    return {
        "name": "priced",
        "topic": "money",
        "model": "scripted",
        "settings": {"max_turns": 6, **settings},
        "roles": [
            {
                "id": "a",
                "script": ["a says {n}"],
                "price": {"input_per_mtok": 1000.0, "output_per_mtok": 2000.0},
            },
            {"id": "b", "script": ["b says {n}"]},
        ],
        "flow": {"steps": [{"id": "one", "speaker": "a"}, {"id": "two", "speaker": "b"}]},
    }


@pytest.mark.anyio
async def test_each_message_carries_its_cost_and_the_session_sums_them() -> None:
    session, rec = await run_flow(world_from(priced_world()))

    messages = rec.of("messages", "message")
    a, b = messages
    assert a.cost_usd == pytest.approx((a.input_tokens * 1000 + a.output_tokens * 2000) / 1e6)
    assert a.cost_usd > 0
    assert b.cost_usd == 0.0  # scripted without a price: free
    assert session.result.cost == pytest.approx(a.cost_usd)


class Unpriced:
    """A model that knows no prices (a plugin that reports none)."""

    name = "unpriced"

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        yield TextDelta("something")
        yield Usage(10, 2)


@pytest.mark.anyio
async def test_an_unknown_cost_is_null_never_a_guess() -> None:
    data = priced_world()
    data["roles"][1]["model"] = "unpriced"
    del data["roles"][1]["script"]
    session, rec = await run_flow(world_from(data), models={"unpriced": Unpriced()})

    costs = [m.cost_usd for m in rec.of("messages", "message")]
    assert costs[0] is not None and costs[0] > 0
    assert costs[1] is None
    assert session.result.cost is None


@pytest.mark.anyio
async def test_max_cost_stops_before_the_call_that_would_pass_it() -> None:
    data = priced_world(max_cost=0.5, max_turns=60)
    data["flow"]["steps"] = [{"id": "one", "speaker": "a", "loop": {"to": "one", "max": 50}}]
    data["roles"][0]["max_tokens"] = 10
    session, rec = await run_flow(world_from(data))

    stop = rec.stop()
    assert stop.reason == "max_cost"
    assert "exceeds max_cost $0.5" in stop.detail
    spent = session.result.cost
    assert spent is not None and 0 < spent <= 0.5
    assert 1 < len(rec.of("messages", "message")) < 50


@pytest.mark.anyio
async def test_max_cost_with_an_unknown_price_refuses_to_spend() -> None:
    data = priced_world(max_cost=1.0)
    data["flow"]["steps"] = [{"id": "two", "speaker": "b"}]
    data["roles"][1] = {"id": "b", "model": "unpriced"}
    _, rec = await run_flow(world_from(data), models={"unpriced": Unpriced()})

    stop = rec.stop()
    assert stop.reason == "max_cost"
    assert "unknown" in stop.detail and "price:" in stop.detail
    assert rec.of("messages", "message") == []


@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> Any:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("ROLECALL_COST_TEST_KEY", "sk-cost-test-0123456789")
    with OpenAITestServer() as srv:
        yield srv


@pytest.mark.anyio
async def test_a_litellm_role_is_priced_from_litellms_map(loopback: OpenAITestServer) -> None:
    loopback.queue(Reply("Sure.", prompt_tokens=1000, completion_tokens=100))
    data = {
        "name": "real",
        "model": "openai/gpt-4o-mini",
        "settings": {"api_base": loopback.base_url, "api_key_env": "ROLECALL_COST_TEST_KEY"},
        "roles": [{"id": "a"}],
        "flow": {"steps": [{"id": "one", "speaker": "a"}]},
    }
    try:
        session, rec = await run_flow(world_from(data))
    finally:
        await aclose_clients()

    (message,) = rec.of("messages", "message")
    assert message.cost_usd == pytest.approx(0.00015 + 0.00006)  # 1,000 in and 100 out
    assert session.result.cost == pytest.approx(0.00021)


@pytest.mark.anyio
async def test_budget_checks_count_litellm_prompts_with_the_models_tokenizer() -> None:
    prompt = (ChatMessage("user", "こんにちは、元気ですか？今日はいい天気ですね。" * 4),)
    model = LiteLLMModel("openai/gpt-4o-mini")

    counted = await estimate(
        model,
        "openai/gpt-4o-mini",
        prompt,
        price=None,
        max_output=100,
        want_tokens=True,
        want_cost=True,
    )

    assert counted.input_tokens > 2 * prompt_tokens(prompt)  # the 4-characters rule is far off
    assert counted.cost_usd == pytest.approx(counted.input_tokens * 0.15e-6 + 100 * 0.6e-6)


def test_the_cli_shows_costs_and_honours_max_cost(tmp_path: Path) -> None:
    import json
    import re
    from functools import partial

    import yaml

    from rolecall.money import money
    from tests.cli.test_run_cli import rolecall as run_cli

    (tmp_path / "world.yaml").write_text(yaml.safe_dump(priced_world()), encoding="utf-8")
    rolecall = partial(run_cli, cwd=tmp_path, env={"ROLECALL_HOME": str(tmp_path / "home")})

    ran = rolecall("run", "world.yaml", "--json")
    assert ran.returncode == 0, ran.stderr
    records = [json.loads(line) for line in ran.stdout.splitlines()]
    spent = sum(r["cost_usd"] for r in records if r["type"] == "message")
    assert spent > 0

    listed = rolecall("sessions", "list")
    header, row = (re.split(r" {2,}", line) for line in listed.stdout.splitlines())
    assert row[header.index("COST")] == money(spent)
    (stored,) = json.loads(rolecall("sessions", "list", "--json").stdout)
    assert stored["cost_usd"] == pytest.approx(spent)

    shown = rolecall("run", "world.yaml")
    assert "session total ↑" in shown.stdout and f"· {money(spent)}" in shown.stdout

    capped = rolecall("run", "world.yaml", "--json", "--max-cost", "0.0001")
    stops = [json.loads(line) for line in capped.stdout.splitlines() if '"stop"' in line]
    assert stops[-1]["reason"] == "max_cost"
