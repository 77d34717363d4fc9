"""``rolecall sessions fork``: real processes on a real data directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.cli.test_run_cli import rolecall


def run_json(*args: str) -> list[dict[str, Any]]:
    out = rolecall(*args, "--json")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


def session_of(events: list[dict[str, Any]]) -> str:
    return str(events[0]["session_id"])


def steps(events: list[dict[str, Any]]) -> list[tuple[str, int, str]]:
    return [(e["step_id"], e["loop_iteration"], e["result"]) for e in events if e["type"] == "step"]


def messages(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    return [(e["message_id"], e["sender"], e["content"]) for e in events if e["type"] == "message"]


def test_a_fork_resumes_exactly_where_the_parent_was(data_dir: Path) -> None:
    parent = run_json("run", "worlds/tutoring")
    sid = session_of(parent)
    out = rolecall("sessions", "fork", sid, "--at", "m5", "--json")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout)
    assert info["parent"] == sid and info["at"] == "m5"
    new = info["session_id"]
    assert new != sid
    resumed = run_json("resume", new)
    # the step that wrote m5 is decided again on the same history: the parent's sequence
    assert steps(resumed) == steps(parent)[4:]
    assert messages(resumed) == messages(parent)[5:]
    memory = data_dir / "memory" / new
    assert len((memory / "learner.jsonl").read_text().splitlines()) == 8
    shown = rolecall("sessions", "show", new)
    assert f"forked from {sid} at m5" in shown.stdout
    assert shown.stdout.count("[m") == 8
    listed = rolecall("sessions", "list", "--tree")
    lines = listed.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith(sid))
    assert lines[at + 1].startswith(f"└ {new} @m5")
    parent_again = rolecall("sessions", "show", sid)
    assert "forked" not in parent_again.stdout and parent_again.stdout.count("[m") == 8


def test_an_edit_is_decided_on_as_if_said(data_dir: Path) -> None:
    sid = session_of(run_json("run", "worlds/tutoring"))
    new = rolecall(
        "sessions", "fork", sid, "--at", "m4", "--edit", "UNDERSTOOD, thank you", "-q"
    ).stdout.strip()
    resumed = run_json("resume", new)
    # the learner's m4 now says UNDERSTOOD: explain's `until` holds after m5, then close
    assert steps(resumed) == [
        ("ask", 1, "success"),
        ("explain", 1, "loop_break"),
        ("close", 0, "success"),
    ]
    exported = json.loads(rolecall("sessions", "export", new, "--format", "json").stdout)
    assert exported["messages"][3]["content"] == "UNDERSTOOD, thank you"
    assert exported["state"]["extra"]["fork"] == {"parent": sid, "at": "m4"}
    for fmt in ("md", "html"):  # the status line of the readable exports says it too
        text = rolecall("sessions", "export", new, "--format", fmt).stdout
        assert f"forked from {sid} at m4" in text, fmt


def test_bad_fork_points_are_usage_errors(data_dir: Path) -> None:
    sid = session_of(run_json("run", "worlds/tutoring"))
    beyond = rolecall("sessions", "fork", sid, "--at", "m44")
    assert beyond.returncode == 2
    assert f"--at m44: session {sid} has messages m1..m8" in beyond.stderr
    bad = rolecall("sessions", "fork", sid, "--at", "four")
    assert bad.returncode == 2 and "a message id like m3" in bad.stderr
    missing = rolecall("sessions", "fork", "20990101-000000-abcdef", "--at", "m1")
    assert missing.returncode == 2 and "no session" in missing.stderr
    assert "Traceback" not in beyond.stderr + bad.stderr + missing.stderr


def test_model_gives_the_fork_another_model(tmp_path: Path) -> None:
    """A session on a provider model, forked with --model offline, goes on without it."""
    from tests.faults import Cli, write_net_guard
    from tests.llm.openai_server import OpenAITestServer, Reply
    from tests.replay.test_replay_cli import provider_world, transcript

    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    with OpenAITestServer() as server:
        server.queue(Reply("What makes tides?"), Reply("The moon, mostly."))
        world = provider_world(tmp_path, server.base_url)
        parent = cli.run("run", str(world), "--json", REPLAY_KEY="k")
        assert parent.returncode == 0, parent.stderr
    sid = json.loads(parent.stdout.splitlines()[0])["session_id"]
    out = cli.run("sessions", "fork", sid, "--at", "m1", "--model", "offline", "--json")
    assert out.returncode == 0, out.stderr
    new = json.loads(out.stdout)["session_id"]
    resumed = cli.run("resume", new, "--json")  # the server is gone: offline answers
    assert resumed.returncode == 0, resumed.stderr
    ((mid, sender, content, _, _),) = transcript(resumed.stdout)
    assert (mid, sender) == ("m2", "answerer") and content != "The moon, mostly."
    exported = json.loads(cli.run("sessions", "export", new, "--format", "json").stdout)
    assert exported["model_override"] == "offline"
    assert exported["messages"][0]["content"] == "What makes tides?"
    assert cli.refused_connections() == []
