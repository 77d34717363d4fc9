"""Audiences (docs/audiences.md): a role outside a message's audience never receives it.

Each path a role is given the transcript by is searched for a marker word only the
private message holds: its prompt, its memory file, its summary, its respond check's
question, a fork, a resumed session, a replay.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import rolecall
from rolecall.bus import SummaryEvent, ToolResultEvent
from rolecall.llm.types import GenerationRequest
from rolecall.memory import MemoryFiles
from rolecall.testing import FunctionModel, capture_events

pytestmark = pytest.mark.anyio

MARKER = "zanzibar"  # only the private message holds it

CHAT: dict[str, Any] = {
    "name": "room",
    "model": "offline",
    "roles": [{"id": "ann"}, {"id": "bob"}, {"id": "cid"}],
}


def seen_text(request: GenerationRequest) -> str:
    return "\n".join(m.content for m in request.messages)


class Recorder:
    """A model that answers plainly and keeps every request each role was given."""

    def __init__(self) -> None:
        self.by_role: dict[str, list[str]] = {}
        self.model = FunctionModel(self.reply)

    def reply(self, request: GenerationRequest) -> str:
        self.by_role.setdefault(request.info.speaker, []).append(seen_text(request))
        if request.info.purpose == "respond":
            return "YES, it concerns me."
        return f"{request.info.speaker} heard you"

    def given(self, role: str) -> str:
        return "\n".join(self.by_role.get(role, []))


async def test_a_whisper_reaches_its_audience_only_and_their_replies_stay_private(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    async with rolecall.open_session(CHAT, data_dir=tmp_path, models={"offline": rec.model}) as s:
        private = await s.say(f"the code word is {MARKER}", audience=["ann", "bob"])
        await s.run()
        await s.say("@cid what do you know?")
        await s.run()
        sid = s.session_id
        ids = {m.id: m for m in s.transcript}
        assert private.audience == ["ann", "bob"]
        # routing among the audience: ann and bob answer, cid does not
        replies = [m for m in s.transcript if m.reply_to == private.id]
        assert sorted(m.sender for m in replies) == ["ann", "bob"]
        assert all(m.audience == ["ann", "bob"] for m in replies)  # replies stay private
        assert ids["m4"].audience is None  # the next plain message is for everyone
        assert [m.id for m in s.seen_by("cid")] == ["m4", "m5"]
        assert [m.id for m in s.seen_by("human")] == [m.id for m in s.transcript]
    # the prompt: ann saw it, cid never did
    assert MARKER in rec.given("ann")
    assert rec.given("cid") and MARKER not in rec.given("cid")
    # the memory files
    memory = MemoryFiles.in_data_dir(tmp_path)
    assert MARKER in json.dumps(memory.read(sid, "bob"))
    cid_file = memory.read(sid, "cid")
    assert [e["message_id"] for e in cid_file] == ["m4", "m5"]
    assert MARKER not in json.dumps(cid_file)
    # the session file / store keep the audience; resume goes on with it
    rec2 = Recorder()
    async with rolecall.resume(sid, data_dir=tmp_path, models={"offline": rec2.model}) as s:
        assert s.transcript[0].audience == ["ann", "bob"]
        await s.say("@cid and now?")
        await s.run()
        # a memory file reconciled on resume still leaves the private message out
        assert MARKER not in json.dumps(MemoryFiles.in_data_dir(tmp_path).read(sid, "cid"))
    assert rec2.given("cid") and MARKER not in rec2.given("cid")


async def test_an_audience_naming_no_role_is_refused_and_nothing_is_added() -> None:
    async with rolecall.open_session(CHAT, models={"offline": Recorder().model}) as s:
        with pytest.raises(rolecall.UsageError, match=r"audience: no role 'eve' in world room"):
            await s.say("psst", audience=["ann", "eve"])
        assert s.transcript == []
        with pytest.raises(rolecall.UsageError, match="no role 'eve'"):
            s.seen_by("eve")


async def test_a_fork_keeps_audiences_and_rebuilds_memory_without_the_private_message(
    tmp_path: Path,
) -> None:
    rec = Recorder()
    async with rolecall.open_session(CHAT, data_dir=tmp_path, models={"offline": rec.model}) as s:
        await s.say("hello all")
        await s.run()
        await s.say(f"between us: {MARKER}", audience=["ann"])
        await s.run()
        sid = s.session_id
        last = s.transcript[-1].id
    from rolecall.api.fork import fork_session
    from rolecall.storage.sqlite import SqliteStore

    memory = MemoryFiles.in_data_dir(tmp_path)
    async with SqliteStore(tmp_path / "rolecall.db") as db:
        plan = await fork_session(db, memory, sid, last)
        doc = await db.load(plan.new_id, with_events=False)
    private = [m for m in doc.messages if MARKER in m.content]
    assert private and all(m.audience == ["ann"] for m in private)
    assert MARKER not in json.dumps(memory.read(plan.new_id, "cid"))
    assert MARKER in json.dumps(memory.read(plan.new_id, "ann"))
    rec2 = Recorder()
    async with rolecall.resume(plan.new_id, data_dir=tmp_path, models={"offline": rec2.model}) as s:
        await s.say("@cid anything new?")
        await s.run()
    assert rec2.given("cid") and MARKER not in rec2.given("cid")


async def test_each_roles_summary_covers_only_what_it_saw() -> None:
    world = {**CHAT, "settings": {"context_tokens": 260}}
    rec = Recorder()

    def reply(request: GenerationRequest) -> str:
        rec.by_role.setdefault(request.info.speaker, []).append(seen_text(request))
        if request.info.purpose == "summary":
            # a summary that repeats what it was given to fold
            return request.messages[-1].content
        # long, and words of its own each time (neither a repetition to cut nor a stall)
        n = sum(len(seen) for seen in rec.by_role.values())
        return f"{request.info.speaker} answers " + " ".join(f"w{n}x{i}" for i in range(18))

    with capture_events() as captured:
        async with rolecall.open_session(world, models={"offline": FunctionModel(reply)}) as s:
            await s.say(f"secret for ann: {MARKER}", audience=["ann"])
            await s.run()
            for n in range(6):
                await s.say(f"@all tell me more, round {n} " + "padding words " * 10)
                await s.run()
    summaries = captured.of(SummaryEvent)
    assert {e.role for e in summaries} >= {"ann", "cid"}, "both memories were folded"
    assert any(MARKER in e.text for e in summaries if e.role == "ann")
    assert all(MARKER not in e.text for e in summaries if e.role != "ann")
    assert MARKER not in rec.given("cid")


async def test_a_respond_check_outside_the_audience_is_never_asked() -> None:
    world = {
        "name": "judged",
        "model": "offline",
        "roles": [
            {"id": "ann", "respond": {"ask_model": True}},
            {"id": "bob", "respond": {"ask_model": True}},
        ],
    }
    rec = Recorder()
    async with rolecall.open_session(world, models={"offline": rec.model}) as s:
        await s.say(f"only ann: {MARKER}", audience=["ann"])
        await s.run()
        await s.say("and now everyone")
        await s.run()
        answered_private = [m.sender for m in s.transcript if m.reply_to == "m1"]
    assert MARKER in rec.given("ann")
    assert rec.given("bob") and MARKER not in rec.given("bob")
    assert answered_private == ["ann"]  # bob was not asked whether to answer it


async def test_a_private_turns_tool_result_never_reaches_a_role_outside_it() -> None:
    from rolecall.tools.builtin import BuiltinTool, register, unregister

    async def lookup(world: object, arguments: dict[str, object]) -> str:
        return f"the vault code is {MARKER}"

    register(BuiltinTool("vault.lookup", "the vault code", {"type": "object"}, lookup))
    world = {
        "name": "vault",
        "model": "offline",
        "roles": [
            {
                "id": "ann",
                "model": "scripted",
                "tools": ["vault.lookup"],
                "script": [{"call": "vault.lookup", "arguments": {}}, "ann found {result}"],
            },
            {"id": "bob"},
        ],
    }
    rec = Recorder()
    try:
        with capture_events() as captured:
            async with rolecall.open_session(world, models={"offline": rec.model}) as s:
                await s.say("@ann look it up", audience=["ann"])
                await s.run()
                await s.say("@bob what is the code?")
                await s.run()
                found = s.transcript[1]
    finally:
        unregister("vault.lookup")
    assert MARKER in found.content and found.audience == ["ann"]  # the tool ran, privately
    assert any(MARKER in e.content for e in captured.of(ToolResultEvent))  # the human sees it
    assert rec.given("bob") and MARKER not in rec.given("bob")


async def test_a_whisper_to_one_agent_during_a_flow_is_its_interjection() -> None:
    world = {
        "name": "steps",
        "model": "offline",
        "roles": [{"id": "ann"}, {"id": "bob"}],
        "flow": {
            "steps": [
                {"id": "a", "speaker": "ann", "reply_to": "none"},
                {"id": "b", "speaker": "bob", "next": "end"},
            ]
        },
    }
    rec = Recorder()
    async with rolecall.open_session(world, mode="step", models={"offline": rec.model}) as s:
        await s.step()  # the flow has started: a human message now interjects
        await s.say(f"just between us: {MARKER}", audience=["ann"])
        await s.run()
        said = [(m.sender, m.step_id, m.audience) for m in s.transcript]
    assert said == [
        ("ann", "a", None),
        ("human", None, ["ann"]),
        ("ann", "interjection", ["ann"]),  # answered by ann, privately
        ("bob", "b", None),
    ]
    assert MARKER in rec.given("ann") and MARKER not in rec.given("bob")
