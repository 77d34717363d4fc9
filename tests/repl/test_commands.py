"""The REPL without a terminal: command parsing, the display, commands, completion, keys.

The prompt itself runs on prompt-toolkit's pipe input and DummyOutput; what the REPL
prints above the prompt is captured through its ``sink``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from prompt_toolkit.completion import CompleteEvent
from prompt_toolkit.document import Document
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput

from rolecall.api.entry import open_live
from rolecall.api.session import Session
from rolecall.bus import (
    ErrorEvent,
    EventBus,
    MessageEvent,
    PassEvent,
    SessionEvent,
    StopEvent,
    StreamChunk,
    StreamEnd,
    StreamError,
    StreamStart,
    WarningEvent,
)
from rolecall.cli.options import SessionOptions
from rolecall.cli.repl import (
    COMMANDS,
    CommandError,
    CommandRunner,
    LoadRequest,
    LoopControl,
    Palette,
    Repl,
    ReplCompleter,
    ReplDisplay,
    SlashCommand,
    help_lines,
    mark_quit,
    open_live_session,
    parse_command,
    run_command_line,
)
from rolecall.cli.repl.display import StreamMode
from rolecall.memory import MemoryFiles
from rolecall.storage.document import read_session_file
from rolecall.storage.sqlite import SqliteStore
from rolecall.world.models import World
from tests.helpers import world_from
from tests.llm.openai_server import OpenAITestServer, Status

pytestmark = pytest.mark.filterwarnings("error")

CHAT = {
    "name": "duo",
    "topic": "testing the repl",
    "model": "scripted",
    "roles": [
        {
            "id": "alice",
            "name": "Alice Liddell",
            "description": "curious",
            "script": ["alice answers #{n}"],
        },
        {"id": "bob", "script": ["bob answers #{n}"]},
    ],
}
FLOW = {
    "name": "lesson",
    "topic": "testing steps",
    "model": "scripted",
    "roles": [
        {"id": "teacher", "script": ["teacher says {n}"]},
        {"id": "student", "script": ["student asks {n}"]},
    ],
    "flow": {
        "steps": [
            {"id": "intro", "speaker": "teacher", "reply_to": "none"},
            {"id": "ask", "speaker": "student"},
            {"id": "explain", "speaker": "teacher", "loop": {"to": "ask", "max": 2}},
        ],
        "stop": [{"flag": "done"}],
    },
}


# ------------------------------------------------------------------------------ parsing


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/help", SlashCommand("help")),
        ("  /HELP flag ", SlashCommand("help", ("flag",))),
        ("/exit", SlashCommand("quit")),
        ("/quit", SlashCommand("quit")),
        ("/flag done", SlashCommand("flag", ("done",))),
        ("/history", SlashCommand("history")),
        ("/history --role alice", SlashCommand("history", (), {"role": "alice"})),
        (
            "/history --search 'heat wave' --role=bob",
            SlashCommand("history", (), {"search": "heat wave", "role": "bob"}),
        ),
        ("/export MD", SlashCommand("export", ("md",))),
        (
            "/export html out.html --role alice",
            SlashCommand("export", ("html", "out.html"), {"role": "alice"}),
        ),
        ("/save", SlashCommand("save")),
        ("/save 'my file.json'", SlashCommand("save", ("my file.json",))),
        ("/model openai/gpt-4o-mini", SlashCommand("model", ("openai/gpt-4o-mini",))),
        ("/clear @alice", SlashCommand("clear", ("@alice",))),
        ("/commands", SlashCommand("help", ())),
    ],
)
def test_parse_command(line: str, expected: SlashCommand) -> None:
    assert parse_command(line) == expected


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("/flwo", "unknown command /flwo (did you mean /flow?); /help lists the commands"),
        ("/zzz", "unknown command /zzz; /help lists the commands"),
        (
            "/comands",
            "unknown command /comands (did you mean /commands?); /help lists the commands",
        ),
        ("/lists", "unknown command /lists; /help lists the commands"),
        ("/flag", "/flag: wrong number of arguments (usage: /flag NAME)"),
        ("/flag a b", "/flag: wrong number of arguments (usage: /flag NAME)"),
        ("/run now", "/run takes no arguments (usage: /run)"),
        ("/history --who x", "/history: unknown option --who (options: --role, --search)"),
        (
            "/history --role",
            "/history: --role needs a value (usage: /history [--role R] [--search S])",
        ),
        ("/export pdf", "/export: unknown format 'pdf' (one of md, html, json)"),
        ("/export", "/export: wrong number of arguments (usage: /export md|html|json [FILE])"),
        ("/save 'open", "/save: No closing quotation (usage: /save [FILE])"),
        ("/load", "/load: wrong number of arguments (usage: /load FILE)"),
        ("/", "a command starts with / followed by its name; /help lists them"),
    ],
)
def test_bad_command_lines_give_one_clear_line(line: str, message: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(line)
    assert str(err.value) == message
    assert "\n" not in str(err.value)


def test_every_command_of_the_spec_is_known_and_documented() -> None:
    spec = "help agents roles flow run next pause resume stop flag history memory clear save load export model quit"
    beyond_the_spec = {"skip", "stream", "fork", "retry", "branch", "whisper"}  # issues 16, 21, 48
    assert [c.name for c in COMMANDS if c.name not in beyond_the_spec] == spec.split()
    text = "\n".join(help_lines())
    for command in COMMANDS:
        assert command.usage in text
    assert "Ctrl-C" in text and "Ctrl-D" in text and "Esc Enter" in text
    assert help_lines("/flag") == ["/flag NAME", "  set flag NAME (for {flag: NAME} conditions)"]
    assert help_lines("exit")[0] == "/quit (also /exit)"
    with pytest.raises(CommandError, match="no command /flg"):
        help_lines("flg")


# ------------------------------------------------------------------------------ display


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make_display(
    *, color: bool = False, width: int = 40, stream: StreamMode = "full"
) -> tuple[ReplDisplay, EventBus, Clock]:
    clock = Clock()
    display = ReplDisplay(
        Palette(["alice", "bob"], color=color), width=lambda: width, clock=clock, stream=stream
    )
    bus = EventBus("s1")
    bus.subscribe(display)
    return display, bus, clock


def test_display_streams_a_message_with_header_wrapping_live_region_and_tokens() -> None:
    display, bus, clock = make_display()
    bus.publish(
        StreamStart(
            message_id="m2", sender="alice", target="human", step_id="ask", loop_iteration=1
        )
    )
    assert display.take_output() == "alice → human [step ask · loop 1]\n"
    assert display.live_lines(clock.now) == ["⠋ alice is thinking · 0.0s"]
    clock.now += 1.25
    bus.publish(
        StreamChunk(message_id="m2", sender="alice", delta="Shade is the ", output_tokens=3)
    )
    assert display.live_lines(clock.now) == ["│ Shade is the ", "⠹ alice · 1.2s · ↓3"]
    words = "cheapest measure: trees, awnings and white roofs all help\nsecond"
    bus.publish(StreamChunk(message_id="m2", sender="alice", delta=words, output_tokens=17))
    # finished lines leave the live region for the outbox, wrapped at the width (40 - 3)
    assert display.take_output() == (
        "│ Shade is the cheapest measure: trees,\n│ awnings and white roofs all help\n"
    )
    assert display.live_lines(clock.now)[0] == "│ second"
    clock.now += 1.0
    bus.publish(StreamEnd(message_id="m2", sender="alice", input_tokens=1204, output_tokens=87))
    assert display.take_output() == "│ second\n  ↑1,204 ↓87 · 2.2s\n\n"
    assert not display.active
    assert display.live_lines() == []


def test_display_shows_control_characters_in_a_reply_never_sends_them() -> None:
    """A reply holding ESC/BEL/NUL (a title change, a screen clear) is shown as ␛ ␇ ␀
    in the scrollback and the live region (both are written to the terminal raw)."""
    for stream in ("full", "preview"):
        display, bus, clock = make_display(width=80, stream=stream)
        bus.publish(StreamStart(message_id="m2", sender="alice", target="human"))
        hostile = "hi\x1b]0;pwned\x07 \x1b[2Jgone\x00 "
        bus.publish(StreamChunk(message_id="m2", sender="alice", delta=hostile, output_tokens=3))
        live = "\n".join(display.live_lines(clock.now))
        bus.publish(StreamEnd(message_id="m2", sender="alice", input_tokens=1, output_tokens=3))
        bus.publish(ErrorEvent(error="bad \x1b[31mthing", source="store"))
        out = display.take_output()
        for raw in ("\x1b", "\x07", "\x00"):
            assert raw not in out and raw not in live, (stream, out, live)
        assert "hi␛]0;pwned␇ ␛[2Jgone␀" in out + live, (stream, out, live)
        assert "bad ␛[31mthing" in out


def test_display_marks_cancellation_errors_and_session_changes() -> None:
    display, bus, _ = make_display(width=100)  # wide enough: no notice is broken here
    bus.publish(StreamStart(message_id="m3", sender="bob", target="human"))
    bus.publish(StreamChunk(message_id="m3", sender="bob", delta="half a", output_tokens=2))
    bus.publish(
        StreamError(
            message_id="m3", sender="bob", error="cancelled", partial="half a", draft_id="d1"
        )
    )
    bus.publish(SessionEvent(state="paused", reason="cancelled"))
    bus.publish(StreamStart(message_id="m3", sender="bob"))
    bus.publish(StreamError(message_id="m3", sender="bob", error="provider down", draft_id="d2"))
    bus.publish(ErrorEvent(error="provider down", source="model:x"))  # said already
    bus.publish(ErrorEvent(error="disk full", source="store"))
    bus.publish(WarningEvent(message="no agent named 'bee'"))
    bus.publish(MessageEvent(message_id="m4", sender="system", content="@human turn limit reached"))
    bus.publish(MessageEvent(message_id="m5", sender="human", content="typed at the prompt"))
    bus.publish(PassEvent(agent="bob"))
    bus.publish(SessionEvent(state="paused", reason="quit"))
    bus.publish(StopEvent(reason="flag", detail="flag done is set"))
    out = display.take_output()
    assert out.splitlines() == [
        "bob → human",
        "│ half a",
        "✗ cancelled: bob's reply is kept as an incomplete draft (d1), outside the history",
        "⏸ paused (cancelled) · /resume continues",
        "",
        "bob",
        "✗ bob's reply (d2) failed: provider down",
        "✗ disk full",
        "⚠ no agent named 'bee'",
        "",
        "⚑ system: @human turn limit reached",
        "  (bob passes the floor to you)",
        "",
        "■ finished: flag (flag done is set) · session ↑0 ↓0",
    ]
    assert "\033[" not in out


def test_display_colours_each_role_and_is_plain_without_colour() -> None:
    display, bus, _ = make_display(color=True)
    bus.publish(StreamStart(message_id="m1", sender="alice", target="bob"))
    bus.publish(StreamEnd(message_id="m1", sender="alice", input_tokens=1, output_tokens=1))
    out = display.take_output()
    assert "\033[1;36malice\033[0m → \033[1;33mbob\033[0m" in out
    assert "\033[2m" in out  # dim token line
    plain = Palette(["alice"], color=False)
    assert plain.role("alice") == "alice" and plain.red("x") == "x" and plain.bar("alice") == "│ "


def test_repl_colours_follow_no_color(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    args = make_args(tmp_path)
    assert Repl(args, store=None, patch_output=False).color is False  # type: ignore[arg-type]
    monkeypatch.delenv("NO_COLOR")
    assert Repl(args, store=None, patch_output=False).color is True  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ commands


def make_args(tmp_path: Path, **extra: Any) -> SessionOptions:
    """The options `rolecall chat` gives the REPL: the data dir under ``tmp_path``."""
    return SessionOptions(data_dir=str(tmp_path / "home"), mode="auto", **extra)


@pytest.fixture(autouse=True)
def _no_env_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ROLECALL_MODEL", raising=False)
    monkeypatch.delenv("ROLECALL_STREAM_DELAY", raising=False)
    monkeypatch.delenv("NO_COLOR", raising=False)


class Harness:
    def __init__(
        self, session: Session, store: SqliteStore, memory: MemoryFiles, cwd: Path
    ) -> None:
        self.session = session
        self.store = store
        self.memory = memory
        self.lines: list[str] = []
        self.runner = CommandRunner(
            session, echo=self.lines.append, store=store, memory=memory, cwd=cwd, data_dir=cwd
        )

    async def run(self, line: str) -> LoopControl | LoadRequest:
        self.lines.clear()
        return await self.runner.run_line(line)

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


@pytest.fixture
async def harness_for(tmp_path: Path) -> AsyncIterator[Callable[[dict[str, Any]], Any]]:
    """Opens a stored session of a world (no display), yields a Harness factory."""
    from contextlib import AsyncExitStack

    async with AsyncExitStack() as stack:
        store = await stack.enter_async_context(SqliteStore(tmp_path / "home" / "rolecall.db"))

        async def make(data: dict[str, Any]) -> Harness:
            world = world_from(data)
            session = await stack.enter_async_context(
                open_live_session(make_args(tmp_path), world, store)
            )
            memory = MemoryFiles.in_data_dir(tmp_path / "home")
            return Harness(session, store, memory, tmp_path)

        yield make


@pytest.mark.anyio
async def test_information_commands(harness_for: Callable[[dict[str, Any]], Any]) -> None:
    h: Harness = await harness_for(CHAT)
    await h.session.say("hello @alice")
    await h.session.say("everyone: heat?")
    assert await h.run("/agents") is LoopControl.CONTINUE
    assert "@alice" in h.text and "Alice Liddell — curious" in h.text
    assert "scripted · 2 turns · 1/5 calls since you spoke · 5 memory entries" in h.text
    assert "scripted · 1 turn · 1/5 calls since you spoke" in h.text
    await h.run("/history")
    assert "m1 human: hello @alice" not in h.text  # a header then the text
    assert h.lines[0].startswith("m1 human")
    assert "│ alice answers #1" in h.text and "5 messages" in h.text
    await h.run("/history --role ALICE")
    assert (
        "alice answers #1" in h.text
        and "bob answers" not in h.text
        and "2 messages by alice" in h.text
    )
    await h.run("/history --search '#2'")
    assert "alice answers #2" in h.text and "1 message containing '#2'" in h.text
    await h.run("/history --role nobody")
    assert h.text == "no agent 'nobody' in this world (agents: alice, bob)"
    await h.run("/memory bob")
    assert h.lines[0].startswith("memory of bob: 5 entries (")
    assert "user(human): hello @alice" in h.text and "assistant(bob): bob answers #1" in h.text
    await h.run("/flow")
    assert h.text == "this world has no flow: it is a chat (type a message, @agent for one)"
    await h.run("/roles")
    assert "role library" in h.text and "teacher" in h.text
    await h.run("/model")
    assert h.text.splitlines() == ["model override: none", "  alice: scripted", "  bob: scripted"]
    await h.run("/help model")
    assert h.lines[0].startswith("/model [MODEL]")
    await h.run("/bogus")
    assert h.text.startswith("unknown command /bogus")


@pytest.mark.anyio
async def test_flow_control_commands_inline(harness_for: Callable[[dict[str, Any]], Any]) -> None:
    h: Harness = await harness_for(FLOW)
    s = h.session
    await h.run("/flow")
    assert "▶ intro" in h.text and "next: intro · 0 steps executed" in h.text
    await h.run("/next")
    assert [m.step_id for m in s.transcript] == ["intro"]
    await h.run("/next")
    await h.run("/flow")
    assert "✓ intro" in h.text and "▶ explain" in h.text and "loop → ask (0/2)" in h.text
    assert "stop when {flag: done}" in h.text
    await h.run("/pause")
    assert s.status.state == "paused" and s.status.pause_reason == "manual"
    await h.run("/pause")
    assert h.text == "already paused (manual)"
    await h.run("/flag done")
    assert h.text == "flag done set" and "done" in s.flags
    await h.run("/resume")  # runs inline (no spawner): the stop condition holds after one turn
    assert s.finished and s.result.stop_reason == "flag"
    await h.run("/run")
    assert h.text == "the session has finished (flag); /load another one"
    await h.run("/next")
    assert "nothing to step" in h.text
    await h.run("/stop")
    assert h.text == "already finished (flag)"


@pytest.mark.anyio
async def test_stop_run_model_and_chat_only_messages(
    harness_for: Callable[[dict[str, Any]], Any],
) -> None:
    h: Harness = await harness_for(CHAT)
    await h.run("/run")
    assert h.text == "this world has no flow to run: type a message to talk to the agents"
    await h.run("/next")
    assert h.text == "nothing to step: this world has no flow and no reply is due"
    await h.run("/resume")
    assert h.text == "nothing to resume: no reply is due; type a message"
    await h.run("/model offline")
    assert h.session.model_override == "offline"
    await h.run("/model default")
    assert h.session.model_override is None
    await h.run("/stop")
    assert h.session.finished and h.session.result.stop_reason == "manual"


@pytest.mark.anyio
async def test_clear_save_export_and_load(
    harness_for: Callable[[dict[str, Any]], Any], tmp_path: Path
) -> None:
    h: Harness = await harness_for(CHAT)
    s = h.session
    await s.say("hello @alice")
    await h.run("/clear @Alice")
    assert h.text.startswith("memory of alice cleared; the old file is archived as alice.")
    assert s.status.memory_start["alice"] == 2 and "alice" not in s.status.turn_counts
    assert h.memory.read(s.session_id, "alice") == []
    await h.run("/clear carol")
    assert h.text.startswith("no agent 'carol'")

    await h.run("/save")
    saved = tmp_path / f"{s.session_id}.json"
    assert h.text == f"saved 2 messages to {saved}"
    doc = read_session_file(saved)
    assert [m.content for m in doc.messages] == ["hello @alice", "alice answers #1"]

    await h.run("/export json copy.json")
    assert json.loads((tmp_path / "copy.json").read_text())["session_id"] == s.session_id
    await h.run("/export json --role alice")
    assert "--role/--search are for md and html" in h.text
    await h.run("/export md")
    md = tmp_path / f"{s.session_id}.md"
    assert h.text == f"exported md to {md}" and "alice answers #1" in md.read_text()
    await h.run("/export html page.html --role alice")
    assert "alice answers #1" in (tmp_path / "page.html").read_text()

    result = await h.run(f"/load {saved}")
    assert "holds this very session" in h.text and result is LoopControl.CONTINUE
    other: Harness = await harness_for(FLOW)
    await other.run("/next")
    await other.run("/save other.json")
    result = await h.run("/load other.json")
    assert isinstance(result, LoadRequest) and result.doc.session_id == other.session.session_id
    result = await h.run(f"/load {other.session.session_id}")  # a stored id works too
    assert isinstance(result, LoadRequest) and result.source.startswith("the store")
    await h.run("/load missing.json")
    assert "missing.json" in h.text
    (tmp_path / "latin1.json").write_bytes(b'{"format": "caf\xe9"}')
    assert await h.run("/load latin1.json") is LoopControl.CONTINUE
    assert h.text.endswith(
        "latin1.json: not a session file (not UTF-8 text: byte 0xe9 at line 1, column 16)"
    )


@pytest.mark.anyio
async def test_load_of_a_file_whose_session_is_stored_as_resume_does(
    harness_for: Callable[[dict[str, Any]], Any], tmp_path: Path
) -> None:
    """/load FILE of a session the store holds: the stored copy when it is as new or
    newer (said, as `rolecall resume FILE` says it), refused when the file is ahead."""
    h: Harness = await harness_for(CHAT)
    other: Harness = await harness_for(FLOW)
    sid = other.session.session_id
    await other.run("/next")
    await other.run("/save older.json")
    await other.run("/next")
    await other.run("/save newer.json")
    await other.run("/next")  # the store is ahead of both files now

    result = await h.run("/load older.json")
    assert isinstance(result, LoadRequest) and result.source == str(tmp_path / "older.json")
    assert h.text == (
        f"session {sid} is already stored here (3 messages; {tmp_path / 'older.json'} has "
        "1 message): resuming the stored one"
    )
    assert len(result.doc.messages) == 3 and result.doc.last_seq == other.session.bus.last_seq

    # a data directory holding an older copy than the file: the two may differ
    async with SqliteStore(tmp_path / "elsewhere" / "rolecall.db") as elsewhere:
        await elsewhere.import_document(read_session_file(tmp_path / "older.json"))
        runner = CommandRunner(h.session, echo=h.lines.append, store=elsewhere, cwd=tmp_path)
        h.lines.clear()
        assert await runner.run_line("/load newer.json") is LoopControl.CONTINUE
        assert h.text == (
            f"{tmp_path / 'newer.json'} holds 2 messages of session {sid}, but 1 of them "
            "are stored in this data directory and they may differ: resume the file with "
            "another --data-dir, or resume the stored session by id"
        )
        h.lines.clear()
        result = await runner.run_line("/load older.json")  # as many: the stored copy
        assert isinstance(result, LoadRequest) and "resuming the stored one" in h.text


@pytest.mark.anyio
async def test_what_a_command_changes_is_stored_at_once(
    harness_for: Callable[[dict[str, Any]], Any],
) -> None:
    h: Harness = await harness_for(FLOW)
    sid = h.session.session_id
    await h.run("/next")
    await h.run("/pause")
    assert (await h.store.load(sid)).state.pause_reason == "manual"
    await h.run("/flag later")
    assert "later" in (await h.store.load(sid)).state.flags
    await h.run("/stop")
    doc = await h.store.load(sid)
    assert (doc.state.state, doc.state.stop_reason) == ("finished", "manual")
    assert doc.events[-1]["type"] == "stop"


@pytest.mark.anyio
async def test_a_write_failure_in_a_session_switched_to_names_that_session() -> None:
    """The REPL opens a session it switches to inside the first one's: the message of a
    write failure in the second ("`rolecall resume ID` continues it") names the second."""
    from rolecall.api.opening import Opening
    from rolecall.errors import StorageError
    from rolecall.storage.in_memory import InMemoryStore
    from rolecall.storage.port import TurnBatch

    class Failing(InMemoryStore):
        def __init__(self) -> None:
            super().__init__()
            self.failing: set[str] = set()

        async def commit(self, batch: TurnBatch) -> None:
            if batch.session_id in self.failing:
                raise StorageError("disk full")
            await super().commit(batch)

    store = Failing()
    opened: list[Session] = []

    async def switch() -> None:
        async with open_live(world_from(FLOW), Opening(store=store), mode="step") as first:
            opened.append(first)
            await first.step()
            async with open_live(world_from(FLOW), Opening(store=store), mode="step") as second:
                opened.append(second)
                store.failing.add(second.session_id)
                await second.step()

    with pytest.raises(StorageError) as caught:
        await switch()
    first, second = opened
    assert caught.value.session_id == second.session_id != first.session_id
    assert (second.result.state, second.result.pause_reason) == ("paused", "error")
    assert first.result.state == "running"  # not paused by the other session's failure
    assert (await store.load(first.session_id)).state.state == "running"


@pytest.mark.anyio
async def test_piped_compatible_command_lines(harness_for: Callable[[dict[str, Any]], Any]) -> None:
    import io

    h: Harness = await harness_for(FLOW)
    out = io.StringIO()
    assert await run_command_line(h.session, "/next", out=out) is True
    assert len(h.session.transcript) == 1
    assert await run_command_line(h.session, "/flag", out=out) is True
    assert await run_command_line(h.session, "/nope", out=out) is True
    assert await run_command_line(h.session, "/load x.json", out=out) is True
    assert await run_command_line(h.session, "/quit", out=out) is False
    assert await run_command_line(h.session, "/exit", out=out) is False
    lines = out.getvalue().splitlines()
    assert lines[0] == "/flag: wrong number of arguments (usage: /flag NAME)"
    assert lines[1].startswith("unknown command /nope")


@pytest.mark.anyio
async def test_mark_quit_keeps_the_session_paused_with_the_repls_mode() -> None:
    from rolecall.api.opening import Opening
    from rolecall.storage.in_memory import InMemoryStore

    store = InMemoryStore()
    async with open_live(world_from(CHAT), Opening(store=store), mode="step") as session:
        await session.begin()
        mark_quit(session, "step")
        await session.save()
        stored = await store.load(session.session_id)
        assert (stored.state.state, stored.state.pause_reason) == ("paused", "quit")
        assert stored.state.extra["repl"] == {"mode": "step"}
        await session.step()  # nothing is due in a chat: running again, idle
        session.pause("cancelled", now=True)
        mark_quit(session)  # already paused: the reason becomes quit, said by an event
        await session.save()
        stored = await store.load(session.session_id)
        assert (stored.state.pause_reason, stored.state.extra["repl"]) == ("quit", {"mode": "auto"})
        assert [(e["type"], e.get("reason")) for e in stored.events[-2:]] == [
            ("session", "cancelled"),
            ("session", "quit"),
        ]
        session.stop()
        mark_quit(session)
        assert session.finished and session.result.stop_reason == "manual"


# ------------------------------------------------------------------------------ completion


def complete(session: Session, text: str) -> list[tuple[str, str, str]]:
    completer = ReplCompleter(lambda: session.world, lambda: session).for_prompt()
    return [
        (c.text, c.display_text, c.display_meta_text)
        for c in completer.get_completions(Document(text, len(text)), CompleteEvent())
    ]


@pytest.mark.anyio
async def test_completion_of_mentions_commands_and_arguments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with (
        open_live(world_from(CHAT)) as chat_session,
        open_live(world_from(FLOW)) as flow_session,
    ):
        check_completion(chat_session, flow_session, tmp_path, monkeypatch)


def check_completion(
    chat_session: Session, flow_session: Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert complete(chat_session, "hi @al") == [
        ("alice", "@alice", "Alice Liddell — curious"),
        ("all", "@all", "every agent answers"),
    ]
    assert complete(chat_session, "@B") == [("bob", "@bob", "Bob")]
    assert complete(chat_session, "mail bob@al") == []  # an e-mail address mentions nobody
    assert complete(chat_session, "no mention") == []
    helps = complete(chat_session, "/he")
    assert helps == [("/help", "/help [COMMAND]", "list the commands and keys, or explain one")]
    assert [c[0] for c in complete(chat_session, "/")] == ["/" + c.name for c in COMMANDS]
    assert [c[0] for c in complete(chat_session, "/memory ")] == ["alice", "bob"]
    assert [c[0] for c in complete(chat_session, "/clear b")] == ["bob"]
    assert [c[0] for c in complete(chat_session, "/history --role a")] == ["alice"]
    assert [c[0] for c in complete(chat_session, "/history --")] == ["--role", "--search"]
    assert [c[0] for c in complete(chat_session, "/export ")] == ["md", "html", "json"]
    assert [c[0] for c in complete(flow_session, "/flag ")] == ["done"]
    assert [c[0] for c in complete(chat_session, "/model ")] == ["default", "scripted"]
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saved.json").write_text("{}")
    assert [c[0] for c in complete(chat_session, "/load sa")] == ["ved.json"]


# ------------------------------------------------------------------------------ the prompt


class PromptDriver:
    """Runs a Repl on a pipe input; type() sends keys, wait_for() polls a condition."""

    def __init__(self, repl: Repl, pipe: Any, printed: list[str]) -> None:
        self.repl = repl
        self.pipe = pipe
        self.printed = printed

    def type(self, keys: str) -> None:
        self.pipe.send_text(keys)

    @property
    def screen(self) -> str:
        return "".join(self.printed)

    async def wait_for(self, check: Callable[[], bool], what: str, limit: float = 10) -> None:
        """Poll ``check`` (the REPL runs in the same event loop) for at most ``limit`` s."""
        with anyio.fail_after(limit):
            while not check():  # noqa: ASYNC110 - polling state that has no event to wait on
                await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_the_prompt_sends_messages_runs_commands_and_quits_keeping_the_session(
    tmp_path: Path,
) -> None:
    args = make_args(tmp_path)
    world = world_from(CHAT)
    printed: list[str] = []
    async with SqliteStore(tmp_path / "home" / "rolecall.db") as store:
        with create_pipe_input() as pipe:
            repl = Repl(
                args,
                store,
                input=pipe,
                output=DummyOutput(),
                color=False,
                handle_signals=False,
                patch_output=False,
                sink=printed.append,
                cwd=tmp_path,
                history_file=tmp_path / "history",
            )
            d = PromptDriver(repl, pipe, printed)
            async with (
                open_live_session(args, world, store) as session,
                anyio.create_task_group() as tg,
            ):
                result: list[Session] = []

                async def serve() -> None:
                    result.append(await repl.run(session))

                tg.start_soon(serve)
                await d.wait_for(lambda: "rolecall · duo" in d.screen, "banner")
                assert repl.prompt is not None
                buffer = repl.prompt.default_buffer
                d.type("hello @al")
                await d.wait_for(lambda: buffer.complete_state is not None, "completion menu")
                d.type("\t")  # Tab picks the first completion: @alice
                await d.wait_for(lambda: buffer.text == "hello @alice", "completed")
                d.type("\r")  # Enter accepts the completion, a second Enter sends
                await d.wait_for(lambda: buffer.complete_state is None, "menu closed")
                assert not session.transcript
                d.type("\r")
                await d.wait_for(lambda: "alice answers #1" in d.screen, "reply")
                assert session.transcript[0].content == "hello @alice"
                d.type("two\\\rlines\r")  # a trailing backslash continues the line
                await d.wait_for(lambda: "bob answers #1" in d.screen, "replies")
                assert session.transcript[-3].content == "two\nlines"
                d.type("/flag x\r/nosuch\r")
                await d.wait_for(lambda: "unknown command /nosuch" in d.screen, "error")
                assert "flag x set" in d.screen and "x" in session.flags
                await d.wait_for(lambda: repl.jobs == 0, "replies done")
                d.type("\x03")  # Ctrl-C at an empty prompt, nothing running: armed
                await d.wait_for(lambda: "press Ctrl-C again" in d.screen, "armed")
                d.type("\x03")  # twice: quit
                await d.wait_for(lambda: bool(result), "quit")
            screen = d.screen
            assert "alice → human" in screen and "↑" in screen
            assert f"session {session.session_id} kept (paused)" in screen
            assert (session.result.state, session.result.pause_reason) == ("paused", "quit")
            stored = await store.load(session.session_id)
            assert (stored.state.state, stored.state.pause_reason) == ("paused", "quit")
            assert "hello @alice" in (tmp_path / "history").read_text()


@pytest.mark.anyio
async def test_ctrl_c_cancels_a_streaming_generation_and_ctrl_d_quits(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLECALL_STREAM_DELAY", "0.01")
    args = make_args(tmp_path)
    world = world_from({**CHAT, "roles": [{"id": "alice", "script": [" ".join(["word"] * 120)]}]})
    printed: list[str] = []
    async with SqliteStore(tmp_path / "home" / "rolecall.db") as store:
        with create_pipe_input() as pipe:
            repl = Repl(
                args,
                store,
                input=pipe,
                output=DummyOutput(),
                color=False,
                handle_signals=False,
                patch_output=False,
                sink=printed.append,
                history_file=tmp_path / "history",
            )
            d = PromptDriver(repl, pipe, printed)
            async with (
                open_live_session(args, world, store) as session,
                anyio.create_task_group() as tg,
            ):
                done = anyio.Event()

                async def serve() -> None:
                    await repl.run(session)
                    done.set()

                tg.start_soon(serve)
                await d.wait_for(lambda: repl.display is not None, "started")
                d.type("go\r")
                await d.wait_for(
                    lambda: (
                        session.generating
                        and repl.display is not None
                        and repl.display.live_out_tokens() > 2
                    ),
                    "streaming",
                )
                d.type("\x03")
                await d.wait_for(lambda: "kept as an incomplete draft" in d.screen, "cancelled")
                await d.wait_for(lambda: repl.jobs == 0, "idle")
                assert (session.result.state, session.result.pause_reason) == (
                    "paused",
                    "cancelled",
                )
                (draft,) = session.drafts
                assert draft.reason == "cancelled" and draft.content.startswith("word word")
                assert "paused (cancelled)" in d.screen
                d.type("again\r")  # a new message: the reply still due comes first, then this one
                await d.wait_for(lambda: len(session.transcript) == 4, "both answered")
                await d.wait_for(lambda: repl.jobs == 0, "idle again")
                senders = [m.sender for m in session.transcript]
                assert senders == ["human", "human", "alice", "alice"]
                d.type("\x04")  # Ctrl-D
                await done.wait()
            assert (session.result.state, session.result.pause_reason) == ("paused", "quit")


@pytest.fixture
def provider_down(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[OpenAITestServer, World]]:
    """An OpenAI-compatible provider on loopback that answers every call with a 503
    ("provider down"), and a chat world whose roles call it (no retries)."""
    monkeypatch.setenv("REPL_TEST_KEY", "x")
    with OpenAITestServer() as server:
        server.queue(*[Status(503, "provider down")] * 4)
        settings = {
            "client": "http",
            "api_base": server.base_url,
            "api_key_env": "REPL_TEST_KEY",
            "retries": 0,
        }
        world = world_from(
            {
                **CHAT,
                "model": "openai/gpt-4o-mini",
                "settings": settings,
                "roles": [{"id": "alice"}, {"id": "bob"}],
            }
        )
        yield server, world


@pytest.mark.anyio
async def test_a_failing_model_pauses_once_instead_of_retrying_forever(
    tmp_path: Path, provider_down: tuple[OpenAITestServer, World]
) -> None:
    server, world = provider_down
    args = make_args(tmp_path)
    printed: list[str] = []
    async with SqliteStore(tmp_path / "home" / "rolecall.db") as store:
        with create_pipe_input() as pipe:
            repl = Repl(
                args,
                store,
                input=pipe,
                output=DummyOutput(),
                color=False,
                handle_signals=False,
                patch_output=False,
                sink=printed.append,
                history_file=tmp_path / "history",
            )
            d = PromptDriver(repl, pipe, printed)
            async with (
                open_live_session(args, world, store) as session,
                anyio.create_task_group() as tg,
            ):
                done = anyio.Event()

                async def serve() -> None:
                    await repl.run(session)
                    done.set()

                tg.start_soon(serve)
                await d.wait_for(lambda: repl.display is not None, "started")
                d.type("anyone?\r")
                await d.wait_for(lambda: "paused (error)" in d.screen, "paused")
                await d.wait_for(lambda: repl.jobs == 0, "idle")
                assert len(server.requests) == 1
                assert d.screen.count("✗ alice's reply (d1) failed: ") == 1, d.screen
                assert "provider down" in d.screen
                assert [p.agent for p in session.status.pending] == ["alice", "bob"]  # still owed
                d.type("\x04")
                await done.wait()
            assert (session.result.state, session.result.pause_reason) == ("paused", "quit")


@pytest.mark.anyio
async def test_pause_during_the_last_chat_reply_does_not_swallow_the_next_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLECALL_STREAM_DELAY", "0.01")
    args = make_args(tmp_path)
    world = world_from({**CHAT, "roles": [{"id": "alice", "script": [" ".join(["word"] * 40)]}]})
    printed: list[str] = []
    async with SqliteStore(tmp_path / "home" / "rolecall.db") as store:
        with create_pipe_input() as pipe:
            repl = Repl(
                args,
                store,
                input=pipe,
                output=DummyOutput(),
                color=False,
                handle_signals=False,
                patch_output=False,
                sink=printed.append,
                history_file=tmp_path / "history",
            )
            d = PromptDriver(repl, pipe, printed)
            async with (
                open_live_session(args, world, store) as session,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(repl.run, session)
                await d.wait_for(lambda: repl.display is not None, "started")
                d.type("hi\r")
                await d.wait_for(lambda: session.generating, "streaming")
                d.type("/pause\r")
                await d.wait_for(lambda: len(session.transcript) == 2, "reply done")
                await d.wait_for(lambda: repl.jobs == 0, "idle")
                d.type("again\r")
                try:
                    await d.wait_for(lambda: len(session.transcript) == 4, "answered", 3)
                finally:
                    d.type("\x04")


@pytest.mark.anyio
async def test_piped_input_ending_after_a_failed_reply_does_not_try_it_again(
    tmp_path: Path, provider_down: tuple[OpenAITestServer, World]
) -> None:
    """The reply failed and paused the session: end of input leaves it paused (error),
    with one call to the provider and one draft, as the REPL does."""
    import os

    from rolecall.cli.piped import run_piped

    server, world = provider_down
    args = make_args(tmp_path)
    async with (
        SqliteStore(tmp_path / "home" / "rolecall.db") as store,
        open_live_session(args, world, store) as session,
    ):
        read, write = os.pipe()
        os.write(write, b"anyone?\n/agents\n")
        os.close(write)
        with os.fdopen(read, encoding="utf-8") as stream:
            await run_piped(session, stream)
        assert len(server.requests) == 1
        assert (session.result.state, session.result.pause_reason) == ("paused", "error")
        assert len(session.drafts) == 1


@pytest.mark.anyio
async def test_load_waits_for_the_turn_and_export_makes_its_folders(
    harness_for: Callable[[dict[str, Any]], Any], tmp_path: Path
) -> None:
    h: Harness = await harness_for(CHAT)
    await h.session.say("hello @alice")
    await h.run("/export md out/sub/chat.md")
    assert "alice answers #1" in (tmp_path / "out" / "sub" / "chat.md").read_text()
    await h.run("/save other.json")
    busy = CommandRunner(
        h.session,
        echo=h.lines.append,
        store=h.store,
        memory=h.memory,
        cwd=tmp_path,
        busy=lambda: True,
    )
    h.lines.clear()
    assert await busy.run_line("/load other.json") is LoopControl.CONTINUE
    assert h.text == "a turn is running: /pause (or wait for it), then /load"


@pytest.mark.anyio
async def test_a_paused_flow_answers_an_interjection_and_stays_paused() -> None:
    async with open_live(world_from(FLOW), mode="step") as session:
        assert await session.step()  # teacher's intro
        session.pause()
        assert (session.result.state, session.result.pause_reason) == ("paused", "manual")
        await session.say("@student what is this about?")
        assert [m.sender for m in session.transcript] == ["teacher", "human", "student"]
        assert (session.result.state, session.result.pause_reason) == ("paused", "manual")


def test_parse_whisper_takes_the_names_then_the_text_as_typed() -> None:
    from rolecall.cli.repl.commands import parse_whisper

    assert parse_whisper("@ann @bob,  the  code: x") == (["ann", "bob"], "the  code: x")
    assert parse_whisper("@ann hi") == (["ann"], "hi")
    with pytest.raises(CommandError, match="name who hears it first"):
        parse_whisper("hello @ann")
    with pytest.raises(CommandError, match="nothing to say after the names"):
        parse_whisper("@ann @bob")
    with pytest.raises(CommandError, match="@all is not an agent"):
        parse_whisper("@all hello")
