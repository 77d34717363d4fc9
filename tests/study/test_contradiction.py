"""Module 7, contradiction detection (issue 15): a role's message that says the opposite
of an earlier statement is a `study/contradiction` event, and the challenger (or, when it
has spoken in the unit, the next speaker) addresses it next, answering that message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from rolecall.study.contradiction import Statement, find_contradiction
from tests.cli.test_run_cli import rolecall

NOTES = (
    "# Spacing\n\n"
    "Spacing out review helps long-term retention of vocabulary for most learners.\n\n"
    "Cramming the night before an exam feels productive but fades within days.\n"
)
CLAIM = "Spacing helps long-term retention of vocabulary."
DENIAL = "Actually, spacing does not help long-term retention of vocabulary."


def world(folder: Path, *, summarizer: str = DENIAL, contradictions: bool = True) -> Path:
    scripted = {
        "explainer": CLAIM,
        "summarizer": summarizer,
        "challenger": "Answering {target}: the evidence favours spacing.",
    }
    raw: dict[str, Any] = {
        "name": "contra",
        "mode": "study",
        "model": "offline",
        "study": {"text": NOTES, "contradictions": contradictions},
        "roles": [{"id": r, "model": "scripted", "script": [t]} for r, t in scripted.items()],
    }
    folder.mkdir()
    (folder / "world.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return folder


def events_of(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines()]


def test_a_contradiction_is_an_event_and_the_challenger_addresses_it_next(tmp_path: Path) -> None:
    done = rolecall(
        "run", str(world(tmp_path / "w")), "--json", "--max-turns", "3",
        "--data-dir", str(tmp_path / "d"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    messages = [e for e in events if e["type"] == "message"]
    assert [m["sender"] for m in messages][:2] == ["explainer", "summarizer"]
    (found,) = [e["data"] for e in events if e["type"] == "mode" and e["name"] == "contradiction"]
    assert found["message_id"] == messages[1]["message_id"] and found["speaker"] == "summarizer"
    assert found["earlier_id"] == messages[0]["message_id"]
    assert found["earlier_sentence"] == CLAIM and found["kind"] == "negation"
    assert found["addressed_by"] == "challenger" and found["id"] == "c1"
    # the challenger moved ahead of its queue place, answering the contradicting message
    third = messages[2]
    assert third["sender"] == "challenger" and third["reply_to"] == messages[1]["message_id"]
    assert third["content"].startswith("Answering summarizer:")
    records = [e["data"] for e in events if e["type"] == "mode" and e["name"] == "turn"]
    assert [r["addresses"] for r in records] == [None, None, "c1"]


@pytest.mark.anyio
async def test_the_addressing_turn_is_told_what_contradicts_what(tmp_path: Path) -> None:
    import rolecall as api
    from rolecall.llm.types import GenerationRequest, TextDelta, Usage

    class Capture:
        name = "capture"

        def __init__(self) -> None:
            self.requests: list[GenerationRequest] = []

        async def stream(self, request: GenerationRequest) -> Any:
            self.requests.append(request)
            yield TextDelta("Noted.")
            yield Usage(1, 1)

    folder = world(tmp_path / "w")
    raw = yaml.safe_load((folder / "world.yaml").read_text("utf-8"))
    raw["roles"][2] = {"id": "challenger", "model": "capture"}
    (folder / "world.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    capture = Capture()
    async with api.open_session(folder, models={"capture": capture}) as session:
        for _ in range(3):
            await session.step()
    (request,) = capture.requests
    assert request.info.instruction is not None
    assert request.info.instruction.startswith(
        f'A contradiction (c1): m2 (summarizer) says "{DENIAL}", but m1 (explainer) said '
        f'"{CLAIM}". Point it out and settle which holds before going on.'
    )


def test_agreeing_roles_and_the_switched_off_check_make_no_event(tmp_path: Path) -> None:
    for name, kwargs in (("agree", {"summarizer": CLAIM}), ("off", {"contradictions": False})):
        done = rolecall(
            "run", str(world(tmp_path / name, **kwargs)), "--json", "--max-turns", "3",
            "--data-dir", str(tmp_path / "d"),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        events = events_of(done.stdout)
        assert not [e for e in events if e.get("name") == "contradiction"]
        senders = [e["sender"] for e in events if e["type"] == "message"]
        assert senders[2] != "challenger"  # its queue place: last in an introduction


@pytest.mark.parametrize(
    ("earlier", "later", "kind"),
    [
        (CLAIM, DENIAL, "negation"),
        ("Cramming works well for long-term memory.", "Cramming doesn't work for long-term memory.", "negation"),
        ("Expanding gaps increase retention for most learners.", "Expanding gaps decrease retention for most learners.", "antonym"),
    ],
)  # fmt: skip
def test_opposite_statements_on_the_same_subject(earlier: str, later: str, kind: str) -> None:
    found = find_contradiction(Statement("m2", "b", later), [Statement("m1", "a", earlier)])
    assert found is not None and found.kind == kind and found.earlier_id == "m1"


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        (CLAIM, CLAIM),  # the same claim
        (CLAIM, "Does spacing not help long-term retention of vocabulary?"),  # a question
        (CLAIM, "Cramming does not help you sleep before an exam."),  # another subject
        ("Explainer, I like the account.", "Explainer, I'm not convinced the account works."),
    ],
)
def test_no_contradiction(earlier: str, later: str) -> None:
    names = ["explainer", "Explainer"]
    assert (
        find_contradiction(Statement("m2", "b", later), [Statement("m1", "a", earlier)], names)
        is None
    )


def test_a_resumed_session_still_addresses_the_contradiction(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    first = rolecall(
        "chat", str(world(tmp_path / "w")), "--mode", "step", "--json", "--data-dir", data,
        stdin="/next\n/next\n",
    )  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert [e for e in events_of(first.stdout) if e.get("name") == "contradiction"]
    resumed = rolecall("resume", "last", "--json", "--max-turns", "3", "--data-dir", data)
    assert resumed.returncode == 0, resumed.stderr
    later = [e for e in events_of(resumed.stdout) if e["type"] == "message"]
    assert later[0]["sender"] == "challenger" and later[0]["reply_to"] == "m2"


CLAIM_SCHEMA = {
    "type": "object",
    "properties": {"claim": {"type": "string"}, "sure": {"type": "boolean"}},
    "required": ["claim"],
}


def shaped_world(folder: Path, summarizer: dict[str, Any]) -> Path:
    """The explainer and the summarizer answer with data (an ``output:`` schema and a
    scripted mapping each); the summarizer's mapping is ``summarizer``."""
    raw = yaml.safe_load((world(folder) / "world.yaml").read_text("utf-8"))
    for role in raw["roles"]:
        if role["id"] == "explainer":
            role["script"] = [{"claim": CLAIM, "sure": True}]
        elif role["id"] == "summarizer":
            role["script"] = [summarizer]
        else:
            continue
        role["output"] = {"schema": CLAIM_SCHEMA}
    (folder / "world.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return folder


def test_the_check_reads_the_data_of_a_role_with_a_schema(tmp_path: Path) -> None:
    """selection.md: study checks read `data` when the role has a schema. The
    contradiction is found between the two replies' data, and its sentences are the
    data's strings, not the JSON text the replies are stored as."""
    folder = shaped_world(tmp_path / "w", {"claim": DENIAL})
    done = rolecall(
        "run", str(folder), "--json", "--max-turns", "3", "--data-dir", str(tmp_path / "d")
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    messages = [e for e in events if e["type"] == "message"]
    assert messages[0]["data"] == {"claim": CLAIM, "sure": True}
    assert messages[1]["data"] == {"claim": DENIAL}
    (found,) = [e["data"] for e in events if e["type"] == "mode" and e["name"] == "contradiction"]
    assert found["sentence"] == DENIAL and found["earlier_sentence"] == CLAIM
    assert found["kind"] == "negation" and found["addressed_by"] == "challenger"
    assert messages[2]["sender"] == "challenger"


def test_a_reply_whose_data_did_not_validate_states_nothing(tmp_path: Path) -> None:
    """A schema role's reply that failed validation (``data: null``, ``data_error``) is
    not read as text: the denial in its JSON is no contradiction, and the challenger
    keeps its queue place."""
    folder = shaped_world(tmp_path / "w", {"point": DENIAL})
    done = rolecall(
        "run", str(folder), "--json", "--max-turns", "3", "--data-dir", str(tmp_path / "d")
    )
    assert done.returncode == 0, done.stderr
    events = events_of(done.stdout)
    messages = [e for e in events if e["type"] == "message"]
    assert messages[1]["sender"] == "summarizer" and DENIAL in messages[1]["content"]
    assert messages[1].get("data") is None and "claim" in messages[1]["data_error"]
    assert not [e for e in events if e.get("name") == "contradiction"]
    assert messages[2]["sender"] != "challenger"
