"""The lean OpenAI-compatible client (``settings.client: http``, llm/openai_http.py)
behaves as litellm does behind the adapter: every adapter behaviour test of
test_litellm_model.py that talks to the loopback server runs again through it."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest

from rolecall.llm import openai_http
from tests.llm import test_litellm_model as base
from tests.llm.openai_server import OpenAITestServer
from tests.llm.test_litellm_model import anyio_backend, outbound, server, srv  # noqa: F401

# the tests about litellm itself (its import, its callbacks, its cost map) stay there
LITELLM_ONLY = {"test_litellm_is_loaded_after_a_call"}
BEHAVIOURS = sorted(
    name
    for name, fn in vars(base).items()
    if name.startswith("test_")
    and name not in LITELLM_ONLY
    and inspect.iscoroutinefunction(fn)
    and list(inspect.signature(fn).parameters) == ["srv"]
)


@pytest.mark.anyio
@pytest.mark.parametrize("name", BEHAVIOURS)
async def test_the_lean_client_behaves_as_litellm(
    name: str,
    srv: OpenAITestServer,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original: Callable[..., Any] = base.make_request

    def lean(loopback: OpenAITestServer, **changes: Any) -> Any:
        return original(loopback, **{"client": "http", **changes})

    calls: list[str] = []
    real = openai_http.acompletion

    async def counted(**kwargs: Any) -> Any:
        calls.append(kwargs["model"])
        return await real(**kwargs)

    monkeypatch.setattr(base, "make_request", lean)
    monkeypatch.setattr(openai_http, "acompletion", counted)
    await getattr(base, name)(srv)
    assert calls, "the request went through the lean client, not litellm"


def test_every_adapter_behaviour_is_covered() -> None:
    assert len(BEHAVIOURS) >= 20
