"""Study mode end to end on the ordinary engine: world loading, a full offline run,
determinism, interruptions, save/restore and ``rolecall study DOC``."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest

import rolecall
from rolecall.cli.study_cmd import add_parser, run_study, study_world
from rolecall.errors import UsageError, WorldError
from rolecall.modes.study import FOLDER_KEY, director, load_study
from rolecall.modes.study_turns import STOP_REASON
from rolecall.storage.document import SessionDocument
from rolecall.storage.in_memory import InMemoryStore
from rolecall.study.queue import ROLES
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world, load_world
from rolecall.world.models import World
from tests.conftest import ROOT
from tests.helpers import Recorder, opened, run_flow

FOLDER = ROOT / "worlds" / "study"
UNITS = 9  # worlds/study/notes.md


def study(world: World | None = None) -> World:
    loaded = load_world(FOLDER)
    return load_study(FOLDER, world or loaded.world)


def build(raw: dict[str, Any]) -> World:
    return build_world(raw, source="world.yaml", library=RoleLibrary()).world


def mode_events(rec: Recorder, name: str | None = None) -> list[dict[str, Any]]:
    return [
        {"name": e.name, **e.data}
        for e in rec.of("system", "mode")
        if e.mode == "study" and (name is None or e.name == name)
    ]


async def full_run(world: World | None = None) -> tuple[rolecall.Session, Recorder]:
    return await run_flow(world or study())


def transcript(
    session: rolecall.Session,
) -> list[tuple[str, str, str | None, str | None, str | None]]:
    return [(m.id, m.sender, m.step_id, m.reply_to, m.content) for m in session.transcript]


async def stepped_file(turns: int, path: Path) -> SessionDocument:
    """A study session stepped ``turns`` times, then kept (closed, as the command line
    leaves it) and written to the session file ``path``: its document."""
    store = InMemoryStore()
    async with rolecall.open_session(study(), store=store) as session:
        for _ in range(turns):
            await session.step()
    doc = await store.load(session.session_id)
    await anyio.Path(path).write_text(doc.model_dump_json(), "utf-8")
    return doc


# ------------------------------------------------------------------- world
def test_world_file_expands_to_the_five_roles() -> None:
    world = study()
    assert world.mode == "study" and world.flow is None
    assert world.role_ids == list(ROLES)
    assert all(r.temperature == 0.0 for r in world.roles)  # deterministic on real models
    assert world.settings.max_turns == 1000
    assert (
        (block := world.block("study")) is not None and block["delay"] == 3 and block["lock"] == 7
    )
    assert block["text"] == (FOLDER / "notes.md").read_text("utf-8")
    assert load_study(FOLDER, world) is world or load_study(FOLDER, world) == world


def test_loader_reads_the_document_when_it_passes_the_folder() -> None:
    raw = {"name": "s", "mode": "study", "study": {"document": "notes.md"}, FOLDER_KEY: FOLDER}
    world = build(raw)
    assert (block := world.block("study")) is not None and block["text"].startswith(
        "These study notes"
    )
    assert world.topic == "Studying Spacing Out Practice: How Review Timing Shapes Memory"
    missing = {**raw, "study": {"document": "nope.md"}}
    with pytest.raises(WorldError) as err:
        build(missing)
    assert err.value.problems == ["study.document: nope.md: no such file"]


def test_a_world_file_cannot_name_its_own_folder() -> None:
    # only the loader passes the folder (a Path); a string from YAML is refused, never read
    raw = {"name": "s", "mode": "study", "study": {"document": "etc/passwd"}, FOLDER_KEY: "/"}
    with pytest.raises(WorldError) as err:
        build(raw)
    assert err.value.problems == [f"{FOLDER_KEY}: unknown field"]


def test_role_overrides_by_id() -> None:
    world = build(
        {
            "name": "s",
            "mode": "study",
            "study": {"text": "# Part\n\nA paragraph long enough to study here."},
            "roles": [{"id": "summarizer", "model": "scripted", "script": ["sum {n}"]}],
        }
    )
    assert world.role("summarizer").model == "scripted"
    assert world.role("summarizer").system_prompt  # the template's fields are kept
    assert sorted(world.role_ids) == sorted(ROLES)


@pytest.mark.parametrize(
    ("study_block", "extra", "problem"),
    [
        (
            {"document": "notes.md", "delay": 4},
            {},
            "study.delay: input should be less than or equal to 3 (got 4)",
        ),
        (
            {"document": "notes.md", "lock": 4},
            {},
            "study.lock: input should be greater than or equal to 5 (got 4)",
        ),
        (
            {"document": "notes.md", "dealy": 2},
            {},
            "study.dealy: unknown field (did you mean delay?)",
        ),
        ({"document": "/etc/passwd"}, {}, "study.document: absolute path '/etc/passwd'"),
        (
            {"document": "../other/notes.md"},
            {},
            "study.document: '../other/notes.md' leaves the world folder",
        ),
        ({}, {}, "study.document: required"),
        (None, {}, "study: required for mode: study"),
        ({"text": "# A\n\nshort"}, {}, "study.document: nothing to study"),
        (
            {"document": "notes.md"},
            {"flow": {"steps": [{"id": "a", "speaker": "explainer"}]}},
            "flow: study mode has no flow",
        ),
        (
            {"document": "notes.md"},
            {"roles": [{"id": "teacher"}]},
            "roles[0].id: study mode has no role 'teacher'",
        ),
    ],
)
def test_study_block_problems(
    study_block: dict[str, Any] | None, extra: dict[str, Any], problem: str
) -> None:
    raw: dict[str, Any] = {"name": "s", "mode": "study", **extra}
    if study_block is not None:
        raw["study"] = study_block
    with pytest.raises(WorldError) as err:
        build(raw)
    assert any(p.startswith(problem) for p in err.value.problems), err.value.problems


def test_loading_reads_the_document_and_a_world_without_it_cannot_start() -> None:
    world = load_world(FOLDER).world
    assert (block := world.block("study")) is not None and "spaced" in block["text"].lower()
    unread = world.with_block("study", {"document": "notes.md"})
    with pytest.raises(UsageError, match="was not read"):
        anyio.run(rolecall.run, unread)


# --------------------------------------------------------------------- run
@pytest.mark.anyio
async def test_every_unit_role_slot_speaks_exactly_once_then_study_complete() -> None:
    session, rec = await full_run()
    messages = session.transcript
    slots = Counter(m.step_id for m in messages)
    expected = {f"u{k}:{r}" for k in range(1, UNITS + 1) for r in ROLES}
    assert set(slots) == expected
    assert all(count == 1 for count in slots.values())
    assert len(messages) == UNITS * len(ROLES)
    # units in order: every turn of unit k comes before every turn of unit k+1
    units = [int(m.step_id.split(":")[0][1:]) for m in messages if m.step_id]
    assert units == sorted(units)
    stop = rec.stop()
    assert stop.reason == STOP_REASON == "study_complete"
    assert stop.detail == "every (unit, role) slot has spoken: 9 units x 5 roles = 45 turns"
    assert session.finished
    # the first unit opens with the explainer; each turn carries its unit's text
    assert messages[0].step_id == "u1:explainer"
    records = rec.of("system", "step")
    assert [r.step_id for r in records] == [m.step_id for m in messages]
    plan = mode_events(rec, "plan")
    assert len(plan) == 1 and len(plan[0]["units"]) == UNITS


@pytest.mark.anyio
async def test_unit_text_is_in_the_turn_instruction() -> None:
    from rolecall.llm.types import GenerationRequest, TextDelta, Usage

    class Capture:
        name = "capture"

        def __init__(self) -> None:
            self.requests: list[GenerationRequest] = []

        async def stream(self, request: GenerationRequest) -> Any:
            self.requests.append(request)
            yield TextDelta("noted")
            yield Usage(1, 1)

    model = Capture()
    async with opened(study(), models={"capture": model}, model="capture") as (session, _):
        await session.step()
    info = model.requests[0].info
    assert info.step_id == "u1:explainer"
    assert info.instruction is not None
    assert "Study unit 1 of 9: the opening text (introduction)." in info.instruction
    assert "These study notes cover one idea" in info.instruction


@pytest.mark.anyio
async def test_same_document_twice_same_segments_queues_speakers_and_transcript() -> None:
    first, rec1 = await full_run()
    second, rec2 = await full_run()
    assert mode_events(rec1, "plan") == mode_events(rec2, "plan")  # segments, scores, queues
    assert [m.sender for m in first.transcript] == [m.sender for m in second.transcript]
    assert transcript(first) == transcript(second)
    assert mode_events(rec1) == mode_events(rec2)
    assert first.status.extra["study"] == second.status.extra["study"]


@pytest.mark.anyio
async def test_human_interruption_is_classified_and_reallocates() -> None:
    async with opened(study()) as (session, rec):
        for _ in range(3):
            await session.step()
        low = await session.say("Can you clarify with an example?")  # a tie: 0.65
        ask = await session.say("Give me an example, for instance from a real classroom")
        late = await session.say("Give me a summary please")  # too soon: one pending at a time
        await session.run()
        assert rec.stop().reason == STOP_REASON
        events = mode_events(rec)
        classified = [e for e in events if e["name"] == "classification"]
        assert [(e["message_id"], e["intent"], e["confidence"]) for e in classified] == [
            (low.id, "clarification", 0.65),
            (ask.id, "example_request", 1.0),
            (late.id, "summary_request", 0.8),
        ]
        skipped = {
            e["message_id"]: e["reason"] for e in events if e["name"] == "reallocation_skipped"
        }
        assert skipped == {low.id: "low_confidence", late.id: "too_soon"}
        (accepted,) = [e for e in events if e["name"] == "reallocation"]
        assert accepted["message_id"] == ask.id and accepted["turn"] == 3
        assert accepted["due_turn"] == 6 and accepted["new"][0] == "example_generator"
        assert "reasons" in accepted and accepted["distance"] >= 2
        (applied,) = [e for e in events if e["name"] == "reallocation_applied"]
        assert applied["turn"] == 6 and applied["answers"] == ask.id
        # the first turn under the new order answers the learner's message
        agents = [m for m in session.transcript if m.kind == "agent"]
        assert (agents[6].step_id, agents[6].reply_to) == ("u2:example_generator", ask.id)
        # human messages are consumed by the director: no interjection, every slot still once
        assert not any(m.step_id == "interjection" for m in session.transcript)
        assert len(agents) == UNITS * len(ROLES)
        assert Counter(a.step_id for a in agents).most_common(1)[0][1] == 1


@pytest.mark.anyio
async def test_save_and_restore_continue_exactly(tmp_path: Path) -> None:
    straight, _ = await full_run()
    await stepped_file(7, tmp_path / "session.json")  # through JSON, as a file
    rec = Recorder()
    async with rolecall.resume(tmp_path / "session.json", sinks=[rec]) as restored:
        await restored.run()
    assert rec.stop().reason == STOP_REASON
    assert transcript(restored) == transcript(straight)


# --------------------------------------------------------------------- CLI
def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="rolecall")
    add_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["study", *argv])


# ``rolecall study`` as the real command runs it (logging configured, as dispatch does),
# in a subprocess so the global logging setup never leaks into other tests.
CLI = """
import argparse, sys
from rolecall.cli import logs
from rolecall.cli.study_cmd import add_parser, run_study
logs.configure(-1)
parser = argparse.ArgumentParser(prog="rolecall")
add_parser(parser.add_subparsers(dest="command"))
sys.exit(run_study(parser.parse_args(["study", *sys.argv[1:]])))
"""


def rolecall_study(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", CLI, *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_cli_study_runs_a_document_to_completion(data_dir: Path) -> None:
    result = rolecall_study("worlds/study/notes.md", "--json", "--delay", "2", "--lock", "5")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    stops = [r for r in records if r["topic"] == "world" and r["type"] == "stop"]
    assert [s["reason"] for s in stops] == [STOP_REASON]
    messages = [r for r in records if r["type"] == "message"]
    assert len(messages) == UNITS * len(ROLES)
    assert messages[0]["step_id"] == "u1:explainer"
    # scaffolding: in every unit the explainer speaks before the challenger
    steps = [m["step_id"] for m in messages]
    for n in range(1, UNITS + 1):
        assert steps.index(f"u{n}:explainer") < steps.index(f"u{n}:challenger"), steps
    plan = next(r for r in records if r["type"] == "mode" and r["name"] == "plan")
    assert (plan["data"]["delay"], plan["data"]["lock"]) == (2, 5)
    assert [p.name for p in data_dir.rglob("*.db")]  # stored like any run


def test_cli_study_max_turns_and_errors(data_dir: Path) -> None:
    result = rolecall_study("worlds/study/notes.md", "--json", "--max-turns", "4")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["reason"] for r in records if r["type"] == "stop"] == ["max_turns"]
    with pytest.raises(UsageError, match="no such file"):
        run_study(parse(str(data_dir / "missing.md")))
    with pytest.raises(WorldError, match=r"--delay: "):  # named by the flag (issue 16)
        run_study(parse(str(FOLDER / "notes.md"), "--delay", "9"))


def test_study_world_mapping_is_a_plain_world(tmp_path: Path) -> None:
    doc = tmp_path / "my notes.txt"
    doc.write_text("INTRODUCTION TO THE TOPIC\n\nSome paragraph that is long enough.\n", "utf-8")
    raw = study_world(doc, delay=2)
    assert raw["mode"] == "study" and raw["study"]["document"] == "my notes.txt"
    assert raw["study"]["delay"] == 2 and "lock" not in raw["study"]
    world = build(raw)
    assert world.topic == "Studying my notes.txt"


def test_new_study_world_files_load_and_plan(tmp_path: Path) -> None:
    from rolecall.cli.study_cmd import new_study_files

    for name, text in new_study_files("mine").items():
        (tmp_path / name).write_text(text, "utf-8")
    loaded = load_world(tmp_path)
    world = load_study(tmp_path, loaded.world)
    assert world.name == "mine" and world.topic == "Studying My study notes"
    kinds = [u.kind for u in director(world).study.units]
    assert kinds == ["introduction", "body", "conclusion"]


@pytest.mark.anyio
async def test_a_changed_document_stops_instead_of_guessing(tmp_path: Path) -> None:
    doc = await stepped_file(1, tmp_path / "session.json")
    doc.world["study"]["text"] += "\n\nA paragraph added after the session started."
    await anyio.Path(tmp_path / "session.json").write_text(doc.model_dump_json(), "utf-8")
    rec = Recorder()
    async with rolecall.resume(tmp_path / "session.json", sinks=[rec]) as session:
        await session.run()
    assert rec.stop().reason == "study_document_changed"
    assert len(session.transcript) == 1


@pytest.mark.anyio
async def test_studys_state_is_a_typed_model_stored_in_its_layout(tmp_path: Path) -> None:

    doc = await stepped_file(2, tmp_path / "session.json")
    stored = doc.state.extra["study"]
    assert list(stored) == ["version", "fingerprint", "units", "delay", "lock", "state"]
    plan = director(study()).study
    assert stored["fingerprint"] == plan.fingerprint and stored["units"] == len(plan.units)
    async with rolecall.resume(tmp_path / "session.json") as restored:
        await restored.step()  # goes on from the stored state, validated into the model
        assert restored.status.extra["study"]["state"] != stored["state"]
    assert [m.sender for m in restored.transcript][:2] == [m.sender for m in doc.messages]
    assert len(restored.transcript) == 3
