"""50 sessions at once over one data directory, in one process.

The sessions are opened as a program opens them, ``rolecall.open_session`` with one open
``SqliteStore`` shared by all and the data directory for their memory files, and run in
one anyio task group: flows and chats mixed, some flows
with a model whose stream breaks once (the session pauses with ``error`` and is run
again). Afterwards the store holds, per session, exactly the messages of the same world
run alone and undisturbed, events gap-free, and every memory file agrees with the store.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.errors import ProviderUnavailable, StorageError
from rolecall.llm.protocol import ChatModel
from rolecall.llm.scripted import ScriptedModel
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta
from rolecall.memory import MemoryFiles
from rolecall.paths import db_path
from rolecall.storage import writer as store_writer
from rolecall.storage.sqlite import SqliteStore
from rolecall.world.loader import parse_world
from rolecall.world.models import World
from tests.faults import assert_intact, session_ids, stored

pytestmark = pytest.mark.anyio

SESSIONS = 50

FLOW = parse_world("""\
name: relay
topic: concurrency
model: scripted
roles:
  - {id: a, script: ["a{n} starts round {n} at m{turn}"]}
  - {id: b, model: flaky, script: ["b{n} answers {target} at m{turn}"]}
  - {id: c, script: ["c{n} sums up round {n}"]}
flow:
  steps:
    - {id: ask, speaker: a}
    - {id: answer, speaker: b}
    - {id: wrap, speaker: c, loop: {to: ask, max: 3}}
""").world

CHAT = parse_world("""\
name: chatroom
model: scripted
settings: {turn_limit: 2}
roles:
  - {id: a, script: ["@b what does b think of round {n}?"]}
  - {id: b, script: ["@c over to c after round {n}"]}
  - {id: c, script: ["@a back to a, round {n}", "I pass the floor <world>pass</world>"]}
""").world
HUMAN = ["hello everyone", "@a start a chain", "@all quick round", "@zed nobody is called zed"]


class FlakyModel:
    """The scripted model, except that its ``fail_on``-th call breaks after one word."""

    name = "flaky"

    def __init__(self, fail_on: int) -> None:
        self.fail_on = fail_on
        self.calls = 0
        self.inner = ScriptedModel(delay=0.001)

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        breaks = self.calls == self.fail_on
        async for item in self.inner.stream(request):
            yield item
            if breaks and isinstance(item, TextDelta):
                raise ProviderUnavailable("flaky: the stream broke", model="flaky")


def new_session(
    world: World,
    sid: str,
    *,
    fail_on: int | None,
    store: SqliteStore | None = None,
    home: Path | None = None,
) -> AbstractAsyncContextManager[rolecall.Session]:
    """Session ``sid`` of ``world`` opened on ``store`` with its memory files in ``home``
    (neither: in memory); its ``flaky`` role's stream breaks at call ``fail_on``."""
    models: dict[str, ChatModel] = {
        "scripted": ScriptedModel(delay=0.001),
        "flaky": FlakyModel(fail_on) if fail_on else ScriptedModel(delay=0.001),
    }
    where: dict[str, Any] = {} if store is None else {"store": store, "data_dir": home}
    return rolecall.open_session(world, session_id=sid, models=models, **where)


async def drive(session: rolecall.Session) -> int:
    """Run a flow to its end (again after each error pause) or play the chat; the pauses."""
    if session.chat:
        for line in HUMAN:
            await session.say(line)
        return 0
    pauses = 0
    await session.run()
    while session.status.state == "paused":
        assert session.status.pause_reason == "error"
        pauses += 1
        await session.run()
    assert session.status.stop_reason == "flow_end"
    return pauses


async def alone(world: World) -> list[tuple[str, str, str]]:
    """What the world says when run by itself, with nothing stored."""
    async with new_session(world, "reference", fail_on=None) as session:
        await drive(session)
    return [(m.id, m.sender, m.content) for m in session.transcript]


def plan(i: int) -> tuple[World, int | None]:
    """Session i: chats and flows alternate; some flows break once, at their 1st-3rd call."""
    if i % 2:
        return CHAT, None
    return FLOW, (1 + (i // 6) % 3 if i % 3 == 0 else None)


async def test_fifty_sessions_at_once_keep_every_message_once(tmp_path: Path) -> None:
    expected = {"relay": await alone(FLOW), "chatroom": await alone(CHAT)}
    assert len(expected["chatroom"]) > len(HUMAN)  # the agents did answer
    home = tmp_path / "home"
    memory = MemoryFiles.in_data_dir(home)
    sessions: dict[str, rolecall.Session] = {}
    pauses: dict[str, int] = {}
    running = [0, 0]  # now, most at once

    async with SqliteStore(db_path(home)) as store:

        async def one(i: int) -> None:
            world, fail_on = plan(i)
            sid = f"conc-{i:02d}"
            async with new_session(world, sid, fail_on=fail_on, store=store, home=home) as session:
                sessions[session.session_id] = session
                running[0] += 1
                running[1] = max(running)
                pauses[session.session_id] = await drive(session)
                running[0] -= 1

        with anyio.fail_after(50):
            async with anyio.create_task_group() as tg:
                for i in range(SESSIONS):
                    tg.start_soon(one, i)

    assert running[1] > SESSIONS // 2  # they did overlap
    assert sorted(session_ids(home)) == sorted(sessions)
    broken = 0
    for sid, session in sessions.items():
        s = stored(home, sid)
        assert_intact(s)
        assert [(m["id"], m["sender"], m["content"]) for m in s.messages] == expected[
            session.world.name
        ], sid
        world, fail_on = plan(int(sid.split("-")[1]))
        assert pauses[sid] == (1 if fail_on else 0), sid
        assert [d["reason"] for d in s.drafts] == (["error"] if fail_on else []), sid
        broken += bool(fail_on)
        for agent in world.role_ids:
            assert memory_view(memory.read(sid, agent)) == [
                expected_entry(m, agent) for m in s.messages
            ], (sid, agent)
    assert broken >= 5


def memory_view(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(e["message_id"], e["role"], e["name"], e["content"]) for e in entries]


def expected_entry(message: dict[str, Any], agent: str) -> tuple[Any, ...]:
    if message["kind"] == "system":
        role = "system"
    elif message["sender"] == agent:
        role = "assistant"
    else:
        role = "user"
    return (message["id"], role, message["sender"], message["content"])


async def test_a_failed_memory_write_leaves_the_store_in_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_batch = store_writer.write_batch

    def slow_write(conn: Any, batch: Any) -> None:
        time.sleep(1.0)  # on the database thread: still writing when memory fails
        write_batch(conn, batch)

    async def failing_memory(self: MemoryFiles, session_id: str, *args: Any) -> None:
        await anyio.sleep(0.01)
        message = args[1]
        raise StorageError(f"cannot append to memory file for {message.id}: No space left")

    monkeypatch.setattr(MemoryFiles, "record", failing_memory)  # a full disk, for memory
    home = tmp_path / "home"
    async with (
        SqliteStore(db_path(home)) as store,
        new_session(CHAT, "desync", fail_on=None, store=store, home=home) as session,
    ):
        monkeypatch.setattr(store_writer, "write_batch", slow_write)
        with pytest.raises(StorageError, match="memory file"):
            await session.say("hello everyone")
        monkeypatch.setattr(store_writer, "write_batch", write_batch)
    # leaving the session stored what it owed

    s = stored(home, "desync")
    assert_intact(s)
    assert s.contents == ["hello everyone"]
