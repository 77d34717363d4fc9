"""The members of rolecall.Session that the REPL drives a session with (docs/api.md): the
drafts, what is owed (settle), a pause withdrawn or made at once, a session paused with
a note, an agent's memory forgotten, the replies due dropped."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

import rolecall
from rolecall.llm.types import GenerationRequest
from rolecall.testing import FunctionModel
from tests.api.test_session_members import CHAT, numbered, pair

pytestmark = pytest.mark.anyio


def logs(session: rolecall.Session) -> list[str]:
    return [e.event.message for e in session.bus.history if isinstance(e.event, rolecall.LogEvent)]


async def test_drop_replies_says_who_would_have_answered_and_stores_it(tmp_path: Path) -> None:
    async with rolecall.open_session(CHAT, data_dir=tmp_path) as s:
        await s.say("hello")  # both answer
        s.request_reply("nurse", "m1")
        assert s.drop_replies() == ["nurse"]
        assert s.status.pending == [] and logs(s) == ["dropped 1 replies due"]
        assert s.drop_replies() == [] and logs(s) == ["dropped 1 replies due"]  # nothing due
        await s.save()
        await s.run()  # nothing is owed any more
        assert len(s.transcript) == 3
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.status.pending == []


async def test_forget_restarts_an_agents_memory_here(tmp_path: Path) -> None:
    model = FunctionModel(numbered)
    async with rolecall.open_session(CHAT, data_dir=tmp_path, models={"offline": model}) as s:
        await s.say("@doc hello")
        assert s.status.turn_counts == {"doc": 1}
        s.forget("doc")
        assert s.status.memory_start == {"doc": 2} and s.status.turn_counts == {}
        await s.say("@doc again")
        prompt = " ".join(m.content for m in model.requests[-1].messages)
        assert "again" in prompt and "hello" not in prompt  # it starts after what it forgot
        with pytest.raises(rolecall.UsageError, match=r"no role 'eve' \(roles: doc, nurse\)"):
            s.forget("eve")
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.status.memory_start == {"doc": 2}


async def test_pause_now_pauses_or_renames_the_pause_and_annotate_keeps_a_note(
    tmp_path: Path,
) -> None:
    async with rolecall.open_session(CHAT, data_dir=tmp_path, mode="step") as s:
        await s.say("hello")
        s.annotate("my_app", {"tab": 3})
        s.pause("later", now=True)  # running, idle: paused at once
        assert (s.result.state, s.result.pause_reason) == ("paused", "later")
        s.pause("manual")  # already paused: a pause after the turn keeps the reason
        assert s.result.pause_reason == "later"
        s.pause("quit", now=True)  # already paused: the reason becomes quit, said by an event
        paused = [
            e.event.reason
            for e in s.bus.history
            if isinstance(e.event, rolecall.SessionEvent) and e.event.state == "paused"
        ]
        assert paused == ["later", "quit"] and s.status.extra["my_app"] == {"tab": 3}
        last = s.bus.last_seq
        s.pause("quit", now=True)  # as it is: nothing more
        assert s.bus.last_seq == last
        with pytest.raises(rolecall.UsageError, match="'fork' is the runtime's own key"):
            s.annotate("fork", {"parent": "x"})
        with pytest.raises(rolecall.UsageError, match="'debate' is the runtime's own key"):
            s.annotate("debate", {})
        await s.save()
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.result.pause_reason == "quit"
        assert again.status.extra["my_app"] == {"tab": 3}
        again.stop()
        again.pause("quit", now=True)  # a finished session stays finished
        assert again.result.state == "finished"


async def test_cancel_pause_lets_the_run_go_on_and_drafts_keep_a_cut_reply() -> None:
    started = anyio.Event()
    go_on = anyio.Event()

    async def held(request: GenerationRequest) -> str:
        if request.info.turn == 1:
            started.set()
            await go_on.wait()
        return f"{request.info.speaker} speaks"

    async with rolecall.open_session(pair(), models={"offline": FunctionModel(held)}) as s:
        async with anyio.create_task_group() as tg:
            tg.start_soon(s.run)
            await started.wait()
            s.pause()
            assert s.cancel_pause()  # withdrawn: the run goes on after this turn
            assert not s.cancel_pause()
            go_on.set()
        assert s.result.state == "finished" and len(s.transcript) == 2
        assert s.drafts == []

    async def slow(request: GenerationRequest) -> str:
        await anyio.sleep(30)
        return "never"

    async with rolecall.open_session(CHAT, models={"offline": FunctionModel(slow)}) as s:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.say, "@doc hello")
                while not s.generating:  # noqa: ASYNC110 - the generation has no event to wait on
                    await anyio.sleep(0.01)
                assert s.interrupt()
        (draft,) = s.drafts
        assert (draft.sender, draft.reason) == ("doc", "cancelled")
        s.drafts.clear()  # a copy
        assert len(s.drafts) == 1


async def test_pause_waits_for_the_turn_and_pause_now_does_not(tmp_path: Path) -> None:
    started = anyio.Event()
    go_on = anyio.Event()

    async def held(request: GenerationRequest) -> str:
        if request.info.turn == 1:
            started.set()
            await go_on.wait()
        return f"{request.info.speaker} speaks"

    model = FunctionModel(held)
    async with rolecall.open_session(pair(), data_dir=tmp_path, models={"offline": model}) as s:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                tg.start_soon(s.run)
                await started.wait()
                s.pause("later")
                assert s.result.state == "running"  # after the turn under way
                s.pause("now", now=True)
                assert (s.result.state, s.result.pause_reason) == ("paused", "now")
                assert s.busy  # the turn goes on, and is stored; no other follows
                go_on.set()
        assert [m.sender for m in s.transcript] == ["ann"]
        assert s.result.pause_reason == "now"
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.result.pause_reason == "now" and len(again.transcript) == 1


async def test_settle_answers_what_is_due_and_decides_a_forked_step(tmp_path: Path) -> None:
    from rolecall.api.fork import fork_session
    from rolecall.memory import MemoryFiles
    from rolecall.storage.data_store import open_data_store

    async with rolecall.open_session(CHAT) as s:
        await s.say("@doc hello")
        s.request_reply("nurse", "m1")
        await s.settle()
        assert [m.sender for m in s.transcript] == ["human", "doc", "nurse"]
        await s.settle()  # nothing owed: nothing said
        assert len(s.transcript) == 3

    async with rolecall.open_session(pair(), data_dir=tmp_path) as s:
        await s.run()
    async with open_data_store(tmp_path) as store:
        plan = await fork_session(store, MemoryFiles.in_data_dir(tmp_path), s.session_id, "m1")
    async with rolecall.resume(plan.new_id, data_dir=tmp_path, mode="step") as fork:
        assert "undecided" in fork.status.extra  # m1's step: stored, not decided
        assert fork.status.pointer.current == "open"
        await fork.settle()
        assert "undecided" not in fork.status.extra
        assert fork.status.pointer.current == "answer" and len(fork.transcript) == 1


async def test_save_to_writes_the_stored_session_with_its_memory_files(tmp_path: Path) -> None:
    """``/save`` and ``/export json``: the session as stored plus each agent's memory
    file, in one file."""
    from rolecall.memory import MemoryFiles
    from rolecall.storage.document import read_session_file

    memory = MemoryFiles.in_data_dir(tmp_path)
    async with rolecall.open_session(CHAT, data_dir=tmp_path, mode="step") as s:
        await s.say("@doc hello")
        await s.flush()
        doc = await s.save_to(tmp_path / "saved.json", memory)
    again = read_session_file(tmp_path / "saved.json")
    assert again.session_id == s.session_id and len(again.messages) == 2
    assert [m.content for m in again.messages] == [m.content for m in s.transcript]
    assert again.memory == doc.memory
    kept = [(e["message_id"], e["content"]) for e in again.memory["doc"]]
    assert kept == [(m.id, m.content) for m in s.transcript]
    async with rolecall.open_session(CHAT) as kept_in_memory:
        with pytest.raises(rolecall.UsageError, match="kept in memory has no stored document"):
            await kept_in_memory.save_to(tmp_path / "x.json", memory)
