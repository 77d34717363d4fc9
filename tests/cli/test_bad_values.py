"""Values a user gets wrong are refused up front, with exit 2 and a line naming them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall


@pytest.mark.parametrize("delay", ["-1", "nan", "inf", "soon"])
def test_a_stream_delay_that_is_not_a_number_of_seconds_is_refused(
    tmp_path: Path, delay: str
) -> None:
    ran = rolecall(
        "run",
        "classroom",
        "--data-dir",
        str(tmp_path),
        env={"ROLECALL_STREAM_DELAY": delay},
    )
    assert ran.returncode == 2
    assert f"ROLECALL_STREAM_DELAY must be a number of seconds, 0 or more, got {delay!r}" in (
        ran.stderr
    )


@pytest.mark.parametrize(
    ("model", "said"),
    [("", "give a model name"), ("scripted", "'scripted' plays a role's script: lines")],
)
def test_a_model_flag_that_cannot_work_is_refused(tmp_path: Path, model: str, said: str) -> None:
    ran = rolecall("run", "classroom", "--model", model, "--data-dir", str(tmp_path))
    assert ran.returncode == 2 and f"argument --model: {said}" in ran.stderr


def test_an_export_to_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    data = str(tmp_path / "data")
    assert rolecall("run", "classroom", "--data-dir", data, "-q").returncode == 0
    out = tmp_path / "exports"
    out.mkdir()
    done = rolecall(
        "sessions", "export", "last", "--format", "md", "--out", str(out), "--data-dir", data
    )
    assert done.returncode == 2
    assert f"{out} is a folder: give the path of a file to write" in done.stderr


def test_a_folder_given_to_study_is_named_as_one(tmp_path: Path) -> None:
    done = rolecall("study", str(tmp_path), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 2
    assert f"{tmp_path}: a folder, not a document (give a file)" in done.stderr


def test_an_unknown_mode_is_listed_once(tmp_path: Path) -> None:
    world = tmp_path / "w"
    world.mkdir()
    (world / "world.yaml").write_text("name: x\nmode: chess\nroles: [{template: teacher}]\n")
    done = rolecall("worlds", "validate", str(world))
    assert done.returncode == 2
    assert "1 problem" in done.stderr and done.stderr.count("no mode 'chess'") == 1


@pytest.mark.parametrize(
    "args", [[b"debate", b"\xff\xfe bad bytes"], [b"run", b"classroom", b"--topic", b"caf\xe9"]]
)
def test_an_argument_that_is_not_utf8_is_named_before_anything_runs(
    tmp_path: Path, args: list[bytes]
) -> None:
    done = subprocess.run(
        [
            sys.executable.encode(),
            b"-m",
            b"rolecall.cli.main",
            *args,
            b"--data-dir",
            bytes(tmp_path),
        ],
        capture_output=True,
        timeout=60,
        check=False,
        env={**os.environ, "ROLECALL_HOME": str(tmp_path)},
    )
    assert done.returncode == 2
    shown = args[-1].decode("utf-8", "backslashreplace")
    assert f"rolecall: the argument '{shown}' is not UTF-8 text" in done.stderr.decode()
    assert b"Traceback" not in done.stderr
    assert not (tmp_path / "rolecall.db").exists()  # nothing ran


@pytest.mark.parametrize(
    ("flag", "value", "said"),
    [
        ("--max-cost", "inf", "--max-cost must be more than 0 (USD) and finite, got inf"),
        ("--topic", " ", "--topic is empty: give the topic's text (or leave the flag out)"),
    ],
)
def test_a_common_flag_that_means_nothing_is_refused(
    tmp_path: Path, flag: str, value: str, said: str
) -> None:
    done = rolecall("run", "classroom", flag, value, "--data-dir", str(tmp_path))
    assert done.returncode == 2 and f"rolecall: {said}" in done.stderr


def test_a_damaged_session_file_is_refused_before_a_data_dir_is_made(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}', encoding="utf-8")
    fresh = tmp_path / "fresh"
    done = rolecall("resume", str(bad), "--data-dir", str(fresh))
    assert done.returncode == 2 and "not a rolecall session file" in done.stderr
    assert not fresh.exists()  # nothing was created for a file that was refused
