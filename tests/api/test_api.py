"""The public Python API (spec/api.md): sessions, events, result, resume, testing helpers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import rolecall
from rolecall.llm.types import GenerationRequest
from rolecall.testing import FunctionModel, capture_events, refuse_real_models
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio


def pair(**extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "name": "pair",
        "topic": "tea or coffee",
        "model": "offline",
        "roles": [{"id": "ann"}, {"id": "bob"}],
        "flow": {
            "steps": [
                {"id": "open", "speaker": "ann"},
                {"id": "answer", "speaker": "bob", "reply_to": {"role": "ann"}},
                {"id": "close", "speaker": "ann", "reply_to": {"role": "bob"}},
            ]
        },
    }
    data.update(extra)
    return data


def numbered(request: GenerationRequest) -> str:
    return f"{request.info.speaker} says {request.info.turn}"


async def test_events_run_the_flow_and_none_is_dropped() -> None:
    world = rolecall.load_world(pair())
    seqs: list[int] = []
    kinds: list[type] = []
    async with rolecall.open_session(world, models={"offline": FunctionModel(numbered)}) as s:
        async for envelope in s.envelopes():
            seqs.append(envelope.seq)
            kinds.append(type(envelope.event))
    assert seqs == list(range(1, len(seqs) + 1))  # every event, in seq order, no gap
    assert kinds[-1] is rolecall.StopEvent
    assert kinds.count(rolecall.Message) == 3 == s.result.messages
    assert kinds.count(rolecall.StreamChunk) >= 3
    assert s.result.stop_reason == "flow_end" and s.result.state == "finished"
    assert [m.content for m in s.transcript] == ["ann says 1", "bob says 2", "ann says 3"]
    assert s.result.tokens == s.result.input_tokens + s.result.output_tokens > 0
    assert s.result.cost == 0.0


async def test_a_second_reader_after_the_end_gets_nothing_and_ends() -> None:
    async with rolecall.open_session(pair()) as s:
        first = [e async for e in s.events()]
        again = [e async for e in s.events()]
    assert first and again == []


async def test_a_reader_started_in_step_mode_gets_the_opening_events() -> None:
    seqs: list[int] = []
    kinds: list[str] = []
    async with rolecall.open_session(pair(), mode="step") as s:

        async def read() -> None:
            async for envelope in s.envelopes():
                seqs.append(envelope.seq)
                kinds.append(f"{envelope.event.topic}/{envelope.event.type}")

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            while await s.step():
                pass
    assert seqs == list(range(1, len(seqs) + 1))
    assert kinds[:4] == ["world/session", "world/agent", "world/agent", "world/session"]
    assert kinds[-1] == "world/stop"


async def test_events_after_say_start_at_the_opening_and_the_next_reader_goes_on() -> None:
    world = {"name": "help", "model": "offline", "roles": [{"id": "doc"}, {"id": "nurse"}]}
    async with rolecall.open_session(world, models={"offline": FunctionModel(numbered)}) as s:
        await s.say("@doc hello")
        first: list[int] = []
        async for envelope in s.envelopes():
            first.append(envelope.seq)
            if isinstance(envelope.event, rolecall.Message) and envelope.event.sender == "doc":
                break
        await s.say("@nurse and you?")
        s.stop()
        second = [envelope.seq async for envelope in s.envelopes()]
    assert first == list(range(1, len(first) + 1))
    assert second == list(range(first[-1] + 1, first[-1] + 1 + len(second)))
    assert isinstance(s.bus.history[-1].event, rolecall.StopEvent)


async def test_leaving_the_block_of_a_running_chat_pauses_it(tmp_path: Path) -> None:
    world = {"name": "help", "model": "offline", "roles": [{"id": "doc"}, {"id": "nurse"}]}
    async with rolecall.open_session(world, data_dir=tmp_path) as s:
        await s.say("@doc hello")
        assert s.result.state == "running"
        kinds = [f"{e.event.topic}/{e.event.type}" for e in s.bus.history]
        # a chat runs from its first message on: `running` comes before that message
        assert kinds.index("world/session", 1) < kinds.index("messages/message")
    assert s.result.state == "paused" and s.result.pause_reason == "closed"
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.result.state == "paused" and again.result.pause_reason == "closed"
        last = again.bus.last_seq
    assert last == s.bus.last_seq  # the pause was stored


async def test_in_memory_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROLECALL_HOME", str(tmp_path / "home"))
    result = await rolecall.run(pair())
    assert result.stop_reason == "flow_end"
    assert [p async for p in anyio.Path(tmp_path).iterdir()] == []


async def test_data_dir_stores_and_resume_goes_on_without_regenerating(tmp_path: Path) -> None:
    model = FunctionModel(numbered)
    async with rolecall.open_session(
        pair(), data_dir=tmp_path, mode="step", models={"offline": model}
    ) as s:
        assert await s.step()
        sid = s.session_id
        assert s.result.state == "running"
    assert (tmp_path / "rolecall.db").is_file()
    assert (tmp_path / "memory" / sid / "bob.jsonl").is_file()
    async with rolecall.resume(sid, data_dir=tmp_path, models={"offline": model}) as s:
        assert [m.content for m in s.transcript] == ["ann says 1"]
        result = await s.run()
    assert result.stop_reason == "flow_end" and result.messages == 3
    assert len(model.requests) == 3  # one per message: none generated twice


async def test_resume_of_an_unknown_id_names_it(tmp_path: Path) -> None:
    with pytest.raises(rolecall.UsageError, match="no session 'nope'"):
        async with rolecall.resume("nope", data_dir=tmp_path):
            pass
    with pytest.raises(rolecall.UsageError, match="no store"):
        async with rolecall.resume("nope"):
            pass


async def second_turn_hangs(request: GenerationRequest) -> str:
    """A model whose second turn hangs (until it is cut)."""
    if request.info.turn == 2:
        await anyio.sleep(30)
    return "fine"


async def test_leaving_the_block_mid_run_pauses_the_session(tmp_path: Path) -> None:
    async with rolecall.open_session(
        pair(), data_dir=tmp_path, models={"offline": FunctionModel(second_turn_hangs)}
    ) as s:
        async for event in s.events():
            if isinstance(event, rolecall.StreamStart) and event.message_id == "m2":
                break
    # as Ctrl-C does on the command line: the generation cut is kept as a draft
    assert s.result.state == "paused" and s.result.pause_reason == "cancelled"
    assert [d.message_id for d in s.drafts] == ["m2"]
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert [m.content for m in again.transcript] == ["fine"]


async def test_chat_say_pause_and_stop() -> None:
    world = {"name": "help", "model": "offline", "roles": [{"id": "doc"}, {"id": "nurse"}]}
    seen: list[str] = []
    async with rolecall.open_session(world, models={"offline": FunctionModel(numbered)}) as s:

        async def read() -> None:
            async for event in s.events():
                if isinstance(event, rolecall.Message):
                    seen.append(event.sender)

        async with anyio.create_task_group() as tg:
            tg.start_soon(read)
            await anyio.lowlevel.checkpoint()
            await s.say("@doc hello")
            s.pause()
            assert s.result.state == "paused"
            s.stop()
    assert seen == ["human", "doc"]
    assert s.result.stop_reason == "manual"


async def test_a_finished_session_takes_no_message_and_stays_as_it_was() -> None:
    """say() after stop() (or the flow's end) raises, as the command line ignores the line;
    the other calls change nothing."""
    world = {"name": "help", "model": "offline", "roles": [{"id": "doc"}, {"id": "nurse"}]}
    async with rolecall.open_session(world, models={"offline": FunctionModel(numbered)}) as s:
        await s.say("@doc hello")
        s.stop()
        before = s.result
        with pytest.raises(rolecall.UsageError) as refused:
            await s.say("@doc still there?")
        assert str(refused.value) == (
            f"session {s.session_id} is finished (manual): it takes no more messages; "
            "the message was not added"
        )
        assert await s.step() is False
        assert await s.run() == before
        s.pause()
        s.stop()
        assert s.result == before and len(s.transcript) == 2
        # the events of a finished session: those of its opening up to its stop, then none
        assert isinstance([e async for e in s.events()][-1], rolecall.StopEvent)
        assert [e async for e in s.events()] == []
    async with rolecall.open_session(pair(), models={"offline": FunctionModel(numbered)}) as s:
        await s.run()
        with pytest.raises(rolecall.UsageError, match=r"is finished \(flow_end\)"):
            await s.say("one more thing")
        assert s.result.messages == 3


async def test_say_waiting_for_a_turn_that_finishes_the_session_adds_nothing() -> None:
    world = {"name": "help", "model": "offline", "roles": [{"id": "doc"}]}
    answer = anyio.Event()

    async def held(request: GenerationRequest) -> str:
        await answer.wait()
        return "the last turn"

    async with rolecall.open_session(world, models={"offline": FunctionModel(held)}) as s:
        failed: list[BaseException] = []

        async def say() -> None:
            try:
                await s.say("@doc and one more thing")
            except rolecall.UsageError as exc:
                failed.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(s.say, "@doc hello")
            await anyio.wait_all_tasks_blocked()  # doc's reply under way
            assert s.generating
            tg.start_soon(say)  # waits for that turn
            await anyio.wait_all_tasks_blocked()
            s.stop()  # after the turn under way: it finishes the session
            answer.set()
        assert len(failed) == 1 and "is finished (manual)" in str(failed[0])
        assert [m.content for m in s.transcript] == ["@doc hello", "the last turn"]


async def test_stop_and_pause_are_stored_when_they_happen() -> None:
    """Every transition is stored as it happens: not with the next turn, nor only when
    the block is left (a stop between turns once stayed ``running`` in the store)."""
    from rolecall.storage.in_memory import InMemoryStore

    store = InMemoryStore()
    models = {"offline": FunctionModel(numbered)}

    async def stored() -> tuple[str, str | None, str | None]:
        state = (await store.load(sid)).state
        return state.state, state.pause_reason, state.stop_reason

    async with rolecall.open_session(pair(), store=store, mode="step", models=models) as s:
        sid = s.session_id
        assert await s.step()
        s.pause()  # idle: at once
        await anyio.sleep(0.01)
        assert await stored() == ("paused", "manual", None)
        s.stop()
        await anyio.sleep(0.01)
        assert await stored() == ("finished", None, "manual")
        doc = await store.load(sid)
        assert [e["type"] for e in doc.events[-2:]] == ["session", "stop"]

    async def slow(request: GenerationRequest) -> str:
        if request.info.turn > 1:
            await anyio.sleep(0.2)
        return numbered(request)

    async with rolecall.open_session(
        pair(), store=store, models={"offline": FunctionModel(slow)}
    ) as s:
        sid = s.session_id
        async for event in s.events():  # runs the flow
            if isinstance(event, rolecall.Message):
                s.stop()  # during the run (m2 is being generated): after that turn
        assert s.result.messages == 2
        assert await stored() == ("finished", None, "manual")


async def test_models_replace_the_builtin_of_that_name_only() -> None:
    world = pair(roles=[{"id": "ann"}, {"id": "bob", "model": "scripted", "script": ["hi"]}])
    model = FunctionModel(lambda request: "from the function")
    with capture_events() as events:
        result = await rolecall.run(world, models={"offline": model})
    assert [m.content for m in events.of(rolecall.Message)] == [
        "from the function",
        "hi",
        "from the function",
    ]
    assert result.messages == 3 and len(model.requests) == 2


async def test_refusing_real_models(monkeypatch: pytest.MonkeyPatch) -> None:
    world = pair(model="openai/gpt-4o-mini")
    with refuse_real_models(), pytest.raises(rolecall.ProviderError, match="refused"):
        await rolecall.run(world)
    monkeypatch.setenv("ROLECALL_REFUSE_REAL_MODELS", "1")
    with pytest.raises(rolecall.ProviderError, match="ROLECALL_REFUSE_REAL_MODELS"):
        await rolecall.run(world)
    # a model object passed in is the caller's choice, never refused
    result = await rolecall.run(world, models={"openai/gpt-4o-mini": FunctionModel(numbered)})
    assert result.stop_reason == "flow_end"


async def test_sinks_see_every_event_from_the_first() -> None:
    class Keep:
        def __init__(self) -> None:
            self.seqs: list[int] = []

        def attach(self, bus: Any) -> None:
            bus.subscribe(lambda envelope: self.seqs.append(envelope.seq))

    keep = Keep()
    await rolecall.run(pair(), sinks=[keep])
    assert keep.seqs[0] == 1 and keep.seqs == sorted(keep.seqs)


def test_bad_input_is_named() -> None:
    with pytest.raises(rolecall.WorldError, match="no role 'nobody'"):
        rolecall.load_world(pair(flow={"steps": [{"id": "s", "speaker": "nobody"}]}))
    with pytest.raises(rolecall.UsageError, match="no world 'atlantis'"):
        rolecall.load_world("atlantis")


async def test_mode_must_be_known() -> None:
    with pytest.raises(rolecall.UsageError, match="mode must be 'auto' or 'step'"):
        async with rolecall.open_session(pair(), mode="fast"):  # type: ignore[arg-type]
            pass


def python_in(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` in ``folder`` without rolecall's environment; it must exit 0."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLECALL_")}
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=folder, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done


def test_library_use_prints_nothing(tmp_path: Path) -> None:
    """Warnings and info logs of a library run reach no stream unless the app asks."""
    code = (
        "import anyio, logging, rolecall\n"
        "w = rolecall.load_world({'name': 'x', 'model': 'offline', 'roles': [{'id': 'a'}],"
        " 'flow': {'steps': [{'id': 's', 'speaker': 'a'}, {'id': 'lost', 'speaker': 'a'}],"
        " 'stop': [{'max_turns': 1}]}})\n"
        "anyio.run(rolecall.run, w)\n"
        "logging.basicConfig(level=logging.INFO)\n"
        "anyio.run(rolecall.run, w)\n"
    )
    done = python_in(tmp_path, code)
    assert done.stdout == ""
    # only after the application configured logging do records appear, on its handler
    assert "session_finished" in done.stderr
    assert done.stderr.startswith("INFO:rolecall.runtime:")


def test_an_application_that_configured_structlog_gets_the_records(tmp_path: Path) -> None:
    """rolecall binds structlog to stdlib logging only when the application did not
    configure structlog itself (here after importing rolecall, before its first
    record): the application's configuration gets rolecall's records."""
    code = (
        "import anyio, rolecall, structlog\n"
        "structlog.configure(processors=[structlog.processors.JSONRenderer()])\n"
        "w = rolecall.load_world({'name': 'x', 'model': 'offline', 'roles': [{'id': 'a'}],"
        " 'flow': {'steps': [{'id': 's', 'speaker': 'a'}], 'stop': [{'max_turns': 1}]}})\n"
        "anyio.run(rolecall.run, w)\n"
    )
    done = python_in(tmp_path, code)
    records = [json.loads(line) for line in done.stdout.splitlines()]
    assert [r["event"] for r in records] == ["session_finished"]
    assert records[0]["reason"] == "max_turns"


def test_public_names() -> None:
    for name in rolecall.__all__:
        assert getattr(rolecall, name) is not None
    assert rolecall.Message is rolecall.MessageEvent
    with pytest.raises(AttributeError):
        rolecall.nothing_here  # noqa: B018
    assert ROOT.is_dir()
