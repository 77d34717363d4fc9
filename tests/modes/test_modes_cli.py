"""The preset commands' functions (the lead wires them into ``rolecall``)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from rolecall.cli.main import main
from rolecall.cli.modes_cmd import add_parsers, new_world_yaml, run_consensus, run_debate
from rolecall.errors import UsageError, WorldError
from rolecall.world.loader import parse_world
from tests.llm.openai_server import OpenAITestServer


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="rolecall")
    add_parsers(p.add_subparsers(dest="command"))
    return p


def records(out: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def test_debate_arguments() -> None:
    args = parser().parse_args(
        [
            "debate",
            "Tax sugar",
            "--profile",
            "business",
            "--max-turns",
            "4",
            "--no-dynamic",
            "--judge",
            "--json",
        ]
    )
    assert args.command == "debate" and args.topic_arg == "Tax sugar"
    assert (args.profile, args.max_turns, args.no_dynamic, args.judge) == (
        "business",
        4,
        True,
        True,
    )
    args = parser().parse_args(["debate", "Tax sugar", "--pro", "a doctor", "--con", "a grocer"])
    assert (args.pro, args.con, args.mode) == ("a doctor", "a grocer", "auto")


def test_consensus_arguments() -> None:
    args = parser().parse_args(
        [
            "consensus",
            "Pick a DB",
            "--profile",
            "brainstorm",
            "--max-rounds",
            "2",
            "--max-turns",
            "9",
        ]
    )
    assert (args.topic_arg, args.profile, args.max_rounds, args.max_turns) == (
        "Pick a DB",
        "brainstorm",
        2,
        9,
    )


def test_run_debate_runs_a_stored_session_to_the_synthesis(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = parser().parse_args(
        [
            "debate",
            "Cities should ban cars",
            "--max-turns",
            "4",
            "--json",
            "--data-dir",
            str(data_dir),
        ]
    )
    assert run_debate(args) == 0
    events = records(capsys.readouterr().out)
    messages = [e for e in events if e["type"] == "message"]
    assert [m["sender"] for m in messages] == ["pro", "con", "pro", "con", "moderator"]
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "max_turns"
    assert (data_dir / "rolecall.db").is_file()


def test_run_debate_reports_an_unknown_profile(data_dir: Path) -> None:
    args = parser().parse_args(["debate", "X", "--profile", "comedy", "--data-dir", str(data_dir)])
    with pytest.raises(WorldError) as info:
        run_debate(args)
    assert info.value.problems == [
        "--profile: unknown profile 'comedy' "  # named by the flag (issue 16)
        "(profiles: classic, technical, business, scientific, ethical, political)"
    ]


def test_run_consensus_with_a_hard_cap(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = parser().parse_args(
        ["consensus", "Pick a database", "--max-turns", "2", "--json", "--data-dir", str(data_dir)]
    )
    assert run_consensus(args) == 0
    events = records(capsys.readouterr().out)
    assert [e["sender"] for e in events if e["type"] == "message"] == ["analyst", "creative"]
    assert events[-1]["reason"] == "max_turns"


@pytest.mark.parametrize("mode", ["debate", "consensus"])
def test_new_world_yaml_is_a_valid_world(mode: str) -> None:
    text = new_world_yaml(mode, "my-world")
    world = parse_world(text).world
    assert world.name == "my-world" and world.mode == mode
    assert "rolecall run worlds/my-world" in text


def test_new_world_yaml_refuses_unknown_presets_and_bad_names() -> None:
    with pytest.raises(UsageError, match="presets: debate, consensus"):
        new_world_yaml("study-group", "x")
    with pytest.raises(UsageError, match="bad world name"):
        new_world_yaml("debate", "My World")


# --------------------------------------------- the common flags, as `rolecall run` has them
@pytest.fixture
def loopback(monkeypatch: pytest.MonkeyPatch) -> Iterator[OpenAITestServer]:
    """An OpenAI-compatible server on 127.0.0.1 that litellm's ``openai/`` models call
    (``OPENAI_API_BASE``): a call that should not happen is seen, never sent out."""
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "*")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-modes-test-0123456789")
    with OpenAITestServer() as srv:
        monkeypatch.setenv("OPENAI_API_BASE", srv.base_url)
        monkeypatch.setenv("OPENAI_BASE_URL", srv.base_url)
        yield srv


@pytest.mark.parametrize("command", ["debate", "consensus"])
def test_max_cost_stops_a_preset_before_the_first_call(
    command: str,
    loopback: OpenAITestServer,
    data_dir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = parser().parse_args(
        [
            *(command, "Cities should ban cars", "--model", "openai/gpt-4o-mini"),
            # the next call's estimate counts its reply cap (1024 tokens, real-models.md)
            *("--max-cost", "0.0001", "--json", "--data-dir", str(data_dir)),
        ]
    )
    run = run_debate if command == "debate" else run_consensus
    assert run(args) == 0
    events = records(capsys.readouterr().out)
    assert events[-1]["type"] == "stop" and events[-1]["reason"] == "max_cost"
    assert "exceeds max_cost $0.0001" in str(events[-1]["detail"])
    assert [e for e in events if e["type"] == "message"] == []
    assert loopback.requests == []  # the budget was checked before the call


@pytest.mark.parametrize("command", ["debate", "consensus"])
@pytest.mark.parametrize("value", ["-1", "0", "nan"])
def test_a_preset_refuses_a_bad_max_cost(command: str, value: str, data_dir: Path) -> None:
    args = parser().parse_args([command, "X", f"--max-cost={value}", "--data-dir", str(data_dir)])
    run = run_debate if command == "debate" else run_consensus
    with pytest.raises(
        UsageError, match=rf"--max-cost must be more than 0 \(USD\) and finite, got {value}"
    ):
        run(args)
    assert not (data_dir / "rolecall.db").exists()  # refused before anything is stored


@pytest.mark.parametrize("command", ["debate", "consensus"])
def test_a_preset_takes_its_topic_from_the_topic_flag(
    command: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_debate if command == "debate" else run_consensus
    for words in (["--topic", "Tax sugar"], ["Tax sugar", "--topic", "Tax sugar"]):
        args = parser().parse_args(
            [command, *words, "--max-turns", "2", "--json", "--data-dir", str(data_dir)]
        )
        assert run(args) == 0
        assert records(capsys.readouterr().out)[-1]["type"] == "stop"
    assert main(["sessions", "list", "--json", "--data-dir", str(data_dir)]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [s["preview"] for s in listed] == ["Tax sugar", "Tax sugar"]  # the topic


@pytest.mark.parametrize("command", ["debate", "consensus"])
def test_a_preset_refuses_an_empty_or_a_second_topic(command: str, data_dir: Path) -> None:
    run = run_debate if command == "debate" else run_consensus

    def refused(*words: str) -> str:
        args = parser().parse_args([command, *words, "--data-dir", str(data_dir)])
        with pytest.raises(UsageError) as info:
            run(args)
        return str(info.value)

    assert refused("--topic", "").startswith("--topic is empty")
    assert refused("X", "--topic", " ").startswith("--topic is empty")
    assert "TOPIC 'A' and --topic 'B'" in refused("A", "--topic", "B")
    for words in ([], [""], ["  "]):
        message = refused(*words)
        assert message.startswith("a TOPIC is required")
        assert f"rolecall {command} " in message  # the hint names this command
        assert "rolecall debate" not in message or command == "debate"


@pytest.mark.parametrize(
    ("command", "profiles"),
    [
        ("debate", "classic, technical, business, scientific, ethical, political"),
        ("consensus", "balanced, technical-review, brainstorm, five-voices"),
    ],
)
def test_an_empty_profile_is_an_unknown_profile(
    command: str, profiles: str, data_dir: Path
) -> None:
    args = parser().parse_args([command, "X", "--profile", "", "--data-dir", str(data_dir)])
    run = run_debate if command == "debate" else run_consensus
    with pytest.raises(WorldError) as info:
        run(args)
    assert info.value.problems == [f"--profile: unknown profile '' (profiles: {profiles})"]


def test_an_empty_persona_is_refused_not_ignored(data_dir: Path) -> None:
    args = parser().parse_args(["debate", "X", "--pro", "", "--data-dir", str(data_dir)])
    with pytest.raises(WorldError) as info:
        run_debate(args)
    assert [p.split(":")[0] for p in info.value.problems] == ["--pro"]
