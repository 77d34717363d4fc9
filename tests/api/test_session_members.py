"""The members of rolecall.Session that the web view drives a session with (docs/api.md):
its state now, flags, a reply made due, an interrupt, a failure paused on, a save."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.llm.types import GenerationRequest
from rolecall.testing import FunctionModel
from tests.api.test_api import second_turn_hangs

pytestmark = pytest.mark.anyio


def pair() -> dict[str, Any]:
    return {
        "name": "pair",
        "model": "offline",
        "roles": [{"id": "ann"}, {"id": "bob"}],
        "flow": {
            "steps": [
                {"id": "open", "speaker": "ann"},
                {"id": "answer", "speaker": "bob", "reply_to": {"role": "ann"}},
            ]
        },
    }


CHAT = {"name": "help", "model": "offline", "roles": [{"id": "doc"}, {"id": "nurse"}]}


def numbered(request: GenerationRequest) -> str:
    return f"{request.info.speaker} says {request.info.turn}"


async def test_status_flags_world_and_models_read_the_session_now() -> None:
    async with rolecall.open_session(pair(), mode="step", model="openai/gpt-4o-mini") as s:
        assert s.world.name == "pair" and not s.chat
        assert s.model_name("ann") == "openai/gpt-4o-mini"  # model= replaces every role's
        with pytest.raises(rolecall.UsageError, match=r"no role 'eve' \(roles: ann, bob\)"):
            s.model_name("eve")
        assert s.status.state == "created" and s.flags == frozenset()
        s.set_flag("ready")
        status = s.status
        assert s.flags == {"ready"} and status.flags == ["ready"]
        status.flags.append("forged")  # a copy: the session is untouched
        assert s.flags == {"ready"} and s.status.flags == ["ready"]
    async with rolecall.open_session(
        pair(), mode="step", models={"offline": FunctionModel(numbered)}
    ) as s:
        await s.step()
        assert s.status.state == "running"
        assert s.status.pointer.exec_counts == {"open": 1}
        assert s.model_name(s.world.role("bob")) == "offline"
    async with rolecall.open_session(CHAT) as s:
        assert s.chat


async def test_request_reply_makes_that_one_reply_due() -> None:
    async with rolecall.open_session(CHAT, models={"offline": FunctionModel(numbered)}) as s:
        await s.say("@doc hello")
        assert [(m.id, m.sender) for m in s.transcript] == [("m1", "human"), ("m2", "doc")]
        s.request_reply("doc", "m1")
        s.request_reply("nurse", "m1")  # replaces the reply due before it
        assert [(p.agent, p.message_id, p.kind) for p in s.status.pending] == [
            ("nurse", "m1", "chat")
        ]
        await s.run()
        last = s.transcript[-1]
        assert len(s.transcript) == 3 and (last.sender, last.reply_to) == ("nurse", "m1")
        assert s.status.pending == []
        with pytest.raises(rolecall.UsageError, match="no role 'eve'"):
            s.request_reply("eve", "m1")
        with pytest.raises(rolecall.UsageError, match="has no message 'm9'"):
            s.request_reply("doc", "m9")
        s.stop()
        with pytest.raises(rolecall.UsageError, match="is finished"):
            s.request_reply("doc", "m1")


async def test_interrupt_cuts_the_streaming_reply_and_pauses(tmp_path: Path) -> None:
    async with rolecall.open_session(
        pair(), data_dir=tmp_path, models={"offline": FunctionModel(second_turn_hangs)}
    ) as s:
        with anyio.fail_after(20):
            async for event in s.events():  # ends when the run returns: paused
                if isinstance(event, rolecall.StreamStart) and event.message_id == "m2":
                    assert s.interrupt()
        assert s.result.state == "paused" and s.result.pause_reason == "cancelled"
        assert not s.interrupt()  # nothing streams now: paused, as asked
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert [m.content for m in again.transcript] == ["fine"]  # m2's start is a draft
        assert again.result.pause_reason == "cancelled"
    async with rolecall.open_session(CHAT) as chat:
        await chat.say("@doc hello")
        assert chat.result.state == "running"
        assert not chat.interrupt()  # nothing streams between turns: paused all the same
        assert chat.result.state == "paused" and chat.result.pause_reason == "interrupted"


async def test_a_pause_on_an_error_says_it_and_save_stores_it(tmp_path: Path) -> None:
    async with rolecall.open_session(CHAT, data_dir=tmp_path) as s:
        await s.say("@doc hello")
        s.pause(error=RuntimeError("the disk is on fire"), source="mine")
        await s.save()
        errors = [e.event for e in s.bus.history if isinstance(e.event, rolecall.ErrorEvent)]
        assert [(e.error, e.source) for e in errors] == [("the disk is on fire", "mine")]
        assert s.result.state == "paused" and s.result.pause_reason == "error"
        last = s.bus.last_seq
    async with rolecall.resume(s.session_id, data_dir=tmp_path) as again:
        assert again.result.pause_reason == "error"
        assert again.bus.last_seq == last  # stored before the block was left
        again.stop()
        again.pause(error=ValueError())  # a finished session stays as it is
        assert again.result.state == "finished" and again.bus.last_seq == last + 2


async def test_annotate_keeps_a_note_with_the_stored_session(tmp_path: Path) -> None:
    async with rolecall.open_session(pair(), data_dir=tmp_path, mode="step") as s:
        s.annotate("mine", {"left_in": "step"})
        assert s.status.extra["mine"] == {"left_in": "step"}
        await s.step()  # stored with the session's next change
        for key in ("study", "fork", "undecided"):
            with pytest.raises(rolecall.UsageError, match=f"'{key}' is the runtime's own key"):
                s.annotate(key, 1)
    async with rolecall.resume(s.session_id, data_dir=tmp_path, mode="step") as again:
        assert again.status.extra["mine"] == {"left_in": "step"}
        again.annotate("mine", None)  # removed
        again.annotate("never", None)  # removing what is not there: nothing to do
        assert "mine" not in again.status.extra and "never" not in again.status.extra
        await again.step()
    async with rolecall.resume(s.session_id, data_dir=tmp_path, mode="step") as third:
        assert "mine" not in third.status.extra


async def test_settle_answers_what_is_due_and_nothing_more() -> None:
    async with rolecall.open_session(
        pair(), mode="step", models={"offline": FunctionModel(numbered)}
    ) as s:
        await s.settle()  # nothing is due: nothing is said, the flow does not start
        assert s.transcript == [] and s.status.pointer.exec_counts == {}
        await s.step()  # ann opens: m1
        s.request_reply("bob", "m1")
        await s.settle()
        assert [(m.sender, m.reply_to) for m in s.transcript] == [("ann", None), ("bob", "m1")]
        assert s.status.pending == [] and "answer" not in s.status.pointer.exec_counts
        await s.settle()
        assert len(s.transcript) == 2  # the flow's next step is run()'s or step()'s
        await s.run()
        assert s.status.pointer.exec_counts["answer"] == 1 and len(s.transcript) == 3


async def test_result_counts_the_turns_the_agents_took_apart_from_other_messages() -> None:
    """``Result.turns``: the agents' messages alone (what a batch run records as turns),
    while ``messages`` counts the human's too."""
    async with rolecall.open_session(CHAT, models={"offline": FunctionModel(numbered)}) as s:
        assert s.result.turns == 0
        await s.say("@doc hello")
        await s.say("@nurse and you?")
        result = s.result
        assert [m.sender for m in s.transcript] == ["human", "doc", "human", "nurse"]
        assert (result.messages, result.turns) == (4, 2)
