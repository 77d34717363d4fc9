"""A read-only data directory (a shared archive, a backup, a read-only mount): the reading
commands work, the writing ones say clearly that they cannot write, nothing is changed.

As root, permissions do not stop writes, so the data directory is bind-mounted read-only
(the kernel refuses every write, root's too); as another user, it is made read-only with
chmod."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(folder.rglob("*"))
    }


@pytest.fixture
def archive(tmp_path: Path) -> Iterator[Path]:
    """A data dir with a stored session, seen read-only."""
    data = tmp_path / "data"
    done = rolecall("run", "tutoring", "--data-dir", str(data), "-q")
    assert done.returncode == 0, done.stderr
    if os.geteuid() != 0:
        for p in [data, *data.rglob("*")]:
            p.chmod(p.stat().st_mode & ~0o222)
        yield data
        for p in [data, *data.rglob("*")]:
            p.chmod(p.stat().st_mode | 0o200)
        return
    view = tmp_path / "ro"
    view.mkdir()
    mount = shutil.which("mount") or "/bin/mount"
    bound = subprocess.run([mount, "--bind", str(data), str(view)], check=False).returncode == 0
    if not bound:  # no mount privilege (a container): the immutable attribute stops root too
        yield from _immutable(data)
        return
    try:
        subprocess.run([mount, "-o", "remount,bind,ro", str(view)], check=True)
        with pytest.raises(OSError, match="Read-only file system"):
            (view / "probe").write_text("x")  # really read-only, even for root
        yield view
    finally:
        subprocess.run([shutil.which("umount") or "/bin/umount", str(view)], check=True)


def _immutable(data: Path) -> Iterator[Path]:
    chattr = shutil.which("chattr") or "/usr/bin/chattr"
    paths = [str(p) for p in [data, *data.rglob("*")]]
    made = subprocess.run([chattr, "+i", *paths], check=False, capture_output=True, text=True)
    if made.returncode != 0:
        pytest.fail(f"cannot make {data} read-only for root (mount, chattr): {made.stderr}")
    try:
        yield data
    finally:
        subprocess.run([chattr, "-i", *paths], check=True)


def test_reading_commands_work_on_a_read_only_data_dir(archive: Path, tmp_path: Path) -> None:
    before = _snapshot(archive)
    listed = rolecall("sessions", "list", "--json", "--data-dir", str(archive))
    assert listed.returncode == 0, listed.stderr
    (row,) = json.loads(listed.stdout)
    sid = row["session_id"]
    shown = rolecall("sessions", "show", "last", "--data-dir", str(archive))
    assert shown.returncode == 0, shown.stderr
    assert "status: finished" in shown.stdout
    traced = rolecall("sessions", "trace", sid, "--data-dir", str(archive))
    assert traced.returncode == 0, traced.stderr
    out = tmp_path / "copy.md"
    exported = rolecall(
        "sessions", "export", sid, "--format", "md", "--out", str(out), "--data-dir", str(archive)
    )
    assert exported.returncode == 0, exported.stderr
    assert out.read_text("utf-8").count("\n") > 10
    memory = rolecall("memory", "show", sid, "tutor", "--data-dir", str(archive))
    assert memory.returncode == 0, memory.stderr
    assert "memory of tutor" in memory.stdout
    searched = rolecall("sessions", "list", "--search", "summer", "--data-dir", str(archive))
    assert searched.returncode == 0 and sid in searched.stdout, searched.stderr
    assert _snapshot(archive) == before  # nothing created, nothing touched


def test_writing_commands_say_the_store_cannot_be_written(archive: Path) -> None:
    before = _snapshot(archive)
    for args in (("sessions", "delete", "last"), ("resume", "last")):
        done = rolecall(*args, "--data-dir", str(archive))
        assert done.returncode == 1, (args, done.stderr)
        assert f"cannot open the session store {archive / 'rolecall.db'}" in done.stderr
        assert "Traceback" not in done.stderr
    assert _snapshot(archive) == before
