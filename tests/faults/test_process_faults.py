"""Process faults: ``kill -9`` mid-turn and mid-save, unusable data directories, a full disk.

Every run is a real ``rolecall`` subprocess on a ``scripted`` world (no litellm import,
so these are cheap), paced with ``ROLECALL_STREAM_DELAY`` where a kill must land inside
a generation. After every fault the store is read with plain ``sqlite3``: message ids
``m1..mN`` contiguous and equal to an uninterrupted run's prefix, events gap-free, and
a later ``resume`` finishes the uninterrupted transcript without regenerating anything.

Read-only data directories: these tests run as root, where ``chmod 0o555`` does not stop
writes, so a data directory is made unusable in ways that bind root too: its path runs
through a regular file (``mkdir`` fails with ENOTDIR), or it is on a tmpfs mounted
read-only (EROFS; skipped where mounting is not allowed). A full disk is a 256 KiB
tmpfs (skipped where mounting is not allowed) or ``RLIMIT_FSIZE`` set by a small
wrapper that then ``exec``s the command (SIGXFSZ ignored, so a write past the limit
fails with EFBIG instead of killing the process); no ``preexec_fn``, which is unsafe in
a process with threads.
"""

from __future__ import annotations

import json
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import anyio
import pytest

import rolecall
from rolecall.storage.document import read_session_file
from rolecall.world.loader import parse_world
from tests.faults import (
    Cli,
    Stored,
    assert_intact,
    assert_memory_matches,
    memory_ids,
    only_session,
    stored,
    write_net_guard,
)

AGENTS = ["a", "b"]


def marathon(rounds: int, *, pad: str = "", max_turns: int = 100) -> str:
    """A two-role scripted loop: ``2 * rounds`` messages, each unique."""
    return f"""\
name: marathon
topic: surviving faults
model: scripted
settings: {{max_turns: {max_turns}}}
roles:
  - {{id: a, script: ["a{{n}} opens round {{n}} at m{{turn}} with a few more words{pad}"]}}
  - {{id: b, script: ["b{{n}} answers {{target}} at m{{turn}} in round {{n}}{pad}"]}}
flow:
  steps:
    - {{id: ask, speaker: a}}
    - {{id: answer, speaker: b, loop: {{to: ask, max: {rounds}}}}}
"""


def reference(world_text: str) -> list[str]:
    """The contents of an uninterrupted in-process run of the world."""
    world = parse_world(world_text).world

    async def go() -> rolecall.Session:
        async with rolecall.open_session(world) as session:
            await session.run()
        return session

    session = anyio.run(go)
    assert session.status.stop_reason == "flow_end"
    return [m.content for m in session.transcript]


def write_world(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(text)
    return folder


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == []


def kill_after(proc: subprocess.Popen[str], messages: int, *, then: str, pause: float = 0) -> int:
    """Read ``--json`` events until ``messages`` message events have been seen and then
    the first event of type ``then`` (e.g. a ``chunk`` of the next message); sleep
    ``pause`` and ``kill -9``. Returns the number of message events seen."""
    assert proc.stdout is not None
    seen = 0
    deadline = time.monotonic() + 40
    try:
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise AssertionError(f"the process ended before the kill point: {proc.wait()}")
            event = json.loads(line)
            if seen >= messages and event["type"] == then:
                break
            if (event["topic"], event["type"]) == ("messages", "message"):
                seen += 1
        else:
            raise AssertionError("the kill point never came")
        if pause:
            time.sleep(pause)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate(timeout=20)
    assert proc.returncode == -signal.SIGKILL
    return seen


# ------------------------------------------------------------------ kill -9 mid-turn
def test_kill_9_during_turns_loses_nothing_committed_and_resume_finishes(
    cli: Cli, tmp_path: Path
) -> None:
    text = marathon(5)
    expected = reference(text)
    world = write_world(tmp_path / "marathon", text)
    committed = 0
    # kill inside the generation of the 1st message, then of a resumed run's 4th and 3rd
    for i, new_messages in enumerate([0, 3, 2]):
        args = ("run", str(world)) if i == 0 else ("resume", only_session(cli.home))
        proc = cli.popen(*args, "--json", ROLECALL_STREAM_DELAY="0.02")
        kill_after(proc, new_messages, then="chunk")
        committed += new_messages
        s = stored(cli.home)
        assert_intact(s)
        assert s.contents == expected[:committed]  # the message being generated is lost
        assert s.drafts == []
        assert s.state == "running"  # stored before its first reply began
        assert_memory_matches(cli.home, s, AGENTS)  # memory files hold exactly the commits

    final = cli.run("resume", only_session(cli.home), "--json")
    assert final.returncode == 0, final.stderr
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == expected
    assert (s.state, s.stop_reason) == ("finished", "flow_end")
    assert set(s.generations.values()) == {1}  # nothing committed was generated twice
    assert_memory_matches(cli.home, s, AGENTS)


def test_resume_in_step_mode_after_a_kill_continues(cli: Cli, tmp_path: Path) -> None:
    text = marathon(5)
    expected = reference(text)
    world = write_world(tmp_path / "marathon", text)
    kill_after(
        cli.popen("run", str(world), "--json", ROLECALL_STREAM_DELAY="0.02"), 2, then="chunk"
    )
    sid = only_session(cli.home)

    result = cli.run("resume", sid, "--mode", "step", stdin="\n\nq\n")

    assert result.returncode == 0, result.stderr
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == expected[:4]  # two more turns, one per Enter


# ------------------------------------------------------------------ kill -9 mid-save
def test_kill_9_during_session_file_saves_never_damages_the_file(cli: Cli, tmp_path: Path) -> None:
    text = marathon(12, pad=" " + "and so on " * 10)
    expected = reference(text)
    world = write_world(tmp_path / "marathon", text)
    saved = tmp_path / "out" / "session.json"
    rng = random.Random(20261122)  # random-ish kill points, the same on every run
    kills = 4
    for i in range(kills):
        args = ("run", str(world)) if i == 0 else ("resume", only_session(cli.home))
        proc = cli.popen(
            *args, "--json", "--session-file", str(saved), ROLECALL_STREAM_DELAY="0.004"
        )
        # right after a message event the turn's file save starts; kill somewhere in it
        kill_after(proc, rng.randint(1, 4), then="message", pause=rng.uniform(0, 0.008))
        s = stored(cli.home)
        assert_intact(s)
        assert s.contents == expected[: len(s.ids)]
        assert s.state != "finished"
        # the file is a complete version: the last one written, or the one before it
        doc = read_session_file(saved)
        assert doc.session_id == s.id
        assert [m.content for m in doc.messages] == s.contents[: len(doc.messages)]
        assert len(s.ids) - 1 <= len(doc.messages) <= len(s.ids)
        # a killed save leaves at most its own hidden temporary file, never the real name
        leftovers = sorted(saved.parent.glob(f".{saved.name}.*.tmp"))
        assert len(leftovers) <= i + 1, leftovers
        assert sorted(p.name for p in saved.parent.iterdir() if p not in leftovers) == [saved.name]

    snapshot = tmp_path / "snapshot.json"
    shutil.copyfile(saved, snapshot)
    final = cli.run("resume", only_session(cli.home), "--session-file", str(saved))
    assert final.returncode == 0, final.stderr
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == expected
    assert set(s.generations.values()) == {1}
    doc = read_session_file(saved)
    assert [m.content for m in doc.messages] == expected and doc.state.state == "finished"
    # memory may hold a message twice after a kill between its memory append and its
    # commit (see test_full_disk_memory_files_match_the_store); none is missing
    for agent, ids in memory_ids(cli.home, s.id).items():
        assert list(dict.fromkeys(ids)) == s.ids, agent

    # the file as the last kill left it resumes on its own, in a fresh data directory
    elsewhere = cli.run("resume", str(snapshot), ROLECALL_HOME=str(tmp_path / "elsewhere"))
    assert elsewhere.returncode == 0, elsewhere.stderr
    fresh = stored(tmp_path / "elsewhere")
    assert_intact(fresh, gap_free=False)
    assert fresh.contents == expected


def test_resume_from_an_older_session_file_of_a_stored_session(cli: Cli, tmp_path: Path) -> None:
    text = marathon(5)
    expected = reference(text)
    world = write_world(tmp_path / "marathon", text)
    saved = tmp_path / "session.json"
    first = cli.run(
        "run", str(world), "--mode", "step", "--session-file", str(saved), stdin="\n\nq\n"
    )
    assert first.returncode == 0, first.stderr
    older = tmp_path / "older.json"
    shutil.copyfile(saved, older)  # 2 messages
    sid = only_session(cli.home)
    ahead = cli.run("resume", sid, "--mode", "auto", "--max-turns", "2")  # on to 4 messages
    assert ahead.returncode == 0, ahead.stderr
    assert len(stored(cli.home).ids) == 4

    result = cli.run("resume", str(older))

    # either it continues from the newer stored state, or it refuses clearly (usage)
    assert result.returncode in (0, 2), result.stderr
    assert "Traceback" not in result.stderr and "UNIQUE constraint" not in result.stderr
    s = stored(cli.home)
    assert_intact(s)
    assert s.contents == expected[: len(s.ids)]
    for agent, ids in memory_ids(cli.home, sid).items():
        assert ids == s.ids, agent


# ------------------------------------------------------------------ unusable data directories
@contextmanager
def tmpfs(path: Path, options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``path`` (skips the test where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        pytest.skip("no mount command: cannot simulate this device")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here (needs root): {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def remount(path: Path, options: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{options}", str(path)], check=True)


def tree(root: Path) -> dict[str, bytes | None]:
    return {
        str(p.relative_to(root)): p.read_bytes() if p.is_file() else None
        for p in sorted(root.rglob("*"))
    }


@pytest.mark.parametrize("how", ["path-through-a-file", "read-only-mount"])
def test_unusable_data_directory_is_a_clear_error_and_nothing_is_written(
    cli: Cli, tmp_path: Path, how: str
) -> None:
    world = write_world(tmp_path / "w", marathon(2))
    if how == "path-through-a-file":
        blocker = tmp_path / "blocker"
        blocker.write_bytes(b"a regular file where the data directory should go\n")
        home, cause = blocker / "home", "Not a directory"
        before = tree(tmp_path)
        result = cli.run("run", str(world), ROLECALL_HOME=str(home))
        after = tree(tmp_path)
        after.pop("guard/refused.log", None)
        assert after == before  # nothing created, nothing changed
    else:
        with tmpfs(tmp_path / "ro", "size=1m,ro") as mount:
            home, cause = mount / "home", "Read-only file system"
            result = cli.run("run", str(world), ROLECALL_HOME=str(home))
            assert list(mount.iterdir()) == []

    assert result.returncode == 1, result.stderr
    assert str(home) in result.stderr and cause in result.stderr
    assert result.stderr.startswith("rolecall: ") and "Traceback" not in result.stderr
    assert result.stdout == ""


def test_data_directory_turned_read_only_refuses_resume_and_keeps_the_session(
    cli: Cli, tmp_path: Path
) -> None:
    world = write_world(tmp_path / "w", marathon(3))
    with tmpfs(tmp_path / "disk", "size=4m") as mount:
        home = mount / "home"
        first = cli.run(
            "run", str(world), "--mode", "step", stdin="\n\nq\n", ROLECALL_HOME=str(home)
        )
        assert first.returncode == 0, first.stderr
        sid = only_session(home)  # (reading may add the -shm/-wal files: before `before`)
        before = tree(home)
        remount(mount, "ro")
        result = cli.run("resume", sid, ROLECALL_HOME=str(home))
        remount(mount, "rw")
        assert tree(home) == before
        s = stored(home)
    assert result.returncode == 1, result.stderr
    assert str(home / "rolecall.db") in result.stderr
    assert "Traceback" not in result.stderr
    assert_intact(s)
    assert len(s.ids) == 2 and (s.state, s.stop_reason) == ("finished", "manual")


def test_memory_folder_that_cannot_be_created_is_a_clear_error(cli: Cli, tmp_path: Path) -> None:
    world = write_world(tmp_path / "w", marathon(2))
    cli.home.mkdir()
    (cli.home / "memory").write_text("a file where the memory folder should be\n")

    result = cli.run("run", str(world))

    # (a memory failure inside the store-and-memory task group once escaped as an
    # ExceptionGroup traceback). What the store holds afterwards is
    # test_concurrency.py::test_a_failed_memory_write_leaves_the_store_in_step
    assert result.returncode == 1
    assert "Traceback" not in result.stderr and "ExceptionGroup" not in result.stderr
    assert result.stderr.startswith("rolecall: cannot ")
    assert str(cli.home) in result.stderr
    assert stored(cli.home).state != "finished"


# ------------------------------------------------------------------ a full disk
RLIMIT_WRAPPER = (
    "import os, resource, signal, sys\n"
    "limit = int(sys.argv[1])\n"
    "resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))\n"
    "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n"
)
FULL_DISK_WORLD = marathon(6, pad=" " + "lorem ipsum " * 20)


@dataclass
class FullDisk:
    how: str
    home: Path
    expected: list[str]
    failed: subprocess.CompletedProcess[str]
    at_failure: Stored
    memory_at_failure: dict[str, list[str]]
    resumed: subprocess.CompletedProcess[str]
    final: Stored


@pytest.fixture(scope="module", params=["tmpfs", "rlimit"])
def full_disk(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[FullDisk]:
    """One run that fills the disk mid-session, then a resume once there is room again."""
    base = tmp_path_factory.mktemp(f"disk-{request.param}")
    expected = reference(FULL_DISK_WORLD)
    world = write_world(base / "w", FULL_DISK_WORLD)
    cli = Cli(home=base / "unused", guard=write_net_guard(base / "guard"), cwd=base)

    def scenario(home: Path, prefix: list[str]) -> FullDisk:
        failed = cli.run("run", str(world), prefix=prefix, ROLECALL_HOME=str(home))
        at_failure = stored(home)
        memory = memory_ids(home, at_failure.id)
        if request.param == "tmpfs":
            remount(home.parent, "size=64m")  # room again
        resumed = cli.run("resume", at_failure.id, ROLECALL_HOME=str(home))
        return FullDisk(
            request.param, home, expected, failed, at_failure, memory, resumed, stored(home)
        )

    if request.param == "tmpfs":
        with tmpfs(base / "disk", "size=256k") as mount:
            yield scenario(mount / "home", [])
    else:
        yield scenario(base / "home", [sys.executable, "-c", RLIMIT_WRAPPER, str(192 * 1024)])
    assert cli.refused_connections() == []


def test_full_disk_fails_clearly_and_loses_nothing_committed(full_disk: FullDisk) -> None:
    failed, s = full_disk.failed, full_disk.at_failure
    assert failed.returncode == 1, failed.stderr
    assert "Traceback" not in failed.stderr
    assert str(full_disk.home) in failed.stderr  # names the file it could not write
    why = failed.stderr.replace(str(full_disk.home), "<home>")
    # ENOSPC reads "database or disk is full"; SQLite reports EFBIG (a file-size limit)
    # as a plain "disk I/O error"
    assert "disk is full" in why or "disk I/O error" in why or "too large" in why, why
    assert_intact(s)
    assert 1 <= len(s.ids) < len(full_disk.expected)
    assert s.contents == full_disk.expected[: len(s.ids)]
    assert s.state != "finished"

    assert full_disk.resumed.returncode == 0, full_disk.resumed.stderr
    final = full_disk.final
    assert_intact(final)
    assert final.contents == full_disk.expected
    assert (final.state, final.stop_reason) == ("finished", "flow_end")
    assert set(final.generations.values()) == {1}


def test_full_disk_error_says_nothing_was_lost_and_how_to_resume(full_disk: FullDisk) -> None:
    assert "nothing was lost" in full_disk.failed.stderr
    assert f"rolecall resume {full_disk.at_failure.id}" in full_disk.failed.stderr


def test_full_disk_memory_files_match_the_store(full_disk: FullDisk) -> None:
    if full_disk.how == "tmpfs":
        pytest.skip(
            "on a shared full tmpfs the memory append may fail as well; the rlimit variant "
            "(one size limit per file) shows the divergence every time"
        )
    assert full_disk.memory_at_failure == {a: full_disk.at_failure.ids for a in AGENTS}
    assert_memory_matches(full_disk.home, full_disk.final, AGENTS)
