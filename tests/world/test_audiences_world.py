"""The shipped `manor` world (docs/audiences.md): a side meeting the inspector never
hears of, shown by the offline model; and the checks of `audience:` and `sees:`."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import rolecall
from rolecall.errors import WorldError
from rolecall.llm.types import GenerationRequest
from rolecall.testing import FunctionModel
from rolecall.world.loader import parse_world
from tests.conftest import ROOT

pytestmark = pytest.mark.anyio

SECRETS = ("ledger", "greenhouse")  # said only at the side meeting
MANOR = ROOT / "worlds" / "manor" / "world.yaml"


def spoken_by(transcript: list[rolecall.TranscriptMessage], role: str) -> str:
    return " ".join(m.content for m in transcript if m.sender == role).lower()


async def test_the_manor_runs_offline_and_the_inspector_never_speaks_of_the_side_meeting(
    tmp_path: Path,
) -> None:
    result = await rolecall.run(ROOT / "worlds" / "manor", data_dir=tmp_path)
    assert result.stop_reason == "flow_end"
    async with rolecall.resume(result.session_id, data_dir=tmp_path, mode="step") as s:
        transcript = s.transcript
        private = [m for m in transcript if m.audience is not None]
        assert [m.step_id for m in private] == ["whisper", "confide"]
        assert all(m.audience == ["gardener", "butler"] for m in private)
        assert any(w in spoken_by(transcript, "butler") for w in SECRETS)  # he heard it
        inspector = spoken_by(transcript, "inspector")
        assert inspector and not any(w in inspector for w in SECRETS)
        assert not any(
            w in " ".join(m.content for m in s.seen_by("inspector")).lower() for w in SECRETS
        )
        # the press step answers the latest message the inspector saw: the alibi
        press = next(m for m in transcript if m.step_id == "press")
        assert press.reply_to == next(m.id for m in transcript if m.step_id == "alibi")


async def test_without_the_audiences_the_secret_reaches_the_inspector(tmp_path: Path) -> None:
    """The difference the audiences make, shown by the same offline model."""
    data = yaml.safe_load(MANOR.read_text("utf-8"))
    for step in data["flow"]["steps"]:
        step.pop("audience", None)
    result = await rolecall.run(data, data_dir=tmp_path)
    async with rolecall.resume(result.session_id, data_dir=tmp_path, mode="step") as s:
        assert any(w in spoken_by(s.transcript, "inspector") for w in SECRETS)


async def test_a_role_that_sees_only_some_others_is_never_given_the_rest() -> None:
    world = {
        "name": "hall",
        "model": "offline",
        "roles": [{"id": "ann"}, {"id": "bob"}, {"id": "cid", "sees": ["ann"]}],
        "flow": {
            "steps": [
                {"id": "a", "speaker": "ann", "reply_to": "none"},
                {"id": "b", "speaker": "bob", "reply_to": "none"},
                {"id": "c", "speaker": "cid"},
            ]
        },
    }
    given: dict[str, list[str]] = {}

    def reply(request: GenerationRequest) -> str:
        given.setdefault(request.info.speaker, []).append(
            "\n".join(m.content for m in request.messages)
        )
        return f"{request.info.speaker} says zanzibar-{request.info.speaker}"

    async with rolecall.open_session(world, models={"offline": FunctionModel(reply)}) as s:
        await s.run()
        assert [m.id for m in s.seen_by("cid")] == ["m1", "m3"]
        c = s.transcript[-1]
    assert "zanzibar-ann" in given["cid"][0] and "zanzibar-bob" not in given["cid"][0]
    assert c.reply_to == "m1"  # bob's m2 (the previous step) is not heard: ann's is answered


@pytest.mark.parametrize(
    ("patch", "problem"),
    [
        (
            {"roles": [{"id": "ann", "sees": ["bbo"]}, {"id": "bob"}]},
            "roles[0].sees[0]: no role 'bbo' (did you mean bob?",
        ),
        (
            {"roles": [{"id": "ann", "sees": ["human"]}, {"id": "bob"}]},
            "roles[0].sees[0]: 'human' need not be listed",
        ),
        (
            {"flow": {"steps": [{"id": "s", "speaker": "ann", "audience": ["ann", "eve"]}]}},
            "flow.steps[0].audience[1]: no role 'eve'",
        ),
        (
            {"flow": {"steps": [{"id": "s", "speaker": "ann", "audience": []}]}},
            "flow.steps[0].audience",
        ),
    ],
)
def test_unknown_ids_in_sees_and_audience_are_named_where_they_are(
    patch: dict[str, object], problem: str
) -> None:
    data: dict[str, object] = {"name": "w", "roles": [{"id": "ann"}, {"id": "bob"}], **patch}
    with pytest.raises(WorldError) as info:
        parse_world(yaml.safe_dump(data))
    assert any(problem in p for p in info.value.problems), info.value.problems


def test_a_recorded_manor_replays_with_its_audiences_and_the_inspectors_calls_lack_the_secret(
    tmp_path: Path,
) -> None:
    import json
    import os
    import subprocess
    import sys

    store = tmp_path / "manor.jsonl"
    env = {**os.environ, "ROLECALL_HOME": str(tmp_path / "home"), "NO_COLOR": "1"}

    def run(*flags: str) -> list[dict[str, object]]:
        done = subprocess.run(
            [sys.executable, "-m", "rolecall", "run", "manor", "--json", "--replay-file",
             str(store), *flags],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        records = [json.loads(line) for line in done.stdout.splitlines()]
        return [r for r in records if r["type"] == "message"]

    recorded = run("--record")
    replayed = run("--replay")
    shape = [(m["sender"], m["content"], m.get("audience")) for m in recorded]
    assert shape == [(m["sender"], m["content"], m.get("audience")) for m in replayed]
    assert [m.get("audience") for m in replayed if m.get("audience")] == [
        ["gardener", "butler"],
        ["gardener", "butler"],
    ]
    calls = [json.loads(line) for line in store.read_text("utf-8").splitlines()]
    inspector = [json.dumps(c["request"]).lower() for c in calls if c["role"] == "inspector"]
    assert len(inspector) == 3  # his three turns, each request as recorded
    assert not any(w in text for text in inspector for w in SECRETS)
    butler = [json.dumps(c["request"]).lower() for c in calls if c["role"] == "butler"]
    assert any(w in text for text in butler for w in SECRETS)  # the marker is there to find
