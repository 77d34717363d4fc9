"""A file that is not UTF-8 (a world, a role, a session file, a list of values, a replay
store, a study document) is named with where its first bad byte is: exit 2, one clear
line, no traceback; the library raises the error type it documents."""

from __future__ import annotations

import subprocess
from pathlib import Path

import anyio
import pytest

import rolecall
from rolecall.errors import NotTextError, UsageError
from rolecall.paths import decode_text, read_text
from tests.cli.test_run_cli import rolecall as run_cli

BAD_WORLD = b'name: bw\nroles:\n  - id: a\n    description: "\xff\xfe"\n'
WHERE = "not UTF-8 text: byte 0xff at line 4, column 19"


def test_the_shared_reader_names_the_byte_and_where_it_is(tmp_path: Path) -> None:
    path = tmp_path / "x.txt"
    path.write_bytes(b"caf\xc3\xa9\nna\xc3\xafve \xe9t\xc3\xa9")  # Latin-1 in UTF-8
    with pytest.raises(NotTextError) as info:
        read_text(path)
    assert info.value.problem == "not UTF-8 text: byte 0xe9 at line 2, column 7"
    assert str(info.value) == f"{path}: {info.value.problem} (save it as UTF-8)"
    assert isinstance(info.value, UsageError)
    # a byte-order mark, dropped by utf-8-sig, does not shift the position
    with pytest.raises(NotTextError, match="byte 0xff at line 1, column 3"):
        decode_text(b"\xef\xbb\xbfab\xff", "doc", "utf-8-sig")


def test_the_library_raises_world_error_and_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bw").mkdir()
    (tmp_path / "bw" / "world.yaml").write_bytes(BAD_WORLD)
    with pytest.raises(rolecall.WorldError) as info:
        rolecall.load_world("bw")
    assert info.value.problems == [f"{WHERE} (save the file as UTF-8)"]
    assert info.value.source == str(tmp_path / "bw" / "world.yaml")

    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe x\n")

    async def resume() -> None:
        async with rolecall.resume(tmp_path / "bad.txt"):
            pass

    with pytest.raises(rolecall.UsageError) as failed:
        anyio.run(resume)
    assert str(failed.value) == (
        f"{tmp_path / 'bad.txt'}: not a session file "
        "(not UTF-8 text: byte 0xff at line 1, column 1)"
    )


def test_a_role_file_that_is_not_utf8_is_a_problem_of_the_world(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "mine.yaml").write_bytes(b'description: "\xff"\n')
    (roles / "torn.yaml").write_bytes(b"description: [\n")
    world = {
        "name": "w",
        "topic": "t",
        "roles": [{"template": "mine"}, {"template": "torn"}, {"id": "b"}],
    }
    with pytest.raises(rolecall.WorldError) as info:
        rolecall.load_world(world, data_dir=tmp_path)
    assert info.value.problems == [
        f"roles[0].template: role file {roles / 'mine.yaml'}: not UTF-8 text: byte 0xff at "
        "line 1, column 15 (save it as UTF-8)",
        f"roles[1].template: role file {roles / 'torn.yaml'}: line 2, column 1: invalid YAML: "
        "expected the node content, but found '<stream end>'",
    ]


def _one_clear_line(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr and "UnicodeDecodeError" not in result.stderr
    assert expected in result.stderr


@pytest.mark.parametrize("command", ["validate", "run"])
def test_a_world_file_that_is_not_utf8_exits_2(
    data_dir: Path, tmp_path: Path, command: str
) -> None:
    (tmp_path / "bw").mkdir()
    (tmp_path / "bw" / "world.yaml").write_bytes(BAD_WORLD)
    argv = ["worlds", "validate", "bw"] if command == "validate" else ["run", "bw"]
    result = run_cli(*argv, cwd=tmp_path)
    _one_clear_line(result, f"{tmp_path / 'bw' / 'world.yaml'}: 1 problem\n  {WHERE}")
    assert not data_dir.exists()  # nothing was stored


def test_a_session_file_that_is_not_utf8_exits_2(data_dir: Path, tmp_path: Path) -> None:
    (tmp_path / "bad.txt").write_bytes(b"\xff\xfe x\n")
    result = run_cli("resume", "./bad.txt", cwd=tmp_path)
    _one_clear_line(
        result,
        "rolecall: bad.txt: not a session file (not UTF-8 text: byte 0xff at line 1, column 1)",
    )


def test_role_files_values_and_replay_stores_that_are_not_utf8_exit_2(
    data_dir: Path, tmp_path: Path
) -> None:
    roles = data_dir / "roles"
    roles.mkdir(parents=True)
    (roles / "mine.yaml").write_bytes(b'description: "\xff"\n')
    bad_role = f"{roles / 'mine.yaml'}: not UTF-8 text: byte 0xff at line 1, column 15"
    _one_clear_line(run_cli("roles", "show", "mine", cwd=tmp_path), bad_role)
    _one_clear_line(run_cli("roles", "edit", "mine", "--name", "M", cwd=tmp_path), bad_role)
    listing = run_cli("roles", "list", cwd=tmp_path)
    assert listing.returncode == 0
    assert "(invalid: not UTF-8 text: byte 0xff at line 1, column 15" in listing.stdout

    (tmp_path / "topics.txt").write_bytes(b"tea\n\xffcoffee\n")
    result = run_cli(
        "batch", "classroom", "--vary", "topic=@topics.txt", "--model", "offline", cwd=tmp_path
    )
    _one_clear_line(
        result,
        "topic: topics.txt: not UTF-8 text: byte 0xff at line 2, column 1 (save it as UTF-8)",
    )

    (tmp_path / "calls.jsonl").write_bytes(b'{"key": "\xff"}\n')
    result = run_cli(
        "run",
        "classroom",
        "--model",
        "offline",
        "--replay",
        "--replay-file",
        "calls.jsonl",
        cwd=tmp_path,
    )
    _one_clear_line(
        result, "replay file calls.jsonl: not UTF-8 text: byte 0xff at line 1, column 10"
    )
