"""rolecall's own OpenAI-compatible client (``settings.client: http``, llm/openai_http.py)
behaves as the litellm adapter does: every adapter behaviour test of
test_litellm_model.py that talks to the loopback server runs again through it, and the
registry sends a ``client: http`` request through it."""

from __future__ import annotations

import inspect
import socket
import textwrap
from collections.abc import Callable
from typing import Any

import pytest

from rolecall.errors import ProviderError
from rolecall.llm import litellm_model
from rolecall.llm.openai_http import OpenAIHTTPModel
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import Usage
from tests.llm import test_litellm_model as base
from tests.llm.openai_server import Break, Garbage, OpenAITestServer, Reply, Status
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
    calls: list[str] = []
    real: Callable[..., Any] = OpenAIHTTPModel._open

    async def counted(self: OpenAIHTTPModel, *args: Any) -> Any:
        calls.append(self.name)
        return await real(self, *args)

    monkeypatch.setattr(base, "make_model", lambda: OpenAIHTTPModel(base.MODEL, retry_delay=0.01))
    monkeypatch.setattr(OpenAIHTTPModel, "_open", counted)
    await getattr(base, name)(srv)
    assert calls, "the request went through the lean client, not litellm"


@pytest.mark.anyio
async def test_a_reply_counted_without_the_servers_usage_is_never_past_its_cap(
    srv: OpenAITestServer,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # llama-cpp-python's server streams no usage; a reply it cut at max_tokens is
    # estimated from its characters, which said more tokens than it was allowed
    monkeypatch.setattr(base, "make_model", lambda: OpenAIHTTPModel(base.MODEL, retry_delay=0.01))
    srv.queue(Reply(" ".join(["extraordinarily"] * 40), send_usage=False, finish_reason="length"))

    items = await base.collect(base.make_request(srv, max_tokens=8))

    usage = items[-1]
    assert isinstance(usage, Usage)
    assert usage.output_tokens == 8
    assert usage.finish_reason == "length"


def test_every_adapter_behaviour_is_covered() -> None:
    assert len(BEHAVIOURS) >= 20


async def _failure(loopback: OpenAITestServer, client: str, api_base: str | None = None) -> str:
    request = base.make_request(
        loopback, client=client, retries=0, api_base=api_base or loopback.base_url
    )
    model = ModelRegistry(retry_delay=0.01).get(base.MODEL)  # the client the request names
    with pytest.raises(ProviderError) as caught:
        async for _ in model.stream(request):
            pass
    return str(caught.value).replace(loopback.base_url, "BASE")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "behaviour",
    [
        Status(400, "nope", "invalid_request_error"),
        Status(401, "bad key"),
        Status(503, "overloaded"),
        Break(""),  # with text, litellm at times reads none of it before the break
        Garbage(),
        None,  # nothing listening
    ],
    ids=["400", "401", "503", "broken-stream", "not-json", "refused-connection"],
)
async def test_both_clients_word_a_failure_alike_and_a_short_key_masks_nothing(
    srv: OpenAITestServer,  # noqa: F811 (the fixture imported above)
    monkeypatch: pytest.MonkeyPatch,
    behaviour: Status | Break | Garbage | None,
) -> None:
    """One wording through litellm and the lean client; a dummy key ``x`` (what local
    servers take) is too short to be a secret and masks no letter of the words."""
    monkeypatch.setenv(base.KEY_ENV, "x")
    litellm_model.preload()  # its import (seconds on a loaded machine) is not the failure
    api_base = None
    if behaviour is None:
        with socket.socket() as probe:  # a loopback port that is free, then closed
            probe.bind(("127.0.0.1", 0))
            api_base = f"http://127.0.0.1:{probe.getsockname()[1]}/v1"
    said = []
    for client in ("litellm", "http"):
        if behaviour is not None:
            srv.queue(behaviour)
        said.append(await _failure(srv, client, api_base))
    assert said[0] == said[1]
    assert "***" not in said[0]
    for noise in ("Error code", "Exception", "TransferEncodingError", "ssl:default"):
        assert noise not in said[0], said[0]


def _lean_program(server: OpenAITestServer, roles: str, body: str) -> str:  # noqa: F811
    """The last line a fresh interpreter prints, running ``body`` (the lines of ``async def
    main()``, given ``session``: a ``client: http`` world of ``roles`` on ``server``) as a
    user's program would."""
    main = textwrap.indent(textwrap.dedent(body).strip(), " " * 20)
    code = f"""
        import sys, anyio, rolecall
        from rolecall.llm.registry import aclose_clients
        from rolecall.world.loader import parse_world

        world = parse_world('''
        name: lean
        topic: t
        model: openai/gpt-4o-mini
        settings:
          client: http
          api_base: {server.base_url}
          api_key_env: {base.KEY_ENV}
          retries: 0
        {roles}
        ''').world

        async def main():
            async with rolecall.open_session(world) as session:
                try:
{main}
                finally:
                    await aclose_clients()

        anyio.run(main)
    """
    out = base._finish(base._python(code, base._clean_env(**{base.KEY_ENV: base.KEY})))
    return out.splitlines()[-1]


def test_a_client_http_session_never_imports_litellm(server: OpenAITestServer) -> None:  # noqa: F811
    """A whole session of a ``client: http`` world, run as a user's program would: its
    replies, their costs and the check whether the model may call tools never load
    litellm (whose import costs seconds)."""
    server.reset()
    flow = "flow: {steps: [{id: one, speaker: a}, {id: two, speaker: b}]}"
    last = _lean_program(
        server,
        f"roles: [{{id: a}}, {{id: b}}]\n        {flow}",
        """
        await session.run()
        print(session.status.state, len(session.transcript), "litellm" in sys.modules)
        """,
    )
    assert last == "finished 2 False"
    assert len(server.requests) == 2


def test_a_respond_checks_question_goes_through_the_worlds_client(
    server: OpenAITestServer,  # noqa: F811
) -> None:
    """A role that decides with its model whether to answer (``respond: {ask_model: true}``)
    asks that question through the world's client too: a ``client: http`` chat never
    loads litellm."""
    server.reset()
    last = _lean_program(
        server,
        "roles: [{id: a, respond: {ask_model: true}}]",
        """
        await session.say("what do you think?")
        print("litellm" in sys.modules)
        """,
    )
    assert last == "False"
    assert server.requests, "the respond check's question never reached the provider"
