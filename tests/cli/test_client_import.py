"""A client's import is no generation time, and ``settings.client: http`` never imports
litellm: a real ``rolecall run`` against a loopback OpenAI-compatible server."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Cli, write_net_guard
from tests.llm.openai_server import OpenAITestServer, Reply

TURNS = 4


@pytest.fixture
def loopback() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


def world(folder: Path, base_url: str, client: str) -> Path:
    path = folder / "world.yaml"
    steps = ", ".join(f"{{id: s{i}, speaker: {'ab'[i % 2]}}}" for i in range(TURNS))
    path.write_text(
        f"""\
name: timed
topic: t
model: openai/gpt-4o-mini
settings:
  client: {client}
  api_base: {base_url}
  api_key_env: ROLECALL_IMPORT_TEST_KEY
  max_seconds: 1
roles: [{{id: a}}, {{id: b}}]
flow:
  steps: [{steps}]
""",
        encoding="utf-8",
    )
    return path


def test_the_lean_client_neither_imports_litellm_nor_counts_an_import_as_generating(
    loopback: OpenAITestServer, tmp_path: Path
) -> None:
    """Four replies of a few milliseconds stay far under max_seconds: 1, however long an
    import takes (litellm's: seconds, which once stopped such a run after its first turn)."""
    loopback.queue(*[Reply("Short and quick.")] * TURNS)
    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    ran = cli.run(
        "run",
        str(world(tmp_path, loopback.base_url, "http")),
        "--json",
        ROLECALL_IMPORT_TEST_KEY="x",
        PYTHONPROFILEIMPORTTIME="1",  # every import, on stderr
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    messages = [e for e in events if e.get("type") == "message"]
    assert len(messages) == TURNS, [e for e in events if e.get("type") in ("stop", "message")]
    imported = {line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines()}
    assert "aiohttp" in imported
    assert "litellm" not in imported
    assert cli.refused_connections() == []


def test_piped_chat_starts_without_the_terminal_repl_or_litellm(
    loopback: OpenAITestServer, tmp_path: Path
) -> None:
    """`rolecall chat WORLD` with its input piped (a /command included) streams its reply
    without importing the terminal REPL (its front end, completion, prompt-toolkit) or
    litellm: each costs start-up time before the first token (performance.md,
    `first_token`)."""
    loopback.queue(Reply("Piped and quick."))
    folder = tmp_path / "chat"
    folder.mkdir()
    (folder / "world.yaml").write_text(
        f"name: piped\ntopic: t\nmodel: openai/gpt-4o-mini\n"
        f"settings: {{client: http, api_base: '{loopback.base_url}', "
        "api_key_env: ROLECALL_IMPORT_TEST_KEY}\nroles: [{id: a}, {id: b}]\n",
        encoding="utf-8",
    )
    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    ran = cli.run(
        "chat",
        str(folder),
        "--json",
        stdin="/agents\n@a hello\n",
        ROLECALL_IMPORT_TEST_KEY="x",
        PYTHONPROFILEIMPORTTIME="1",  # every import, on stderr
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    replies = [e["content"] for e in events if e.get("type") == "message" and e["sender"] == "a"]
    assert replies == ["Piped and quick."], ran.stdout[-2000:]
    imported = {line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines()}
    assert "rolecall.cli.repl.runner" in imported  # the /command went through the REPL's
    terminal = {"rolecall.cli.repl.app", "rolecall.cli.repl.completion", "prompt_toolkit"}
    assert terminal & imported == set()
    assert "litellm" not in imported
    # nor the exports' helpers: only the terminal display's quoted replies use them (issue 50)
    assert "rolecall.export.common" not in imported


def test_openai_models_take_the_lean_client_by_default_with_the_sdks_variables(
    loopback: OpenAITestServer, tmp_path: Path
) -> None:
    """A world that names no client, no api_base and no key variable: its ``openai/...``
    model goes through the lean client (litellm never imported), to the server that
    ``OPENAI_BASE_URL`` names, with the key of ``OPENAI_API_KEY``, as the OpenAI SDK (and
    so litellm) would read them."""
    loopback.queue(*[Reply("Plain and lean.")] * 2)
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "world.yaml").write_text(
        "name: plain\ntopic: t\nmodel: openai/gpt-4o-mini\nroles: [{id: a}, {id: b}]\n"
        "flow: {steps: [{id: s0, speaker: a}, {id: s1, speaker: b}]}\n",
        encoding="utf-8",
    )
    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    ran = cli.run(
        "run",
        str(folder),
        "--json",
        OPENAI_BASE_URL=loopback.base_url,
        OPENAI_API_KEY="sk-lean-default-test",
        PYTHONPROFILEIMPORTTIME="1",
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr[-2000:]
    events = [json.loads(line) for line in ran.stdout.splitlines() if line.startswith("{")]
    assert [e["content"] for e in events if e.get("type") == "message"] == ["Plain and lean."] * 2
    assert [r.authorization for r in loopback.requests] == ["Bearer sk-lean-default-test"] * 2
    imported = {line.rsplit("|", 1)[-1].strip() for line in ran.stderr.splitlines()}
    assert "litellm" not in imported
    assert cli.refused_connections() == []


def test_openais_own_api_with_no_key_is_refused_before_any_request(tmp_path: Path) -> None:
    """No key anywhere and no server named: the lean client refuses at once, in litellm's
    words, and says how to give a key; nothing is sent anywhere."""
    folder = tmp_path / "nokey"
    folder.mkdir()
    (folder / "world.yaml").write_text(
        "name: nokey\ntopic: t\nmodel: openai/gpt-4o-mini\nroles: [{id: a}]\n"
        "flow: {steps: [{id: s0, speaker: a}]}\n",
        encoding="utf-8",
    )
    cli = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    ran = cli.run("run", str(folder), OPENAI_API_KEY="", OPENAI_BASE_URL="", timeout=120)
    assert ran.returncode != 0
    said = ran.stdout + ran.stderr
    assert "missing credentials: no API key for this provider" in said, said[-2000:]
    assert "OPENAI_API_KEY" in said
    assert "Traceback" not in said
    assert cli.refused_connections() == []
