"""Record and replay of model calls, end to end: real processes, the loopback server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.faults import Cli, write_net_guard
from tests.llm.openai_server import OpenAITestServer, Reply

SECRET = "sk-test-very-secret-value"


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == [], "a subprocess tried to leave the loopback"


def provider_world(folder: Path, base_url: str, extra: str = "") -> Path:
    """A world of the loopback provider through rolecall's lean HTTP client: recording
    and replay wrap any model, and each process importing litellm would add about ten
    seconds (litellm's own path is tests/faults/test_provider_faults.py)."""
    world = folder / "panel"
    world.mkdir(exist_ok=True)
    (world / "world.yaml").write_text(
        f"""\
name: panel
topic: topic alpha
model: openai/test-model
settings: {{retries: 0, timeout: 5, client: http, api_base: "{base_url}", api_key_env: REPLAY_KEY{extra}}}
roles: [{{id: asker}}, {{id: answerer, temperature: 0.2}}]
flow:
  steps: [{{id: ask, speaker: asker}}, {{id: answer, speaker: answerer}}]
""",
        encoding="utf-8",
    )
    return world


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def transcript(stdout: str) -> list[tuple[Any, ...]]:
    return [
        (e["message_id"], e["sender"], e["content"], e["input_tokens"], e["output_tokens"])
        for e in events(stdout)
        if e["type"] == "message"
    ]


def chunks(stdout: str) -> list[tuple[str, str]]:
    return [(e["message_id"], e["delta"]) for e in events(stdout) if e["type"] == "chunk"]


def test_record_then_replay_with_the_server_stopped(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "calls.jsonl"
    with OpenAITestServer() as server:
        server.queue(
            Reply("What is a tide, and why twice a day?", prompt_tokens=21, completion_tokens=9),
            Reply("The moon pulls the sea; Earth turns under both bulges.", prompt_tokens=40),
        )
        world = provider_world(tmp_path, server.base_url)
        recorded = cli.run(
            "run",
            str(world),
            "--json",
            "--record",
            "--replay-file",
            str(store),
            REPLAY_KEY=SECRET,
        )
        assert recorded.returncode == 0, recorded.stderr
        assert len(server.requests) == 2
    # the server is gone: a single request would fail the run
    replayed = cli.run("run", str(world), "--json", "--replay", "--replay-file", str(store))
    assert replayed.returncode == 0, replayed.stderr
    assert transcript(replayed.stdout) == transcript(recorded.stdout)
    assert transcript(recorded.stdout)[1][2].startswith("The moon pulls the sea")
    assert chunks(replayed.stdout) == chunks(recorded.stdout)  # same chunk boundaries
    assert len(chunks(recorded.stdout)) > 4
    text = store.read_text(encoding="utf-8")
    assert SECRET not in text  # keys never enter the store
    lines = [json.loads(line) for line in text.splitlines()]
    assert [r["role"] for r in lines] == ["asker", "answerer"]
    assert lines[1]["finish_reason"] == "stop"
    assert lines[1]["request"]["temperature"] == 0.2


def test_a_miss_names_role_step_and_the_nearest_recording(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "calls.jsonl"
    with OpenAITestServer() as server:
        world = provider_world(tmp_path, server.base_url)
        first = cli.run("run", str(world), "--record", "--replay-file", str(store), REPLAY_KEY="k")
        assert first.returncode == 0, first.stderr
    missed = cli.run(
        "run", str(world), "--replay", "--replay-file", str(store), "--topic", "topic beta"
    )
    assert missed.returncode == 1
    assert "replay: no recorded call for role asker, step ask" in missed.stderr
    assert "nearest recorded request: role asker, step ask" in missed.stderr
    assert "topic alpha" in missed.stderr and "topic beta" in missed.stderr
    assert "Traceback" not in missed.stderr


def test_settings_replay_or_call_records_what_is_missing_then_serves_it(
    cli: Cli, tmp_path: Path
) -> None:
    with OpenAITestServer() as server:
        world = provider_world(
            tmp_path, server.base_url, ", replay: replay-or-call, replay_file: calls.jsonl"
        )
        first = cli.run("run", str(world), "--json", REPLAY_KEY="k")
        assert first.returncode == 0, first.stderr
        assert len(server.requests) == 2
        assert (world / "calls.jsonl").exists()  # next to the world, as settings say
        again = cli.run("run", str(world), "--json", REPLAY_KEY="k")
        assert again.returncode == 0, again.stderr
        assert len(server.requests) == 2  # everything served from the store
        assert transcript(again.stdout) == transcript(first.stdout)


def test_debate_records_and_replays_the_offline_model(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "debate.jsonl"
    args = ("debate", "Cities should ban cars", "--max-turns", "4", "--json")
    recorded = cli.run(*args, "--record", "--replay-file", str(store))
    assert recorded.returncode == 0, recorded.stderr
    replayed = cli.run(*args, "--replay", "--replay-file", str(store))
    assert replayed.returncode == 0, replayed.stderr
    assert transcript(replayed.stdout) == transcript(recorded.stdout)
    assert len(store.read_text(encoding="utf-8").splitlines()) == len(transcript(recorded.stdout))


def test_a_miss_is_said_once(cli: Cli, tmp_path: Path) -> None:
    store = tmp_path / "empty.jsonl"
    store.write_text("", encoding="utf-8")
    missed = cli.run("run", "classroom", "--replay", "--replay-file", str(store), "-q")
    assert missed.returncode == 1
    assert missed.stderr.count("no recorded call for role teacher, step intro") == 1, missed.stderr


def test_a_reply_cut_by_hygiene_is_recorded_as_read_and_replays_the_same_cut(
    cli: Cli, tmp_path: Path
) -> None:
    """real-models.md: a cut closes the model's stream before its usage; the recording
    keeps what was read, and the replay cuts it the same way."""
    store = tmp_path / "calls.jsonl"
    loop = "The tide comes in and the tide goes out again. " * 20
    with OpenAITestServer() as server:
        server.queue(Reply("What is a tide?"), Reply(loop))
        world = provider_world(tmp_path, server.base_url)
        recorded = cli.run(
            "run", str(world), "--json", "--record", "--replay-file", str(store), REPLAY_KEY=SECRET
        )
        assert recorded.returncode == 0, recorded.stderr
    said = "The tide comes in and the tide goes out again."
    assert transcript(recorded.stdout)[1][2] == f"{said} {said}"
    replayed = cli.run("run", str(world), "--json", "--replay", "--replay-file", str(store))
    assert replayed.returncode == 0, replayed.stderr
    assert transcript(replayed.stdout) == transcript(recorded.stdout)
    assert chunks(replayed.stdout) == chunks(recorded.stdout)
    trims = [(e["kind"], e["removed"]) for e in events(replayed.stdout) if e["type"] == "trim"]
    assert trims == [
        (e["kind"], e["removed"]) for e in events(recorded.stdout) if e["type"] == "trim"
    ]
    assert [kind for kind, _ in trims] == ["repetition"]
