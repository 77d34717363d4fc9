"""The second pass of outside testing (issue 13): each defect found, as a user meets it.

Real ``rolecall`` subprocesses on scripted worlds, with the net guard of
``tests/faults``; the store is read with plain ``sqlite3`` afterwards.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from rolecall.storage.schema import MIGRATIONS, statements
from tests.faults import Cli, assert_intact, only_session, session_ids, stored, write_net_guard


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == []


def write(path: Path, text: str) -> str:
    path.write_text(text, encoding="utf-8")
    return str(path)


def exited(proc: subprocess.CompletedProcess[str], code: int) -> str:
    assert proc.returncode == code, f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


BACKTRACKING = """\
name: rx
topic: patterns
model: scripted
roles:
  - {id: a, script: ["aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!"]}
flow:
  stop: [{regex: "(a|aa)+$"}, {max_seconds: 5}]
  steps: [{id: s, speaker: a}]
"""


def test_a_backtracking_regex_ends_the_run_with_the_condition_named(
    cli: Cli, tmp_path: Path
) -> None:
    world = write(tmp_path / "rx.yaml", BACKTRACKING)
    err = exited(cli.run("run", world, timeout=30), 1)
    assert "flow stop condition {regex: (a|aa)+$} on the latest message (m1)" in err
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == ["a" * 40 + "!"] and s.state == "paused"
    # resume does not hang at the same place: the same error, nothing regenerated
    err = exited(cli.run("resume", s.id, timeout=30), 1)
    assert "flow stop condition {regex: (a|aa)+$}" in err
    assert stored(cli.home, s.id).generations == {"m1": 1}
    assert only_session(cli.home) == s.id


# ------------------------------------------------------------------ 2: a fresh data dir
SMALL = """\
name: small
topic: first use
model: scripted
roles:
  - {id: a, script: ["a says {n}"]}
flow:
  steps: [{id: s, speaker: a}]
"""


def test_several_runs_at_once_on_a_fresh_data_dir_all_succeed(cli: Cli, tmp_path: Path) -> None:
    world = write(tmp_path / "small.yaml", SMALL)
    procs = [cli.popen("run", world, "-q") for _ in range(6)]
    for proc in procs:
        _, err = proc.communicate(timeout=50)
        assert proc.returncode == 0, err
        assert "already exists" not in err and "Traceback" not in err
    assert len(session_ids(cli.home)) == 6


def _opened_by(pid: int, path: Path) -> bool:
    fds = Path(f"/proc/{pid}/fd")
    try:
        return any(os.readlink(fd) == str(path) for fd in fds.iterdir())
    except OSError:
        return False


def test_a_run_waits_for_another_process_creating_the_schema(cli: Cli, tmp_path: Path) -> None:
    """The other process holds the write lock while it creates the tables; rolecall has
    read the version (0) by then, waits for the lock, and must find the tables made."""
    world = write(tmp_path / "small.yaml", SMALL)
    cli.home.mkdir()
    path = cli.home / "rolecall.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("PRAGMA journal_mode=WAL")
    holder.execute("BEGIN IMMEDIATE")
    proc = cli.popen("run", world, "-q")
    try:
        deadline = time.monotonic() + 40
        while not _opened_by(proc.pid, path) and proc.poll() is None:
            assert time.monotonic() < deadline, "rolecall never opened the store"
            time.sleep(0.02)
        time.sleep(0.3)  # it reads the version, then asks for the write lock
        for number, script in enumerate(MIGRATIONS):
            for statement in statements(script):
                holder.execute(statement)
            holder.execute(f"PRAGMA user_version = {number + 1}")
        holder.execute("COMMIT")
    finally:
        holder.close()
    _, err = proc.communicate(timeout=50)
    assert proc.returncode == 0, err
    assert stored(cli.home).state == "finished"


# ------------------------------------------------------------------ 3: no standard input
CHAT = """\
name: room
topic: nothing to read
model: scripted
roles:
  - {id: a, script: ["a says {n}"]}
"""


@pytest.mark.parametrize("stdin", ["</dev/null", "<&-"], ids=["dev-null", "closed"])
@pytest.mark.parametrize("command", ["chat", "step"])
def test_no_input_pauses_at_end_of_input(
    cli: Cli, tmp_path: Path, stdin: str, command: str
) -> None:
    """Under cron, CI, systemd or a container without -i: epoll refuses /dev/null."""
    if command == "chat":
        args = ["chat", write(tmp_path / "room.yaml", CHAT)]
    else:
        args = ["run", write(tmp_path / "small.yaml", SMALL), "--mode", "step"]
    wrapper = ["sh", "-c", f'exec "$@" {stdin}', "sh"]
    exited(cli.run(*args, prefix=wrapper), 0)
    s = stored(cli.home)
    assert (s.state, s.pause_reason) == ("paused", "end_of_input")


# ------------------------------------------------------------------ 5: a damaged store
DAMAGED_ADVICE = "PRAGMA integrity_check"


def _damage(home: Path) -> None:
    """Overwrite every page after the first (the header stays: it still opens)."""
    path = home / "rolecall.db"
    size = path.stat().st_size
    with path.open("r+b") as out:
        out.seek(4096)
        out.write(bytes((i * 7 + 13) % 256 for i in range(size - 4096)))


@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "list"],
        ["sessions", "show", "{sid}"],
        ["sessions", "trace", "{sid}"],
        ["sessions", "export", "{sid}", "--format", "json"],
        ["resume", "{sid}"],
        ["memory", "show", "{sid}", "a"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
def test_a_damaged_store_is_a_clear_error(cli: Cli, tmp_path: Path, command: list[str]) -> None:
    exited(cli.run("run", write(tmp_path / "small.yaml", SMALL), "-q"), 0)
    sid = only_session(cli.home)
    _damage(cli.home)
    err = exited(cli.run(*(c.format(sid=sid) for c in command)), 1)
    assert str(cli.home / "rolecall.db") in err and "is damaged" in err, err
    assert DAMAGED_ADVICE in err and "backup" in err, err


def test_a_bad_message_row_is_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    exited(cli.run("run", write(tmp_path / "small.yaml", SMALL), "-q"), 0)
    sid = only_session(cli.home)
    with sqlite3.connect(cli.home / "rolecall.db") as db:
        db.execute("UPDATE messages SET body = '{\"id\": 3}' WHERE session_id = ?", (sid,))
    for command in (["sessions", "show", sid], ["resume", sid]):
        err = exited(cli.run(*command), 1)
        assert str(cli.home / "rolecall.db") in err and f"session {sid}" in err, err
        assert "message" in err and "backup" in err, err


# ------------------------------------------------------------------ 7: messages, not tracebacks
TWO = """\
name: two
topic: resuming damaged files
model: scripted
roles:
  - {id: a, script: ["a says {n}"]}
flow:
  steps: [{id: s, speaker: a}, {id: t, speaker: a}]
"""


def _damaged_file(doc: dict[str, Any], how: str) -> None:
    if how == "missing-step":
        doc["state"]["pointer"]["current"] = "nope"
    elif how == "huge-last-seq":
        doc["last_seq"] = 2**70
    else:
        del doc["events"][1]["topic"]


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("missing-step", "its state names step 'nope', which its flow does not have"),
        ("huge-last-seq", "damaged session file: last_seq"),
        (
            "event-without-topic",
            "damaged session file: events: Value error, events[1] has no 'topic'",
        ),
    ],
)
def test_resume_of_a_damaged_session_file_says_what_is_wrong(
    cli: Cli, tmp_path: Path, how: str, says: str
) -> None:
    saved = tmp_path / "saved.json"
    world = write(tmp_path / "two.yaml", TWO)
    exited(cli.run("run", world, "--mode", "step", "--session-file", str(saved), stdin="\n"), 0)
    doc = json.loads(saved.read_text())
    _damaged_file(doc, how)
    saved.write_text(json.dumps(doc))
    err = exited(cli.run("resume", str(saved), ROLECALL_HOME=str(tmp_path / "elsewhere")), 2)
    assert says in err, err


def test_a_log_file_that_cannot_be_opened_is_a_usage_error(cli: Cli) -> None:
    err = exited(cli.run("sessions", "list", "--log-file", "/nonexistent/x.log"), 2)
    assert "--log-file /nonexistent/x.log: cannot open it: No such file or directory" in err


@pytest.mark.parametrize("command", ["list", "run-json"])
def test_a_failed_write_to_stdout_exits_1(cli: Cli, tmp_path: Path, command: str) -> None:
    world = write(tmp_path / "small.yaml", SMALL)
    exited(cli.run("run", world, "-q"), 0)
    args = ["sessions", "list"] if command == "list" else ["run", world, "--json"]
    wrapper = ["sh", "-c", 'exec "$@" >/dev/full', "sh"]
    err = exited(cli.run(*args, prefix=wrapper), 1)
    assert "cannot write to standard output: No space left on device" in err


# ------------------------------------------------------------------ 6: the last event
def test_a_storage_failure_still_ends_the_json_stream_with_a_pause(
    cli: Cli, tmp_path: Path
) -> None:
    """events.md: every run ends with one world/stop or world/session paused; after a
    failed commit (a file-size limit) it can only be sent, not stored."""
    from tests.faults.test_process_faults import FULL_DISK_WORLD, RLIMIT_WRAPPER

    world = write(tmp_path / "big.yaml", FULL_DISK_WORLD)
    limit = [sys.executable, "-c", RLIMIT_WRAPPER, str(192 * 1024)]
    result = cli.run("run", world, "--json", prefix=limit)
    exited(result, 1)
    events = [json.loads(line) for line in result.stdout.splitlines()]
    endings = [
        e
        for e in events
        if (e["topic"], e["type"]) == ("world", "stop")
        or ((e["topic"], e["type"]) == ("world", "session") and e["state"] == "paused")
    ]
    assert len(endings) == 1, endings
    assert events[-1] == endings[0] and endings[0]["reason"] == "error"
    error = events[-2]
    assert (error["topic"], error["type"], error["source"]) == ("system", "error", "store")
    assert "cannot write to the session store" in error["error"]
    assert stored(cli.home).state != "paused"  # it could not be stored


@pytest.mark.parametrize("json_mode", [False, True])
def test_a_session_file_that_cannot_be_written_leaves_the_session_paused_by_the_error(
    cli: Cli, tmp_path: Path, json_mode: bool
) -> None:
    """The store is fine when the session file fails (a directory given): what happened
    is stored as for a model failure, a system/error event and the session paused with
    reason error (it once stayed `running`); `resume` then goes on."""
    world = write(tmp_path / "two.yaml", SMALL.replace("[{id: s, speaker: a}]", TWO_STEPS))
    (tmp_path / "dir").mkdir()
    extra = ["--json"] if json_mode else []
    err = exited(cli.run("run", world, "--session-file", str(tmp_path / "dir"), *extra), 1)
    # on a terminal the command's message says it once (no display line before it)
    assert err.startswith(f"rolecall: cannot write session file {tmp_path / 'dir'}: ")
    sid = only_session(cli.home)
    assert f"`rolecall resume {sid}` continues it" in err
    s = stored(cli.home)
    assert (s.state, s.pause_reason, s.ids) == ("paused", "error", ["m1"])
    assert_intact(s)
    with sqlite3.connect(cli.home / "rolecall.db") as db:
        last = [
            json.loads(record)
            for (record,) in db.execute(
                "SELECT record FROM events WHERE session_id = ? ORDER BY seq DESC LIMIT 2", (sid,)
            )
        ]
    assert (last[1]["type"], last[1]["source"]) == ("error", "store")
    assert "cannot write session file" in last[1]["error"]
    assert (last[0]["type"], last[0]["state"], last[0]["reason"]) == ("session", "paused", "error")
    exited(cli.run("resume", sid), 0)
    s = stored(cli.home)
    assert (s.state, s.stop_reason, s.ids) == ("finished", "flow_end", ["m1", "m2"])


TWO_STEPS = "[{id: s, speaker: a}, {id: t, speaker: a}]"


# ------------------------------------------------------------------ edges: SIGTERM
@pytest.mark.parametrize("when", ["mid-generation", "between-turns"])
def test_sigterm_pauses_the_session_and_exits_143(cli: Cli, tmp_path: Path, when: str) -> None:
    """A service manager's stop: like Ctrl-C, the session is saved as paused."""
    from tests.faults.test_process_faults import marathon

    world = write(tmp_path / "m.yaml", marathon(5))
    proc = cli.popen("run", world, "--json", ROLECALL_STREAM_DELAY="0.05")
    assert proc.stdout is not None
    deadline = time.monotonic() + 40
    while time.monotonic() < deadline:
        event = json.loads(proc.stdout.readline())
        if when == "mid-generation" and event["type"] == "chunk":
            break
        if when == "between-turns" and event["type"] == "message":
            break
    proc.send_signal(signal.SIGTERM)
    out, err = cli.rest(proc, timeout=40)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "terminated; session" in err
    last = json.loads(out.splitlines()[-1])
    assert (last["topic"], last["type"], last["state"]) == ("world", "session", "paused")
    s = stored(cli.home)
    assert s.state == "paused"
    assert_intact(s)
    assert len(s.ids) < 10  # stopped early, everything committed kept


# ------------------------------------------------------------------ edges: --out a special file
@pytest.mark.parametrize("fmt", ["md", "json"])
def test_export_to_a_device_writes_to_it_and_keeps_it(cli: Cli, tmp_path: Path, fmt: str) -> None:
    """`--out /dev/null` must not replace the device with a regular file (a /dev/null
    made in tmp_path here, so no test ever touches the real one)."""
    exited(cli.run("run", write(tmp_path / "small.yaml", SMALL), "-q"), 0)
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("mknod is not allowed here")
    sid = only_session(cli.home)
    exited(cli.run("sessions", "export", sid, "--format", fmt, "--out", str(null)), 0)
    assert stat.S_ISCHR(null.stat().st_mode), "the device was replaced"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".null")] == []


def test_export_to_a_named_pipe_streams_into_it(cli: Cli, tmp_path: Path) -> None:
    exited(cli.run("run", write(tmp_path / "small.yaml", SMALL), "-q"), 0)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    exited(
        cli.run("sessions", "export", only_session(cli.home), "--format", "md", "--out", str(fifo)),
        0,
    )
    reader.join(timeout=20)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got and b"a says 1" in got[0]
