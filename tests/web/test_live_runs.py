"""The web view's sessions in process (no HTTP): what a session the server runs is doing."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from rolecall.storage.sqlite import SqliteStore
from rolecall.web.runs import LiveRuns
from tests.helpers import world_from

pytestmark = pytest.mark.anyio

CHAT = {
    "name": "talk",
    "model": "scripted",
    "roles": [{"id": "alice", "script": ["alice answers {n} " + "word " * 30]}],
}


async def test_a_second_message_keeps_the_session_busy_until_both_are_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ROLECALL_STREAM_DELAY", "0.005")  # each reply takes a while
    async with SqliteStore(tmp_path / "rolecall.db") as store, anyio.create_task_group() as tg:
        runs = LiveRuns(tg, tmp_path, store)
        run = await runs.start(world_from(CHAT))
        answering = anyio.Event()
        run.session.bus.subscribe(lambda _: answering.set(), "sse", types=("start",))
        runs.say(run, "@alice one")
        with anyio.fail_after(20):
            await answering.wait()  # alice answers the first
        runs.say(run, "@alice two")  # meanwhile
        seen: list[bool] = []
        with anyio.fail_after(20):
            while len(run.session.transcript) < 4:
                seen.append(run.busy)
                await anyio.sleep(0.01)
            await run.idle.wait()
        assert all(seen)  # never at rest while a message was still being answered
        senders = [m.sender for m in run.session.transcript]
        assert sorted(senders) == ["alice", "alice", "human", "human"]
        runs.close_all()
