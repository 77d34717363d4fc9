"""Provider faults, end to end: real ``rolecall`` processes against a loopback provider.

Each run is a real ``rolecall run`` / ``rolecall resume`` subprocess whose roles use
``openai/test-model`` at the loopback OpenAI-compatible server of ``tests/llm`` (run in
this process as a thread). The server picks its behaviour per flow step: every step's
instruction is ``STEP=<id>``, a step's planned faults are served first, then the step's
own reply (so a retry after a fault gets the reply). Every reply text is unique, so a
lost or repeated message shows.

Each subprocess pays for importing litellm (seconds), so checks are combined per run:
after every run the store, the memory files, the session file, the log file and the
output are checked, including that the API key (set in the environment and really
sent to the server) is in none of them.

What a fault does (found here): HTTP 429 and 5xx, a connection dropped before any text
and garbage (lines that are not JSON) before any text are retried inside the turn, and
the run completes; a timeout that outlasts the retries, or a stream that breaks after
some text (garbage after text counts as that, see tests/llm), pauses the session with
reason ``error``: exit 1, the partial text kept as a draft, ``resume`` completes it.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter, deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rolecall.storage.document import read_session_file
from tests.faults import (
    Cli,
    Stored,
    assert_intact,
    assert_memory_matches,
    assert_secret_absent,
    files_under,
    only_session,
    stored,
    write_net_guard,
)
from tests.llm.openai_server import (
    Behaviour,
    Break,
    Garbage,
    Html,
    OpenAITestServer,
    Reply,
    Stall,
    Status,
    Truncated,
)

KEY_ENV = "ROLECALL_FAULTS_API_KEY"
KEY = "sk-rolecall-faults-7d41c9e2a05b88f3"
STEPS = ["one", "two", "three", "four"]
ROLES = ["asker", "answerer"]
TEXT = {
    "one": "Alpha opens the session on step one.",
    "two": "Beta answers alpha on step two.",
    "three": "Gamma follows beta on step three.",
    "four": "Delta closes the session on step four.",
}
PARTIAL = "Gamma was cut off"  # what step three says before its stream breaks
_STEP = re.compile(r"STEP=([a-z]+)")


def step_of(body: dict[str, Any]) -> str:
    """The flow step a chat-completions request is for (from its last message)."""
    messages = body.get("messages") or [{}]
    match = _STEP.search(str(messages[-1].get("content", "")))
    assert match, f"a request without a STEP marker: {body}"
    return match.group(1)


class StepScript:
    """Stands in for the test server's behaviour queue, choosing by flow step.

    The server records a request (its JSON body included) and then pops its
    behaviour under the same lock, so the newest recorded request is the one being
    served.
    """

    def __init__(self, records: list[Any], plan: dict[str, list[Behaviour]]) -> None:
        self._records = records
        self._plan = {step: deque(faults) for step, faults in plan.items()}

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Behaviour:
        step = step_of(self._records[-1].body)
        faults = self._plan.get(step)
        return faults.popleft() if faults else Reply(TEXT[step])

    def clear(self) -> None:
        self._plan.clear()


def script(server: OpenAITestServer, **plan: list[Behaviour]) -> None:
    """Forget earlier requests; serve ``plan[step]`` first for each step, then its reply."""
    server.reset()
    state = server._server.state  # the server's own queue is replaced, nothing else
    state.behaviours = StepScript(state.requests, plan)  # type: ignore[assignment]


def requests_per_step(server: OpenAITestServer) -> dict[str, int]:
    return dict(Counter(step_of(r.body) for r in server.requests))


@pytest.fixture(scope="module")
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(
        home=tmp_path / "home",
        guard=write_net_guard(tmp_path / "guard"),
        cwd=tmp_path,
        env_extra={KEY_ENV: KEY},
    )
    yield runner
    assert runner.refused_connections() == [], "a subprocess tried to leave the loopback"


def write_world(
    folder: Path, server: OpenAITestServer, *, timeout: float, retries: int, client: str = "litellm"
) -> Path:
    world = folder / "faults"
    world.mkdir()
    steps = "\n".join(
        f'    - {{id: {step}, speaker: {ROLES[i % 2]}, instruction: "STEP={step}"}}'
        for i, step in enumerate(STEPS)
    )
    (world / "world.yaml").write_text(
        f"""\
name: faults
topic: what a flaky provider does to a session
model: openai/test-model
settings:
  timeout: {timeout}
  retries: {retries}
  api_base: "{server.base_url}"
  api_key_env: {KEY_ENV}
  client: {client}
roles:
  - {{id: asker, name: Asker}}
  - {{id: answerer, name: Answerer}}
flow:
  steps:
{steps}
"""
    )
    return world


def assert_finished_cleanly(cli: Cli, s: Stored) -> None:
    assert_intact(s)
    assert s.contents == [TEXT[step] for step in STEPS]
    assert (s.state, s.stop_reason) == ("finished", "flow_end")
    assert s.steps == [(step, f"m{i}") for i, step in enumerate(STEPS, start=1)]
    assert_memory_matches(cli.home, s, ROLES)


def assert_key_sent_and_kept_secret(
    server: OpenAITestServer, artefacts: list[Path], outputs: list[str]
) -> None:
    assert {r.authorization for r in server.requests} == {f"Bearer {KEY}"}
    checked = assert_secret_absent(KEY, files=files_under(*artefacts), texts=outputs)
    assert checked >= 4  # the store, two memory files, the session file, the log


def test_subprocesses_cannot_leave_the_loopback_interface(cli: Cli) -> None:
    """The guard every subprocess of these suites runs under: installed, and refusing."""
    probe = (
        "import socket, sitecustomize\n"
        "assert socket.socket.connect is sitecustomize.connect  # before any attempt\n"
        "for target in (('203.0.113.7', 443), ('198.51.100.1', 80)):\n"
        "    with socket.socket() as s:\n"
        "        try:\n"
        "            s.connect(target)\n"
        "        except ConnectionRefusedError as exc:\n"
        "            print('refused', exc)\n"
        "try:\n"
        "    socket.getaddrinfo('api.openai.com', 443)\n"
        "except socket.gaierror:\n"
        "    print('no lookup')\n"
        "with socket.create_server(('127.0.0.1', 0)) as server:\n"
        "    socket.create_connection(server.getsockname()).close()  # loopback is fine\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe], env=cli.env(), capture_output=True, text=True, timeout=30
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("refused") == 2 and "no lookup" in result.stdout
    assert len(cli.refused_connections()) == 3
    cli.net_log.unlink()  # the fixture checks that nothing else was refused


@pytest.mark.parametrize("client", ["litellm", "http"])  # http: llm/openai_http.py
def test_transient_failures_are_retried_and_the_run_completes(
    server: OpenAITestServer, cli: Cli, tmp_path: Path, client: str
) -> None:
    world = write_world(tmp_path, server, timeout=5.0, retries=2, client=client)
    script(
        server,
        one=[Status(429, "slow down", type="rate_limit_error")],
        two=[Status(500, "the server fell over")],
        three=[Garbage()],  # lines that are not JSON before any text
        four=[Break("")],  # the connection drops before any text
    )
    session_file, log_file = tmp_path / "session.json", tmp_path / "rolecall.log"

    result = cli.run(
        "run", str(world), "--session-file", str(session_file), "--log-file", str(log_file), "-vv"
    )  # -vv: debug lines (the openai SDK's included) in the log, where a key could leak

    assert result.returncode == 0, result.stderr
    s = stored(cli.home)
    assert_finished_cleanly(cli, s)
    assert s.drafts == []
    assert s.generations == {f"m{i}": 1 for i in range(1, 5)}  # retries are inside one turn
    assert requests_per_step(server) == {step: 2 for step in STEPS}
    log = log_file.read_text("utf-8")
    for cause in ("rate limited, HTTP 429", "server error, HTTP 500", "not valid JSON"):
        assert cause in log, f"no provider_retry log line says {cause!r}"
    assert [m.id for m in read_session_file(session_file).messages] == s.ids
    assert_key_sent_and_kept_secret(
        server, [cli.home, session_file, log_file], [result.stdout, result.stderr]
    )


def run_to_a_pause(
    cli: Cli, world: Path, flags: tuple[str, ...], outputs: list[str], *, what: str
) -> Stored:
    """``rolecall run`` up to a provider failure: exit 1, paused `error`, said so."""
    first = cli.run("run", str(world), *flags)
    outputs += [first.stdout, first.stderr]
    assert first.returncode == 1, first.stderr
    sid = only_session(cli.home)
    assert what in first.stderr  # what failed
    assert "nothing was lost" in first.stderr
    assert f"rolecall resume {sid}" in first.stderr
    assert "Traceback" not in first.stderr
    s = stored(cli.home, sid)
    assert_intact(s)
    assert (s.state, s.pause_reason) == ("paused", "error")
    return s


def resume_to_the_end(cli: Cli, sid: str, flags: tuple[str, ...], outputs: list[str]) -> Stored:
    """``rolecall resume ID`` once the provider behaves: the flow completes cleanly."""
    resumed = cli.run("resume", sid, *flags)
    outputs += [resumed.stdout, resumed.stderr]
    assert resumed.returncode == 0, resumed.stderr
    s = stored(cli.home, sid)
    assert_finished_cleanly(cli, s)
    return s


def test_provider_timeout_pauses_with_error_and_resume_completes(
    server: OpenAITestServer, cli: Cli, tmp_path: Path
) -> None:
    world = write_world(tmp_path, server, timeout=1.5, retries=1)
    script(server, two=[Stall(10), Stall(10)])  # silent past the timeout, on every attempt
    session_file, log_file = tmp_path / "session.json", tmp_path / "rolecall.log"
    flags = ("--session-file", str(session_file), "--log-file", str(log_file))
    outputs: list[str] = []

    s = run_to_a_pause(cli, world, flags, outputs, what="timed out after 1.5 s (2 attempts)")
    assert s.contents == [TEXT["one"]]  # what was said before the failure is kept
    assert [(d["message_id"], d["content"], d["reason"]) for d in s.drafts] == [("m2", "", "error")]
    doc = read_session_file(session_file)
    assert doc.state.pause_reason == "error" and [m.id for m in doc.messages] == ["m1"]

    s = resume_to_the_end(cli, s.id, flags, outputs)
    # one model call per committed message, plus the failed one; step one is not redone
    assert s.generations == {"m1": 1, "m2": 2, "m3": 1, "m4": 1}
    assert requests_per_step(server) == {"one": 1, "two": 3, "three": 1, "four": 1}
    doc = read_session_file(session_file)
    assert [m.id for m in doc.messages] == s.ids and doc.state.state == "finished"
    assert_key_sent_and_kept_secret(server, [cli.home, session_file, log_file], outputs)


def test_stream_broken_mid_message_keeps_a_draft_and_resume_completes(
    server: OpenAITestServer, cli: Cli, tmp_path: Path
) -> None:
    world = write_world(tmp_path, server, timeout=5.0, retries=2)
    script(server, three=[Break(PARTIAL)])  # some words, then the connection drops
    session_file, log_file = tmp_path / "session.json", tmp_path / "rolecall.log"
    flags = ("--session-file", str(session_file), "--log-file", str(log_file))
    outputs: list[str] = []

    s = run_to_a_pause(cli, world, flags, outputs, what="stream broke after")
    assert s.contents == [TEXT["one"], TEXT["two"]]
    # the partial text is a draft, outside the history; text already streamed is never
    # retried (the reader would see it twice)
    assert [(d["message_id"], d["content"], d["reason"]) for d in s.drafts] == [
        ("m3", PARTIAL, "error")
    ]
    assert requests_per_step(server)["three"] == 1
    doc = read_session_file(session_file)
    assert [d.content for d in doc.drafts] == [PARTIAL] and len(doc.messages) == 2

    s = resume_to_the_end(cli, s.id, flags, outputs)
    assert [d["content"] for d in s.drafts] == [PARTIAL]  # kept, still outside
    assert not any(PARTIAL in m["content"] for m in s.messages)
    assert s.generations == {"m1": 1, "m2": 1, "m3": 2, "m4": 1}
    assert requests_per_step(server) == {"one": 1, "two": 1, "three": 2, "four": 1}
    assert_key_sent_and_kept_secret(server, [cli.home, session_file, log_file], outputs)


def test_an_html_page_or_a_stream_without_finish_reason_is_never_a_complete_message(
    server: OpenAITestServer, cli: Cli, tmp_path: Path
) -> None:
    """HTTP 200 with an HTML page (a captive portal) is retried inside the turn; a stream
    that ends cleanly without a finish reason or [DONE] (a proxy cutting it short) is a
    broken stream: its text stays a draft, the session pauses, resume completes it."""
    world = write_world(tmp_path, server, timeout=5.0, retries=2)
    script(server, two=[Html()], three=[Truncated(PARTIAL)])
    outputs: list[str] = []

    s = run_to_a_pause(cli, world, (), outputs, what="stream broke after")
    assert s.contents == [TEXT["one"], TEXT["two"]]  # step two: the page retried, then replied
    assert requests_per_step(server)["two"] == 2
    assert [(d["message_id"], d["content"], d["reason"]) for d in s.drafts] == [
        ("m3", PARTIAL, "error")
    ]
    s = resume_to_the_end(cli, s.id, (), outputs)
    assert not any(m["content"] == PARTIAL for m in s.messages)
    assert s.generations == {"m1": 1, "m2": 1, "m3": 2, "m4": 1}


@pytest.mark.parametrize("client", ["litellm", "http"])  # http: llm/openai_http.py
def test_a_lone_surrogate_from_the_provider_is_replaced_and_the_run_completes(
    server: OpenAITestServer, cli: Cli, tmp_path: Path, client: str
) -> None:
    """Half a UTF-16 pair (a broken provider's `\\ud83d` JSON escape) can be neither
    stored nor printed as UTF-8: it becomes U+FFFD, and the session goes on."""
    world = write_world(tmp_path, server, timeout=5.0, retries=0, client=client)
    script(server, two=[Reply("broken \ud83d emoji and \udc00 here")])

    result = cli.run("run", str(world), "--json")

    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    s = stored(cli.home)
    assert (s.state, s.stop_reason) == ("finished", "flow_end")
    assert s.contents[1] == "broken \ufffd emoji and \ufffd here"
    printed = [json.loads(line) for line in result.stdout.splitlines()]
    said = next(e for e in printed if e["type"] == "message" and e["sender"] == "answerer")
    assert said["content"] == "broken \ufffd emoji and \ufffd here"
    assert_memory_matches(cli.home, s, ROLES)
