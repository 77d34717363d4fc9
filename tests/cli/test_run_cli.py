"""`rolecall run` driven as a user would: real subprocesses, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rolecall.bus import Envelope
from tests.conftest import ROOT

COMMON = {"topic", "type", "seq", "session_id", "ts"}
FIELDS = {
    ("messages", "message"): {
        "message_id",
        "sender",
        "content",
        "reply_to",
        "target",
        "mentions",
        "step_id",
        "loop_iteration",
        "turn",
        "input_tokens",
        "output_tokens",
        "cost_usd",
    },
    ("sse", "start"): {"message_id", "sender"},
    ("sse", "chunk"): {"message_id", "sender", "delta", "output_tokens"},
    ("sse", "end"): {"message_id", "sender", "input_tokens", "output_tokens"},
    ("system", "step"): {"step_id", "speaker", "execution_order", "loop_iteration", "result"},
    ("system", "condition"): {"condition", "result", "detail"},
    ("world", "session"): {"state"},
    ("world", "stop"): {"reason", "detail"},
}


def rolecall(
    *args: str, cwd: Path = ROOT, env: dict[str, str] | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=cwd,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=60,
        input=stdin,
        check=False,
    )


def test_json_stream_follows_events_md(data_dir: Path) -> None:
    result = rolecall("run", "worlds/classroom", "--json")
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert records, "no events"
    session_ids = {r["session_id"] for r in records}
    assert len(session_ids) == 1
    assert [r["seq"] for r in records] == list(range(1, len(records) + 1))
    for record in records:
        assert set(record) >= COMMON, record
        kind = (record["topic"], record["type"])
        assert FIELDS.get(kind, set()) <= set(record), (kind, record)
        Envelope.from_record(record)  # every line is a valid typed event
    # the sample lines of events.md have exactly the fields of the events they show
    fields = {(r["topic"], r["type"]): list(r) for r in records}
    sample = Path(__file__).parents[2] / "docs" / "events.md"
    shown = [
        json.loads(line)
        for line in sample.read_text("utf-8").splitlines()
        if line.startswith('{"topic":')
    ]
    assert shown
    for line in shown:
        kind = (line["topic"], line["type"])
        assert kind not in fields or list(line) == fields[kind], (kind, list(line))
    stops = [r for r in records if r["topic"] == "world" and r["type"] == "stop"]
    assert len(stops) == 1 and records[-1] == stops[0]
    assert stops[0]["reason"] == "flow_end"
    messages = [r for r in records if r["type"] == "message"]
    assert messages[0]["message_id"] == "m1" and messages[0]["step_id"] == "intro"
    assert all(m["turn"] == i for i, m in enumerate(messages, start=1))
    # chunks of each message join to its content
    for m in messages:
        chunks = [
            r["delta"]
            for r in records
            if r["type"] == "chunk" and r["message_id"] == m["message_id"]
        ]
        assert "".join(chunks) == m["content"]


def test_same_world_twice_gives_identical_messages(data_dir: Path) -> None:
    runs = [rolecall("run", "classroom", "--json") for _ in range(2)]
    contents = [
        [json.loads(x)["content"] for x in r.stdout.splitlines() if '"type":"message"' in x]
        for r in runs
    ]
    assert contents[0] == contents[1]
    assert len(contents[0]) >= 5


def test_terminal_output_shows_headers_tokens_and_total(data_dir: Path) -> None:
    result = rolecall("run", "classroom", env={"NO_COLOR": "1"})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "teacher [step intro]" in out
    assert "student → teacher [step ask]" in out
    assert "teacher → student [step explain · loop 1]" in out
    assert "↑" in out and "↓" in out
    assert "stopped: flow_end" in out and "session total ↑" in out
    assert "\033[" not in out  # plain text when not a terminal


def test_max_turns_and_topic_flags(data_dir: Path) -> None:
    result = rolecall(
        "run", "classroom", "--json", "--max-turns", "3", "--topic", "Why is the sky blue?"
    )
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert sum(r["type"] == "message" for r in records) == 3
    assert records[-1]["reason"] == "max_turns"


def test_broken_world_exits_2_listing_every_problem_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "broken"
    folder.mkdir()
    (folder / "world.yaml").write_text(
        """
name: broken
roles:
  - id: teacher
    sytem_prompt: hi
  - id: student
  - id: student
flow:
  steps:
    - {id: intro, speaker: profesor}
"""
    )
    home = tmp_path / "home"
    result = rolecall("run", str(folder), env={"ROLECALL_HOME": str(home)})
    assert result.returncode == 2
    err = result.stderr
    assert "3 problems" in err
    assert "roles[0].sytem_prompt: unknown field (did you mean system_prompt?)" in err
    assert "roles[2].id: duplicate id 'student'" in err
    assert "flow.steps[0].speaker: no role 'profesor'" in err
    assert result.stdout == ""
    assert not home.exists()


def test_bad_yaml_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "world.yaml"
    path.write_text("name: x\nroles: [\n")
    result = rolecall("run", str(path))
    assert result.returncode == 2
    assert "invalid YAML" in result.stderr and str(path) in result.stderr


def test_unknown_world_name_exits_2() -> None:
    result = rolecall("run", "clasroom")
    assert result.returncode == 2
    assert "no world 'clasroom'" in result.stderr and "classroom" in result.stderr


def test_validate_command(tmp_path: Path) -> None:
    ok = rolecall("worlds", "validate", "worlds/classroom")
    assert ok.returncode == 0 and "ok (5 roles, 7 steps)" in ok.stdout
    (tmp_path / "world.yaml").write_text(
        "name: x\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: b}]}\n"
    )
    bad = rolecall("worlds", "validate", str(tmp_path))
    assert bad.returncode == 2 and "flow.steps[0].speaker: no role 'b'" in bad.stderr


def run_probe(code: str) -> subprocess.CompletedProcess[str]:
    """``python -c code`` from the repository root (what it reports is on stderr)."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
        check=False,
    )  # fmt: skip


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["run", "--help"], ["run", "worlds/classroom", "--json"]],
)
def test_help_and_offline_runs_never_import_litellm(argv: list[str], data_dir: Path) -> None:
    code = (
        "import sys\n"
        "from rolecall.cli.main import main\n"
        "try:\n"
        f"    main({argv!r})\n"
        "except SystemExit:\n"
        "    pass\n"
        "sys.stderr.write('LITELLM=%s' % ('litellm' in sys.modules))\n"
    )
    result = run_probe(code)
    assert "LITELLM=False" in result.stderr, result.stderr[-2000:]


def test_an_offline_run_loads_only_what_its_world_uses(data_dir: Path) -> None:
    """The first message comes sooner (issue 18: <= 0.3 s): a world without a mode, a
    `regex:` condition, a remote role or tracing, run with --json, imports none of the
    modules those need (each was imported by every run before); nor the exports'
    helpers, which only the terminal display's quoted replies use (issue 50)."""
    code = (
        "import sys\n"
        "from rolecall.cli.main import main\n"
        "main(['run', 'worlds/classroom', '--json', '--max-turns', '1'])\n"
        "unused = ('rolecall.modes.debate', 'rolecall.modes.consensus', 'rolecall.modes.study',\n"
        "          'rolecall.nats.agents', 'rolecall.export.html', 'regex', 'wcwidth',\n"
        "          'opentelemetry.trace', 'rolecall.export.common')\n"
        "sys.stderr.write('LOADED=%s' % sorted(m for m in unused if m in sys.modules))\n"
    )
    result = run_probe(code)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "LOADED=[]" in result.stderr, result.stderr[-2000:]


@pytest.mark.parametrize(
    "argv",
    [["sessions", "list"], ["worlds", "validate", "worlds/classroom"]],
    ids=["sessions-list", "worlds-validate"],
)
def test_a_command_without_a_display_imports_neither_display_nor_bus(
    argv: list[str], data_dir: Path
) -> None:
    """Every command's dispatcher notes stdout's failures (issue 50): it does so without
    importing the terminal display, and through it the bus and the event models, which a
    command that shows no session never uses (about 55 modules of each such start)."""
    code = (
        "import sys\n"
        "from rolecall.cli.main import main\n"
        f"code = main({argv!r})\n"
        "heavy = ('rolecall.cli.display', 'rolecall.bus', 'rolecall.bus.events')\n"
        "sys.stderr.write('CODE=%s LOADED=%s' % (code, sorted(m for m in heavy if m in sys.modules)))\n"
    )
    result = run_probe(code)
    assert "CODE=0 LOADED=[]" in result.stderr, result.stderr[-2000:]


def test_structlog_is_imported_by_the_first_line_logged(data_dir: Path) -> None:
    """A run that logs nothing starts without structlog (about 15 ms, issue 18); the
    next, with -v, logs its lines to stderr as before."""
    code = (
        "import sys\n"
        "from rolecall.cli.main import main\n"
        "main(['run', 'worlds/classroom', '--json', '--max-turns', '1'])\n"
        "sys.stderr.write('QUIET=%s\\n' % ('structlog' in sys.modules))\n"
        "main(['run', 'worlds/classroom', '--json', '--max-turns', '1', '-v'])\n"
        "sys.stderr.write('VERBOSE=%s\\n' % ('structlog' in sys.modules))\n"
    )
    result = run_probe(code)
    assert result.returncode == 0, result.stderr[-2000:]
    quiet, verbose = result.stderr.split("QUIET=False\n")
    assert quiet == ""  # nothing was logged, nothing printed
    assert verbose.endswith("VERBOSE=True\n"), verbose
    finished = [line for line in verbose.splitlines() if "session_finished" in line]
    assert len(finished) == 1 and "[info     ]" in finished[0], verbose
    assert "[rolecall.runtime]" in finished[0] and "reason=max_turns" in finished[0]


@pytest.mark.parametrize("extra", [[], ["--json"]], ids=["text", "json"])
def test_a_reader_that_goes_away_is_not_an_error(extra: list[str], data_dir: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "run", "classroom", *extra],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read()
    proc.stderr.close()
    assert proc.wait(timeout=60) == 0
    assert "Broken pipe" not in err and "subscriber" not in err


def test_ctrl_c_while_step_mode_waits_for_enter_pauses_and_exits_130(data_dir: Path) -> None:
    import signal
    import time

    proc = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "run", "classroom", "--mode", "step"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 30
    line = ""
    while "[Enter] next turn" not in line and time.monotonic() < deadline:
        line = proc.stderr.readline()
    proc.send_signal(signal.SIGINT)
    proc.wait(timeout=30)  # stdin stays open: only the signal can end the wait
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130
    assert "saved as paused" in err
    assert "teacher [step intro]" not in out  # no turn ran


def test_resume_goes_on_in_the_mode_the_session_was_last_run_in(data_dir: Path) -> None:
    ran = rolecall("run", "tutoring", "--mode", "step", stdin="\n")
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.count("[step ") == 1
    sid = ran.stderr.rstrip().splitlines()[-1].split("resume ", 1)[1].split()[0]
    stepped = rolecall("resume", sid, stdin="")  # step mode still: no Enter, no turn
    assert stepped.returncode == 0, stepped.stderr
    assert "[Enter] next turn" in stepped.stderr and "[step " not in stepped.stdout
    auto = rolecall("resume", sid, "--mode", "auto", "--max-turns", "1", stdin="")
    assert auto.returncode == 0, auto.stderr
    assert auto.stdout.count("[step ") == 1 and "[Enter]" not in auto.stderr
    again = rolecall("resume", sid, stdin="")  # auto now: on to the flow's end
    assert again.returncode == 0, again.stderr
    assert "[Enter]" not in again.stderr and "stopped: flow_end" in again.stdout
