"""An agent's own decision to answer (issue 15, chat.md): with ``respond: {ask_model: true}``
a message that addresses nobody is answered only if the agent's model says yes, each
decision a ``system/respond`` event; deterministic on the offline model, bounded by the
turn limit; the routing rules stay the default."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from tests.cli.test_run_cli import rolecall
from tests.helpers import opened, world_from

QUESTION = "What should the budget for next year be?"


def council(ask_model: bool = True, **settings: Any) -> dict[str, Any]:
    respond = {"respond": {"ask_model": True}} if ask_model else {}
    return {
        "name": "council",
        "topic": "running the town",
        "model": "offline",
        "settings": settings,
        "roles": [
            {"id": "treasurer", "description": "Keeps the town budget and the accounts.", **respond},
            {"id": "gardener", "description": "Looks after the parks, trees and flowers.", **respond},
            {"id": "clerk", "description": "Writes the minutes."},
        ],
    }  # fmt: skip


def chat(tmp_path: Path, world: dict[str, Any], said: str = QUESTION) -> list[dict[str, Any]]:
    folder = tmp_path / "council"
    folder.mkdir(exist_ok=True)
    (folder / "world.yaml").write_text(yaml.safe_dump(world), encoding="utf-8")
    done = rolecall(
        "chat", str(folder), "--json", "--data-dir", str(tmp_path / "d"), stdin=said + "\n"
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def decisions(events: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    return [(e["agent"], e["message_id"], e["respond"]) for e in events if e["type"] == "respond"]


def replies_to(events: list[dict[str, Any]], message_id: str) -> list[str]:
    return [e["sender"] for e in events if e["type"] == "message" and e["reply_to"] == message_id]


def test_judging_agents_answer_a_broadcast_only_when_their_model_says_yes(tmp_path: Path) -> None:
    events = chat(tmp_path, council())
    assert decisions(events)[:2] == [("treasurer", "m1", True), ("gardener", "m1", False)]
    (yes, no) = [e for e in events if e["type"] == "respond"][:2]
    assert yes["reason"] == "It is about budget, which is part of my role as Treasurer."
    assert yes["model"] == "offline" and yes["input_tokens"] > 0 and yes["output_tokens"] > 0
    assert no["reason"].startswith("Nothing in it concerns my role as Gardener")
    # the judging treasurer and the rule-following clerk answer; the gardener does not
    assert replies_to(events, "m1") == ["treasurer", "clerk"]
    assert "gardener" not in {e["sender"] for e in events if e["type"] == "message"}
    # every decision is about a message that addressed nobody, decided before any reply
    messages = {e["message_id"]: e for e in events if e["type"] == "message"}
    for agent, message_id, _ in decisions(events):
        assert messages[message_id]["mentions"] == [] and messages[message_id]["sender"] != agent
    # the same conversation again: the same decisions (deterministic offline)
    assert decisions(chat(tmp_path, council())) == decisions(events)


def test_rules_stay_the_default(tmp_path: Path) -> None:
    events = chat(tmp_path, council(ask_model=False))
    assert decisions(events) == []
    assert replies_to(events, "m1") == ["treasurer", "gardener", "clerk"]


def test_an_agent_at_its_turn_limit_is_not_asked(tmp_path: Path) -> None:
    events = chat(tmp_path, council(turn_limit=1))
    limited = [e for e in events if e["type"] == "respond" and e["model"] is None]
    assert limited, "the treasurer spoke once; later messages find it at its limit"
    assert all(e["agent"] == "treasurer" and not e["respond"] for e in limited)
    assert {e["reason"] for e in limited} == {"its turn limit is reached"}
    spoken = [e["sender"] for e in events if e["type"] == "message" and e["sender"] != "system"]
    assert spoken.count("treasurer") == 1


@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("jugde", "roles[0].respond.jugde: unknown field (fields: ask_model, history)"),
        # the key's name before issue 52 (a judge is a role that scores, modes.md)
        ("judge", "roles[0].respond.judge: unknown field; it is called ask_model now"),
    ],
)
def test_a_wrong_respond_field_is_named_with_the_fields_it_takes(
    tmp_path: Path, key: str, said: str
) -> None:
    world = council()
    world["roles"][0]["respond"] = {key: True}
    folder = tmp_path / "council"
    folder.mkdir()
    (folder / "world.yaml").write_text(yaml.safe_dump(world), encoding="utf-8")
    done = rolecall("worlds", "validate", str(folder))
    assert done.returncode != 0
    assert said in done.stderr and "Traceback" not in done.stderr


class Asked:
    """A model that answers the respond question with ``answer`` and keeps the requests."""

    name = "asked"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.requests: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        text = self.answer if request.info.purpose == "respond" else "A real reply."
        yield TextDelta(text)
        yield Usage(7, 3)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("answer", "speaks", "reason"),
    [
        ("YES - the budget is mine.", True, "the budget is mine."),
        ("no. Not my area.", False, "Not my area."),
        ("Perhaps later", False, "unclear answer, counted as no: 'Perhaps later'"),
    ],
)
async def test_the_model_is_asked_with_the_recent_history(
    answer: str, speaks: bool, reason: str
) -> None:
    world = council()
    world["roles"] = world["roles"][:1]
    model = Asked(answer)
    async with opened(world_from(world), models={"asked": model}, model="asked") as (session, rec):
        await session.say("Good morning, everyone.")
        await session.say(QUESTION)
        question = [r for r in model.requests if r.info.purpose == "respond"][-1]
        assert question.max_tokens == 60 and question.info.target_text == QUESTION
        asked = question.messages[-1].content
        asked_id = "m3" if speaks else "m2"  # after the treasurer's reply to m1, or not
        assert "[m1] human: Good morning, everyone." in asked  # the recent history
        assert f"[{asked_id}] human: {QUESTION}" in asked
        assert f"The latest message, {asked_id} from human, is not addressed" in asked
        assert "Should you, Treasurer, answer it?" in asked
        last = rec.of("system", "respond")[-1]
        assert (last.message_id, last.respond, last.reason) == (asked_id, speaks, reason)
        assert (last.input_tokens, last.output_tokens) == (7, 3)
        said = [m.sender for m in session.transcript]
        assert ("treasurer" in said[-1:]) is speaks
