"""OpenTelemetry spans of a session, read back from the SDK's in-memory exporter."""

from __future__ import annotations

import logging
import subprocess
import sys
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

import rolecall
from rolecall.tracing import trace_session
from tests.faults import Cli, write_net_guard
from tests.helpers import scripted_world


@pytest.fixture
def exporter() -> InMemorySpanExporter:
    return InMemorySpanExporter()


@pytest.mark.anyio
async def test_one_span_per_session_turn_and_generation(exporter: InMemorySpanExporter) -> None:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    world = scripted_world(
        [
            {"id": "ask", "speaker": "student"},
            {"id": "answer", "speaker": "teacher", "loop": {"to": "ask", "max": 2}},
        ]
    )
    async with rolecall.open_session(world) as session:
        trace_session(session, tracer_provider=provider)
        await session.run()

    spans = exporter.get_finished_spans()
    (root,) = [s for s in spans if s.name == "session t"]
    turns = [s for s in spans if s.name.startswith("turn ")]
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(turns) == len(chats) == 4
    assert root.attributes["rolecall.world"] == "t"
    assert root.attributes["rolecall.session_id"] == session.session_id
    assert root.attributes["rolecall.stop_reason"] == "flow_end"
    assert root.parent is None

    assert [t.attributes["rolecall.step"] for t in turns] == ["ask", "answer", "ask", "answer"]
    assert [t.attributes["rolecall.loop_iteration"] for t in turns] == [0, 0, 1, 1]
    assert turns[1].attributes["rolecall.reply_target"] == "student"
    assert all(t.parent is not None and t.parent.span_id == root.context.span_id for t in turns)

    by_turn = {t.context.span_id: t for t in turns}
    messages = session.transcript
    for chat, message in zip(chats, messages, strict=True):
        assert chat.kind == SpanKind.CLIENT
        assert chat.parent is not None and chat.parent.span_id in by_turn
        assert chat.attributes["gen_ai.operation.name"] == "chat"
        assert chat.attributes["gen_ai.provider.name"] == "rolecall"
        assert chat.attributes["gen_ai.conversation.id"] == session.session_id
        assert chat.attributes["gen_ai.request.model"] == "scripted"
        assert chat.attributes["gen_ai.usage.input_tokens"] == message.input_tokens
        assert chat.attributes["gen_ai.usage.output_tokens"] == message.output_tokens
        assert chat.status.status_code != StatusCode.ERROR
        assert chat.attributes["gen_ai.response.finish_reasons"] == ("stop",)


@pytest.mark.anyio
async def test_the_public_session_is_traced_and_logged_as_observability_md_shows(
    exporter: InMemorySpanExporter, caplog: pytest.LogCaptureFixture
) -> None:
    import rolecall.debuglog

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    caplog.set_level(logging.DEBUG, logger="rolecall")
    world = scripted_world([{"id": "ask", "speaker": "student"}])
    async with rolecall.open_session(world) as session:
        rolecall.debuglog.log_events(session)
        tracing = trace_session(session, tracer_provider=provider)
        await session.run()
        tracing.close()
    names = [s.name for s in exporter.get_finished_spans()]
    assert names.count("session t") == 1 and names.count("turn student") == 1
    (root,) = [s for s in exporter.get_finished_spans() if s.name == "session t"]
    assert root.attributes["rolecall.session_id"] == session.session_id
    assert root.attributes["rolecall.cost_usd"] == 0.0  # the whole session's, as result.cost
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.request.model"] == "scripted"
    assert "session_stop" in caplog.text


@pytest.mark.anyio
async def test_a_failed_generation_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    from collections.abc import AsyncIterator

    from rolecall.errors import ProviderUnavailable
    from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta

    class Broken:
        name = "broken"

        async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
            yield TextDelta("half")
            raise ProviderUnavailable("broken: the stream broke", model="broken")

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    world = scripted_world([{"id": "ask", "speaker": "student"}])
    async with rolecall.open_session(world, models={"scripted": Broken()}) as session:
        trace_session(session, tracer_provider=provider)
        await session.run()

    spans = {s.name: s for s in exporter.get_finished_spans()}
    chat = spans["chat scripted"]
    assert chat.status.status_code == StatusCode.ERROR
    assert chat.attributes["error.type"] == "unavailable"
    assert spans["turn student"].status.status_code == StatusCode.ERROR
    assert spans["session t"].attributes["rolecall.pause_reason"] == "error"


@pytest.mark.anyio
async def test_a_provider_call_follows_the_genai_conventions(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real call over HTTP to a loopback OpenAI-compatible server, then a refused one."""
    from rolecall.llm.registry import aclose_clients
    from tests.helpers import world_from
    from tests.llm.openai_server import OpenAITestServer, Reply, Status

    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("ROLECALL_TRACE_TEST_KEY", "sk-trace-test-0123456789")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with OpenAITestServer() as server:
        server.queue(Reply("Fine."), Status(401, "bad key"))
        world = world_from(
            {
                "name": "t",
                "topic": "t",
                "model": "openai/gpt-4o-mini",
                "settings": {
                    "client": "http",
                    "api_base": server.base_url,
                    "api_key_env": "ROLECALL_TRACE_TEST_KEY",
                    "retries": 0,
                },
                "roles": [{"id": "a"}, {"id": "b"}],
                "flow": {"steps": [{"id": "one", "speaker": "a"}, {"id": "two", "speaker": "b"}]},
            }
        )
        try:
            async with rolecall.open_session(world) as session:
                trace_session(session, tracer_provider=provider)
                await session.run()
        finally:
            await aclose_clients()
        port = server.port

    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [c.name for c in chats] == ["chat gpt-4o-mini"] * 2
    for chat in chats:
        assert chat.attributes["gen_ai.provider.name"] == "openai"
        assert chat.attributes["gen_ai.request.model"] == "gpt-4o-mini"  # as sent
        assert chat.attributes["gen_ai.conversation.id"] == session.session_id
        assert chat.attributes["server.address"] == "127.0.0.1"
        assert chat.attributes["server.port"] == port
        assert "gen_ai.system" not in chat.attributes  # the deprecated name
    ok, refused = chats
    assert "error.type" not in ok.attributes and ok.attributes["gen_ai.usage.output_tokens"] > 0
    assert refused.status.status_code == StatusCode.ERROR
    assert refused.attributes["error.type"] == "refused"


@pytest.mark.anyio
@pytest.mark.parametrize("client", ["http", "litellm"])
async def test_the_finish_reason_is_the_providers(
    exporter: InMemorySpanExporter, monkeypatch: pytest.MonkeyPatch, client: str
) -> None:
    """A reply the loopback server ends with finish_reason "length" (cut at max_tokens)
    is traced so, through either client, and reaches sse/end; the next says "stop"."""
    from rolecall.bus import StreamEnd
    from rolecall.llm.registry import aclose_clients
    from tests.helpers import world_from
    from tests.llm.openai_server import OpenAITestServer, Reply

    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("ROLECALL_TRACE_TEST_KEY", "sk-trace-test-0123456789")
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    with OpenAITestServer() as server:
        server.queue(Reply("Cut off in the mid", finish_reason="length"), Reply("Fine."))
        world = world_from(
            {
                "name": "t",
                "topic": "t",
                "model": "openai/gpt-4o-mini",
                "settings": {
                    "client": client,
                    "api_base": server.base_url,
                    "api_key_env": "ROLECALL_TRACE_TEST_KEY",
                    "retries": 0,
                },
                "roles": [{"id": "a", "max_tokens": 5}, {"id": "b"}],
                "flow": {"steps": [{"id": "one", "speaker": "a"}, {"id": "two", "speaker": "b"}]},
            }
        )
        ends: list[StreamEnd] = []
        said: list[object] = []  # the session's system events: why it stopped, if it did
        try:
            async with rolecall.open_session(world) as session:
                session.bus.subscribe(lambda e: ends.append(e.event), "sse", name="ends")
                session.bus.subscribe(lambda e: said.append(e.event), "system", name="said")
                trace_session(session, tracer_provider=provider)
                result = await session.run()
        finally:
            await aclose_clients()

    assert result.state == "finished", (result.pause_reason, said)
    assert [e.finish_reason for e in ends if isinstance(e, StreamEnd)] == ["length", "stop"]
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("length",),
        ("stop",),
    ]


@pytest.mark.anyio
async def test_the_offline_model_says_length_when_max_tokens_cut_its_reply(
    exporter: InMemorySpanExporter,
) -> None:
    from tests.helpers import world_from

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    world = world_from(
        {
            "name": "t",
            "topic": "how rivers shape the valleys they run through",
            "model": "offline",
            "roles": [{"id": "teacher", "max_tokens": 4}, {"id": "student"}],
            "flow": {
                "steps": [{"id": "one", "speaker": "teacher"}, {"id": "two", "speaker": "student"}]
            },
        }
    )
    async with rolecall.open_session(world) as session:
        trace_session(session, tracer_provider=provider)
        await session.run()
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert [c.attributes["gen_ai.response.finish_reasons"] for c in chats] == [
        ("length",),
        ("stop",),
    ]
    assert session.transcript[0].output_tokens <= 4


# the command line, in a process of its own: traced when the program set a tracer
# provider before rolecall started (as opentelemetry-instrument does), and otherwise
# without importing the OpenTelemetry API at all
COMMAND = """\
import sys
exporter = None
if sys.argv[1] == "traced":
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
from rolecall.cli.main import main
code = main(["run", sys.argv[2], "--json", "--max-turns", "2"])
names = sorted(s.name for s in exporter.get_finished_spans()) if exporter else []
print("RESULT", code, "opentelemetry.trace" in sys.modules, names, file=sys.stderr)
"""

WORLD = """\
name: traced
model: scripted
roles:
  - {id: a, script: ['a says {n}']}
  - {id: b, script: ['b answers #{n}']}
flow:
  steps:
    - {id: ask, speaker: a}
    - {id: answer, speaker: b}
"""


@pytest.mark.parametrize("mode", ["traced", "untraced"])
def test_the_command_line_traces_only_with_a_tracer_provider(tmp_path: Path, mode: str) -> None:
    world = tmp_path / "traced.yaml"
    world.write_text(WORLD, encoding="utf-8")
    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    done = subprocess.run(
        [sys.executable, "-c", COMMAND, mode, str(world)],
        cwd=cli.cwd,
        env=cli.env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    (result,) = [line for line in done.stderr.splitlines() if line.startswith("RESULT ")]
    if mode == "traced":
        assert result == (
            "RESULT 0 True ['chat scripted', 'chat scripted', 'session traced', 'turn a', 'turn b']"
        )
    else:
        assert result == "RESULT 0 False []"
    assert cli.refused_connections() == []
