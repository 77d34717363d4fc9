"""The litellm adapter, driven for real over HTTP to a loopback OpenAI-compatible server."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
import textwrap
import time
import traceback
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
import pytest

from rolecall.errors import ProviderRefused, ProviderTimeout, ProviderUnavailable
from rolecall.llm.litellm_model import LiteLLMModel, is_loaded
from rolecall.llm.registry import aclose_clients
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    Persona,
    StreamItem,
    TextDelta,
    TurnInfo,
    Usage,
)

from .openai_server import (
    Break,
    Garbage,
    Html,
    OpenAITestServer,
    Reply,
    Stall,
    Status,
    Truncated,
    words,
)

MODEL = "openai/test-model"
KEY_ENV = "ROLECALL_TEST_API_KEY"
KEY = "sk-rolecall-test-0123456789-SECRET"
PROXY_VARS = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")
COST_MAP_ENV = "LITELLM_LOCAL_MODEL_COST_MAP"
LOOPBACK = ("127.", "::1", "localhost")

pytestmark = [
    # litellm 1.106 inspects every attribute of streamed choices/deltas, which trips
    # pydantic's deprecation of instance access to model_fields / model_computed_fields.
    pytest.mark.filterwarnings(
        "ignore:Accessing the 'model_(computed_)?fields' attribute on the instance is deprecated"
        ":pydantic.warnings.PydanticDeprecatedSince211"
    ),
    # litellm's response types are built lazily on the first streamed reply; pydantic warns
    # about their ReadOnly TypedDict items then (in whichever test streams first)
    pytest.mark.filterwarnings("ignore:Item '.*' on TypedDict class .* `ReadOnly` qualifier"),
]


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.fixture
def outbound(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Refuse (and record) any connection that is not to the loopback interface."""
    attempts: list[Any] = []
    real_connect = socket.socket.connect
    real_connect_ex = socket.socket.connect_ex

    def allowed(address: Any) -> bool:
        if isinstance(address, tuple) and address:
            return str(address[0]).startswith(LOOPBACK)
        return True  # unix sockets and the like stay on this machine

    def connect(self: socket.socket, address: Any) -> None:
        if not allowed(address):
            attempts.append(address)
            raise ConnectionRefusedError(f"test guard: no connection to {address!r}")
        real_connect(self, address)

    def connect_ex(self: socket.socket, address: Any) -> int:
        if not allowed(address):
            attempts.append(address)
            return 111
        return real_connect_ex(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return attempts


@pytest.fixture
async def srv(
    server: OpenAITestServer, monkeypatch: pytest.MonkeyPatch, outbound: list[Any]
) -> AsyncIterator[OpenAITestServer]:
    """The shared server, reset, with the key set, no proxies, and no way off this machine."""
    server.reset()
    for var in PROXY_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("no_proxy", "*")
    monkeypatch.setenv(KEY_ENV, KEY)
    yield server
    await aclose_clients()
    assert outbound == [], f"connections off the loopback interface were attempted: {outbound}"


def make_request(srv: OpenAITestServer, **changes: Any) -> GenerationRequest:
    fields: dict[str, Any] = {
        "model": MODEL,
        "messages": (
            ChatMessage("system", "You are Alice, a careful reviewer."),
            ChatMessage("user", "Hello there, what do you think?", name="bob"),
        ),
        "persona": Persona(id="alice", name="Alice"),
        "info": TurnInfo(
            turn=2, n=1, speaker="alice", target="bob", target_text=None, topic="tests"
        ),
        "temperature": 0.3,
        "max_tokens": 50,
        "api_base": srv.base_url,
        "api_key_env": KEY_ENV,
        "timeout": 5.0,
        "retries": 2,
    }
    fields.update(changes)
    return GenerationRequest(**fields)


def make_model() -> LiteLLMModel:
    return LiteLLMModel(MODEL, retry_delay=0.01)


async def collect(
    request: GenerationRequest, into: list[StreamItem] | None = None
) -> list[StreamItem]:
    items: list[StreamItem] = [] if into is None else into
    # a hang is a failure, not a stuck test run; the first call of the process also
    # imports litellm (7-9 s of CPU, several times that on a loaded machine): not a hang
    with anyio.fail_after(20 if is_loaded() else 120):
        async for item in make_model().stream(request):
            items.append(item)
    return items


def text_of(items: list[StreamItem]) -> str:
    return "".join(i.text for i in items if isinstance(i, TextDelta))


def assert_secret_free(exc: BaseException) -> None:
    rendered = "".join(traceback.format_exception(exc))
    assert KEY not in str(exc)
    assert KEY not in rendered


# -- streaming --------------------------------------------------------------------------------

TEXT = "The quick brown fox jumps over the lazy dog."


@pytest.mark.anyio
async def test_streams_text_in_order_then_usage(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, prompt_tokens=21, completion_tokens=9))

    items = await collect(make_request(srv))

    deltas = items[:-1]
    assert all(isinstance(i, TextDelta) for i in deltas)
    assert [d.text for d in deltas if isinstance(d, TextDelta)] == words(TEXT)
    assert len(deltas) == 9
    assert text_of(items) == TEXT
    assert items[-1] == Usage(input_tokens=21, output_tokens=9)
    assert sum(isinstance(i, Usage) for i in items) == 1


@pytest.mark.anyio
async def test_request_carries_messages_and_parameters(srv: OpenAITestServer) -> None:
    request = make_request(srv, temperature=0.3, max_tokens=50)

    await collect(request)

    (sent,) = srv.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.body["model"] == "test-model"
    assert sent.body["messages"] == [m.as_provider_dict() for m in request.messages]
    assert sent.body["messages"][1]["name"] == "bob"
    assert sent.body["temperature"] == 0.3
    assert sent.body["max_tokens"] == 50
    assert sent.body["stream"] is True
    assert sent.body["stream_options"] == {"include_usage": True}
    assert sent.authorization == f"Bearer {KEY}"


@pytest.mark.anyio
async def test_unset_parameters_are_not_sent(srv: OpenAITestServer) -> None:
    await collect(make_request(srv, temperature=None, max_tokens=None))

    (sent,) = srv.requests
    assert "temperature" not in sent.body
    assert "max_tokens" not in sent.body


@pytest.mark.anyio
async def test_usage_is_still_last_when_the_server_sends_none(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, send_usage=False))

    items = await collect(make_request(srv))

    assert text_of(items) == TEXT
    assert sum(isinstance(i, Usage) for i in items) == 1
    usage = items[-1]
    assert isinstance(usage, Usage)
    assert usage.input_tokens > 0
    assert usage.output_tokens > 0


@pytest.mark.anyio
async def test_the_caller_may_stop_reading_early(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT))
    seen: list[str] = []

    with anyio.fail_after(20):
        stream = make_model().stream(make_request(srv))
        async for item in stream:
            assert isinstance(item, TextDelta)
            seen.append(item.text)
            if len(seen) == 2:
                break
        await stream.aclose()  # type: ignore[attr-defined]

    assert seen == words(TEXT)[:2]


@pytest.mark.anyio
async def test_a_reply_past_its_cap_is_cut_by_the_server_and_says_length(
    srv: OpenAITestServer,
) -> None:
    """real-models.md: the cap is sent as the provider's output cap; a reply cut by it
    ends with finish_reason length."""
    srv.queue(Reply(" ".join(["word"] * 40), completion_tokens=40))

    items = await collect(make_request(srv, max_tokens=6))

    (sent,) = srv.requests
    assert sent.body["max_tokens"] == 6
    assert "max_completion_tokens" not in sent.body
    assert len(text_of(items).split()) == 6
    usage = items[-1]
    assert isinstance(usage, Usage)
    assert (usage.output_tokens, usage.finish_reason) == (6, "length")


@pytest.mark.anyio
async def test_stop_sequences_are_sent_to_a_compatible_server(srv: OpenAITestServer) -> None:
    """Reply hygiene's stop sequences go to a server of the request's api_base (every one
    through rolecall's client; litellm sends OpenAI's most, four); the server stops
    before the first it meets."""
    stops = ("\nhuman:", "\nUser:", "\n[bob]", "\nBob:", "\n[carol]", "\nCarol:")
    srv.queue(Reply("I agree with that.\nBob: no you do not"))

    items = await collect(make_request(srv, stop=stops))

    (sent,) = srv.requests
    everything = not isinstance(make_model(), LiteLLMModel)
    assert sent.body["stop"] == list(stops if everything else stops[:4])
    assert text_of(items) == "I agree with that."


@pytest.mark.anyio
async def test_a_model_that_refuses_max_tokens_gets_max_completion_tokens(
    srv: OpenAITestServer,
) -> None:
    await collect(make_request(srv, model="openai/o3-mini", temperature=None, stop=("\nBob:",)))

    (sent,) = srv.requests
    assert sent.body["max_completion_tokens"] == 50
    assert "max_tokens" not in sent.body
    assert "stop" not in sent.body  # the reasoning models take none


# -- retries ----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_500_then_success_is_retried_once(srv: OpenAITestServer) -> None:
    srv.queue(Status(500, "the server had an error"), Reply(TEXT))

    items = await collect(make_request(srv, retries=2))

    assert text_of(items) == TEXT
    assert isinstance(items[-1], Usage)
    assert len(srv.requests) == 2


@pytest.mark.anyio
async def test_429_twice_then_success(srv: OpenAITestServer) -> None:
    srv.queue(Status(429, "rate limit reached", "requests"), Status(429, "again"), Reply(TEXT))

    items = await collect(make_request(srv, retries=2))

    assert text_of(items) == TEXT
    assert len(srv.requests) == 3


@pytest.mark.anyio
async def test_429_until_retries_run_out_is_unavailable(srv: OpenAITestServer) -> None:
    srv.queue(*[Status(429, "rate limit reached", "requests")] * 3, Reply(TEXT))

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(make_request(srv, retries=2))

    message = str(caught.value)
    assert message.startswith(f"{MODEL}: provider unavailable after 3 attempts")
    assert "429" in message
    assert caught.value.model == MODEL
    assert len(srv.requests) == 3
    assert_secret_free(caught.value)


@pytest.mark.anyio
async def test_no_retries_means_one_attempt(srv: OpenAITestServer) -> None:
    srv.queue(Status(503, "overloaded"), Reply(TEXT))

    with pytest.raises(ProviderUnavailable, match=r"after 1 attempt \(server error, HTTP 503"):
        await collect(make_request(srv, retries=0))

    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_401_is_refused_without_retry_and_the_key_is_not_shown(
    srv: OpenAITestServer,
) -> None:
    # A provider that echoes the whole key back must not get it into our message.
    srv.queue(Status(401, f"Incorrect API key provided: {KEY}", "invalid_request_error"))

    with pytest.raises(ProviderRefused) as caught:
        await collect(make_request(srv, retries=3))

    message = str(caught.value)
    assert message.startswith(f"{MODEL}: provider refused the request (authentication failed")
    assert "401" in message
    assert "Incorrect API key provided: ***" in message
    assert len(srv.requests) == 1
    assert_secret_free(caught.value)


@pytest.mark.anyio
async def test_an_html_page_with_http_200_is_retried_not_an_empty_reply(
    srv: OpenAITestServer,
) -> None:
    """A captive portal or a misconfigured proxy: 200 but no event stream (issue 13)."""
    srv.queue(Html(), Reply(TEXT))
    items = await collect(make_request(srv, retries=1))
    assert text_of(items) == TEXT
    assert len(srv.requests) == 2


@pytest.mark.anyio
async def test_a_stream_ending_without_finish_reason_is_a_broken_stream(
    srv: OpenAITestServer,
) -> None:
    """No finish reason and no [DONE]: the text is a draft, never a complete message."""
    srv.queue(Truncated("This reply was cut"))
    items: list[StreamItem] = []
    with pytest.raises(ProviderUnavailable, match="the stream broke after 18 characters") as caught:
        await collect(make_request(srv, retries=2), into=items)
    assert caught.value.retryable
    assert text_of(items) == "This reply was cut"
    assert not any(isinstance(i, Usage) for i in items)  # never reported as complete
    assert len(srv.requests) == 1  # text arrived: not retried (the draft is kept)


PLAIN_KEY = "Zq9rolecallPlainKey0123456"  # 26 characters, no sk- shape to match


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["role", "provider default"])
async def test_a_key_past_the_cut_of_a_long_error_is_redacted_whole(
    srv: OpenAITestServer, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The detail is cut to 200 characters; a key at 180 must not leave its first part.

    ``role``: the key of the world's ``api_key_env``; ``provider default``: a key
    litellm would read by itself (``OPENAI_API_KEY``), echoed by a proxy's error page.
    """
    if where == "role":
        monkeypatch.setenv(KEY_ENV, PLAIN_KEY)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", PLAIN_KEY)
    srv.queue(Status(401, "x" * 170 + f" the key {PLAIN_KEY} is not valid here"))

    with pytest.raises(ProviderRefused) as caught:
        await collect(make_request(srv, retries=0))

    rendered = "".join(traceback.format_exception(caught.value))
    assert "the key *** is not" in str(caught.value) or str(caught.value).endswith("...")
    for prefix in (PLAIN_KEY, PLAIN_KEY[:17], PLAIN_KEY[:10]):
        assert prefix not in rendered, rendered


@pytest.mark.anyio
@pytest.mark.parametrize(("code", "words_in_message"), [(400, "bad request"), (404, "not found")])
async def test_other_client_errors_are_refused_without_retry(
    srv: OpenAITestServer, code: int, words_in_message: str
) -> None:
    srv.queue(Status(code, "nope", "invalid_request_error"), Reply(TEXT))

    with pytest.raises(ProviderRefused, match=words_in_message):
        await collect(make_request(srv, retries=3))

    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_missing_key_variable_is_refused_by_name(
    srv: OpenAITestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ROLECALL_NO_SUCH_KEY", raising=False)

    with pytest.raises(ProviderRefused, match="ROLECALL_NO_SUCH_KEY") as caught:
        await collect(make_request(srv, api_key_env="ROLECALL_NO_SUCH_KEY"))

    assert str(caught.value).startswith(f"{MODEL}: ")
    assert srv.requests == []


@pytest.mark.anyio
async def test_nothing_listening_is_unavailable_after_retries(srv: OpenAITestServer) -> None:
    with socket.socket() as probe:  # a loopback port that is free, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(ProviderUnavailable, match=r"after 2 attempts \(connection failed") as e:
        await collect(make_request(srv, api_base=f"http://127.0.0.1:{port}/v1", retries=1))

    assert_secret_free(e.value)


# -- timeouts ---------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_stalled_server_times_out_without_hanging(srv: OpenAITestServer) -> None:
    srv.queue(Stall(30), Stall(30), Reply(TEXT))
    started = time.monotonic()

    with pytest.raises(ProviderTimeout) as caught:
        await collect(make_request(srv, timeout=0.5, retries=1))

    elapsed = time.monotonic() - started
    assert str(caught.value) == f"{MODEL}: provider timed out after 0.5 s (2 attempts)"
    assert elapsed < 5
    assert len(srv.requests) == 2
    assert_secret_free(caught.value)


@pytest.mark.anyio
async def test_stall_after_headers_before_any_text_times_out(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, stall_after=0, stall=30))
    started = time.monotonic()

    with pytest.raises(ProviderTimeout, match=r"timed out after 0\.5 s \(1 attempt\)"):
        await collect(make_request(srv, timeout=0.5, retries=0))

    assert time.monotonic() - started < 4


@pytest.mark.anyio
async def test_stall_after_text_is_a_broken_stream_not_retried(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, stall_after=3, stall=30), Reply(TEXT))
    items: list[StreamItem] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(make_request(srv, timeout=0.5, retries=2), into=items)

    assert text_of(items) == "The quick brown "
    assert "the stream broke after 16 characters" in str(caught.value)
    assert len(srv.requests) == 1


# -- broken streams and garbage ---------------------------------------------------------------


@pytest.mark.anyio
async def test_stream_broken_after_text_is_unavailable_and_not_retried(
    srv: OpenAITestServer,
) -> None:
    srv.queue(Break("This stream will"), Reply(TEXT))
    items: list[StreamItem] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(make_request(srv, retries=2), into=items)

    assert text_of(items) == "This stream will"
    assert not any(isinstance(i, Usage) for i in items)
    assert str(caught.value).startswith(f"{MODEL}: the stream broke after 16 characters")
    assert len(srv.requests) == 1
    assert_secret_free(caught.value)


@pytest.mark.anyio
async def test_stream_broken_before_any_text_is_retried(srv: OpenAITestServer) -> None:
    srv.queue(Break(""), Reply(TEXT))

    items = await collect(make_request(srv, retries=1))

    assert text_of(items) == TEXT
    assert len(srv.requests) == 2


@pytest.mark.anyio
async def test_garbage_before_any_text_is_unavailable_when_retries_run_out(
    srv: OpenAITestServer,
) -> None:
    srv.queue(Garbage(), Garbage(), Reply(TEXT))

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(make_request(srv, retries=1))

    message = str(caught.value)
    assert message.startswith(f"{MODEL}: provider unavailable after 2 attempts")
    assert "not valid JSON" in message
    assert len(srv.requests) == 2


@pytest.mark.anyio
async def test_garbage_before_any_text_then_success_is_retried(srv: OpenAITestServer) -> None:
    srv.queue(Garbage(), Reply(TEXT))

    items = await collect(make_request(srv, retries=1))

    assert text_of(items) == TEXT
    assert len(srv.requests) == 2


@pytest.mark.anyio
async def test_garbage_after_text_is_a_broken_stream(srv: OpenAITestServer) -> None:
    srv.queue(Garbage(text="Some words first"), Reply(TEXT))
    items: list[StreamItem] = []

    with pytest.raises(ProviderUnavailable) as caught:
        await collect(make_request(srv, retries=2), into=items)

    assert text_of(items) == "Some words first"
    message = str(caught.value)
    assert "the stream broke after 16 characters" in message
    assert "not valid JSON" in message
    assert len(srv.requests) == 1


# -- cancellation -----------------------------------------------------------------------------


@pytest.mark.anyio
async def test_cancellation_propagates_untouched(srv: OpenAITestServer) -> None:
    srv.queue(Stall(30))
    started = time.monotonic()

    with anyio.move_on_after(0.5) as scope:
        await collect(make_request(srv, timeout=10, retries=2))

    assert scope.cancelled_caught
    assert time.monotonic() - started < 4
    assert len(srv.requests) == 1


@pytest.mark.anyio
async def test_cancellation_mid_stream_propagates(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, stall_after=2, stall=30))
    items: list[StreamItem] = []

    with anyio.move_on_after(1.0) as scope:
        await collect(make_request(srv, timeout=10, retries=2), into=items)

    assert scope.cancelled_caught
    assert text_of(items) == "The quick "
    assert len(srv.requests) == 1


# -- lazy import and the cost map -------------------------------------------------------------


def _python(code: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in PROXY_VARS and k != COST_MAP_ENV}
    env.update(NO_PROXY="*", no_proxy="*", **extra)
    return env


def _finish(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=45)
    assert proc.returncode == 0, err
    return out.strip()


def test_importing_the_adapter_does_not_import_litellm() -> None:
    code = """
        import sys
        import rolecall.llm.litellm_model as m
        print("litellm" in sys.modules, m.is_loaded())
    """
    assert _finish(_python(code, _clean_env())) == "False False"


# Refuses and records every connection attempted while litellm loads; prints what it saw.
_PRELOAD = """
    import os, socket
    seen = []
    loopback_connect = socket.socket.connect
    def connect(self, address):
        seen.append(address)
        raise ConnectionRefusedError("test guard: no connections while loading")
    socket.socket.connect = connect
    import rolecall.llm.litellm_model as m
    m.preload()
    print(repr(os.environ.get("LITELLM_LOCAL_MODEL_COST_MAP")), m.is_loaded(), seen)
"""


# Goes on from _PRELOAD, litellm loaded and nobody listening: litellm's per-stream logging
# is off then, and a callback registered after the first reply turns it back on.
_LATE_CALLBACK = """
    socket.socket.connect = loopback_connect  # the loopback server from here on
    import anyio, litellm
    from litellm.integrations.custom_logger import CustomLogger
    from rolecall.llm.litellm_model import LiteLLMModel
    from rolecall.llm.types import ChatMessage, GenerationRequest, Persona, TurnInfo

    calls = []

    class Mine(CustomLogger):
        async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
            calls.append(kwargs.get("model"))

    request = GenerationRequest(
        model=MODEL,
        messages=(ChatMessage("user", "hello"),),
        persona=Persona("a", "A"),
        info=TurnInfo(turn=1, n=1, speaker="a", target=None, target_text=None, topic="t"),
        api_base=API_BASE,
        api_key_env=KEY_ENV,
    )

    async def main():
        model = LiteLLMModel(MODEL)
        async for _ in model.stream(request):
            pass
        litellm.callbacks = [Mine()]
        async for _ in model.stream(request):
            pass
        with anyio.move_on_after(10):
            while not calls:
                await anyio.sleep(0.02)
        print(calls)

    anyio.run(main)
"""


def test_cost_map_stays_local_a_users_value_wins_and_a_late_callback_is_called(
    server: OpenAITestServer,
) -> None:
    # Both interpreters import litellm (seconds each), so they run side by side; the first
    # then checks a callback registered after its first reply (one import fewer).
    server.reset()
    names = f"MODEL, API_BASE, KEY_ENV = {MODEL!r}, {server.base_url!r}, {KEY_ENV!r}\n"
    late = textwrap.dedent(_PRELOAD) + names + textwrap.dedent(_LATE_CALLBACK)
    default = _python(late, _clean_env(**{KEY_ENV: KEY}))
    user_set = _python(_PRELOAD, _clean_env(**{COST_MAP_ENV: "true"}))

    cost_map, *_, called = _finish(default).splitlines()
    assert cost_map == "'True' True []"
    assert called == "['test-model']"
    assert _finish(user_set) == "'true' True []"


@pytest.mark.anyio
async def test_litellm_is_loaded_after_a_call(srv: OpenAITestServer) -> None:
    await collect(make_request(srv))

    assert is_loaded()
    assert os.environ.get(COST_MAP_ENV, "").lower() == "true"


def test_backoff_doubles_up_to_the_cap() -> None:
    model = LiteLLMModel(MODEL, retry_delay=0.5, max_retry_delay=3.0)

    assert [model.backoff(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert model.name == MODEL


def test_waits_without_retry_after_are_full_jitter_below_the_backoff() -> None:
    model = LiteLLMModel(MODEL, retry_delay=0.5, max_retry_delay=3.0)
    waits = [model.retry_wait(3, None) for _ in range(200)]

    assert all(0.0 <= w <= 2.0 for w in waits)
    assert len({round(w, 6) for w in waits}) > 100  # spread out, not one fixed delay
    assert min(waits) < 0.5 < 1.5 < max(waits)


def test_retry_after_is_honoured_up_to_its_cap() -> None:
    model = LiteLLMModel(MODEL, retry_delay=0.5, max_retry_after=20.0)

    assert model.retry_wait(1, 7.0) == 7.0
    assert model.retry_wait(1, 600.0) == 20.0


@pytest.mark.anyio
async def test_429_with_retry_after_waits_what_the_provider_asked(
    srv: OpenAITestServer, caplog: pytest.LogCaptureFixture
) -> None:
    from tests.helpers import logged

    srv.queue(Status(429, "slow down", "requests", headers=(("Retry-After", "0.4"),)), Reply(TEXT))
    started = time.monotonic()
    with caplog.at_level(logging.DEBUG, logger="rolecall"):
        items = await collect(make_request(srv, retries=2))
    logs = logged(caplog)

    assert text_of(items) == TEXT
    retries = [e for e in logs if e["event"] == "provider_retry"]
    assert [(e["retry_after"], e["delay"]) for e in retries] == [(0.4, 0.4)]
    assert time.monotonic() - started >= 0.4


@pytest.mark.anyio
async def test_usage_carries_the_cost_from_the_price_map(srv: OpenAITestServer) -> None:
    srv.queue(Reply(TEXT, prompt_tokens=1000, completion_tokens=100))
    priced = await collect(make_request(srv, model="openai/gpt-4o-mini"))
    srv.queue(Reply(TEXT, prompt_tokens=1000, completion_tokens=100))
    unknown = await collect(make_request(srv))

    usage = priced[-1]
    assert isinstance(usage, Usage)
    assert usage.cost_usd == pytest.approx(0.00015 + 0.00006)
    assert isinstance(unknown[-1], Usage) and unknown[-1].cost_usd is None  # not in the map


def test_litellm_counts_tokens_by_the_models_tokenizer() -> None:
    japanese = (ChatMessage("user", "こんにちは、元気ですか？今日はいい天気ですね。"),)
    model = LiteLLMModel("openai/gpt-4o-mini")

    counted = model.count_tokens(japanese)
    assert counted > 2 * sum(len(m.content) for m in japanese) // 4  # the estimate says 6


def test_a_users_litellm_callbacks_are_kept_and_called(server: OpenAITestServer) -> None:
    # a fresh interpreter, as a user's program: callbacks set before rolecall loads litellm
    server.reset()
    code = f"""
        import anyio, litellm
        from litellm.integrations.custom_logger import CustomLogger
        from rolecall.llm.litellm_model import LiteLLMModel
        from rolecall.llm.types import ChatMessage, GenerationRequest, Persona, TurnInfo

        calls = []

        class Mine(CustomLogger):
            async def async_log_success_event(self, kwargs, response_obj, start_time, end_time):
                calls.append(kwargs.get("model"))

        litellm.callbacks = [Mine()]
        request = GenerationRequest(
            model={MODEL!r},
            messages=(ChatMessage("user", "hello"),),
            persona=Persona("a", "A"),
            info=TurnInfo(turn=1, n=1, speaker="a", target=None, target_text=None, topic="t"),
            api_base={server.base_url!r},
            api_key_env={KEY_ENV!r},
        )

        async def main():
            async for _ in LiteLLMModel({MODEL!r}).stream(request):
                pass
            with anyio.move_on_after(10):
                while not calls:
                    await anyio.sleep(0.02)
            print(len(litellm.callbacks), calls)

        anyio.run(main)
    """
    out = _finish(_python(code, _clean_env(**{KEY_ENV: KEY})))
    assert out.splitlines()[-1] == "1 ['test-model']"


def test_the_http_client_never_imports_litellm(server: OpenAITestServer) -> None:
    # importing litellm costs seconds: settings.client http's requests go through rolecall's
    # own client, chosen by the registry, and litellm is not imported on that path at all
    # (the reply's cost comes from litellm's bundled price map, read as a file)
    server.reset()
    code = f"""
        import sys, anyio
        from rolecall.llm.registry import ModelRegistry, aclose_clients
        from rolecall.llm.types import ChatMessage, GenerationRequest, Persona, TurnInfo

        request = GenerationRequest(
            model="openai/gpt-4o-mini",
            messages=(ChatMessage("user", "hello"),),
            persona=Persona("a", "A"),
            info=TurnInfo(turn=1, n=1, speaker="a", target=None, target_text=None, topic="t"),
            api_base={server.base_url!r},
            api_key_env={KEY_ENV!r},
            client="http",
        )

        async def main():
            model = ModelRegistry().get(request.model)
            await model.prepare(request)
            assert await model.calls_tools(request)
            seen = [type(item).__name__ async for item in model.stream(request)]
            await aclose_clients()
            print(seen[0], seen[-1], "litellm" in sys.modules)

        anyio.run(main)
    """
    out = _finish(_python(code, _clean_env(**{KEY_ENV: KEY})))
    assert out.splitlines()[-1] == "TextDelta Usage False"
