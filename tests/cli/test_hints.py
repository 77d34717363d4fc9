"""Every command printed for the user works when pasted as printed (piped runs)."""

from __future__ import annotations

import shlex
from pathlib import Path

from tests.cli.test_run_cli import rolecall


def _pasted(line: str, prefix: str) -> list[str]:
    """The words of the command after ``prefix`` on ``line`` (without ``rolecall``)."""
    assert prefix in line, line
    words = shlex.split(line.split(prefix, 1)[1])
    assert words[0] == "rolecall"
    return words[1:]


def _quoted(text: str) -> list[str]:
    """The words of each `rolecall ...` in ``text`` (without ``rolecall``)."""
    found = [shlex.split(part) for part in text.split("`")[1::2]]
    return [words[1:] for words in found if words and words[0] == "rolecall"]


def test_run_ends_with_the_session_id_and_an_export_command_that_works(
    data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "other data"
    ran = rolecall("run", "classroom", "--data-dir", str(data), cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    last = ran.stdout.rstrip().splitlines()[-1]
    assert last.startswith("session ")
    command = _pasted(last, "export it: ")
    assert command[-2:] == ["--data-dir", str(data)]
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    exported = rolecall(*command, cwd=elsewhere)  # pasted in another folder
    assert exported.returncode == 0, exported.stderr
    out = Path(command[command.index("--out") + 1])
    assert out.is_absolute() and out.read_text().startswith("# ")
    assert not data_dir.exists()  # the default data directory was never touched


def test_a_preset_ends_with_its_export_command(data_dir: Path, tmp_path: Path) -> None:
    ran = rolecall("debate", "Cities should ban cars", "--max-turns", "2", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    command = _pasted(ran.stdout.rstrip().splitlines()[-1], "export it: ")
    assert rolecall(*command, cwd=tmp_path).returncode == 0


def test_piped_step_mode_ends_with_the_resume_command_that_continues_it(
    data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "d"
    ran = rolecall("run", "tutoring", "--mode", "step", "--data-dir", str(data), stdin="\n")
    assert ran.returncode == 0, ran.stderr
    command = _pasted(ran.stderr.rstrip().splitlines()[-1], "continue it with: ")
    assert command[0] == "resume" and command[-2:] == ["--data-dir", str(data)]
    resumed = rolecall(*command, stdin="\n" * 40)  # resumed in step mode: Enter a turn
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped: flow_end" in resumed.stdout
    assert not data_dir.exists()


def test_typed_text_in_piped_step_mode_runs_nothing_and_says_what_keys_do(
    data_dir: Path,
) -> None:
    ran = rolecall("run", "tutoring", "--mode", "step", stdin="hello\n\n")
    assert ran.returncode == 0, ran.stderr
    assert "typed text is not sent in `run --mode step`: Enter runs the next turn" in ran.stderr
    assert ran.stdout.count("[step ") == 1  # only the empty line ran a turn


def test_a_storage_failure_names_the_resume_command_with_its_data_dir(
    data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "other data"
    data.mkdir()
    (data / "memory").touch()  # a file where the memory folder goes: writing it fails
    ran = rolecall("run", "classroom", "--data-dir", str(data), cwd=tmp_path)
    assert ran.returncode == 1, ran.stderr
    assert "cannot create memory folder" in ran.stderr
    [command] = _quoted(ran.stderr)
    assert command[0] == "resume" and command[-2:] == ["--data-dir", str(data)]
    (data / "memory").unlink()  # the cause, fixed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    resumed = rolecall(*command, cwd=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    assert "stopped: flow_end" in resumed.stdout
    assert not data_dir.exists()


def test_batch_fork_chat_roles_and_sessions_hints_keep_the_data_dir(
    data_dir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "d d"
    flag = ["--data-dir", str(data)]
    ran = rolecall("batch", "classroom", "--runs", "1", "--name", "b1", *flag, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    [listing] = _quoted(ran.stderr)
    assert listing == ["sessions", "list", "--batch", "b1", *flag]
    listed = rolecall(*listing)
    assert listed.returncode == 0 and "classroom" in listed.stdout, listed.stderr
    sid = listed.stdout.split()[listed.stdout.split().index("classroom") - 1]

    again = rolecall("batch", "classroom", "--runs", "1", "--name", "b1", *flag, cwd=tmp_path)
    assert again.returncode == 2
    [finish] = _quoted(again.stderr)
    assert finish == ["batch", "--resume", "b1", *flag]
    assert rolecall(*finish).returncode == 0

    forked = rolecall("sessions", "fork", sid, "--at", "m2", *flag)
    assert forked.returncode == 0, forked.stderr
    [resume] = _quoted(forked.stdout)
    assert resume == ["resume", forked.stdout.splitlines()[0], *flag]
    assert rolecall(*resume).returncode == 0

    chat = rolecall("run", "panel", *flag, cwd=tmp_path)
    assert chat.returncode == 2 and _quoted(chat.stderr) == [["chat", "panel", *flag]]

    shown = rolecall("roles", "show", "teacher", *flag)
    copy = shown.stdout.splitlines()[0].split("copy it: ")[1].rstrip(")")
    assert shlex.split(copy)[-2:] == flag
    assert rolecall(*shlex.split(copy)[1:]).returncode == 0
    assert (data / "roles" / "my-teacher.yaml").is_file()

    missing = rolecall("sessions", "delete", "20200101-000000-000000", *flag)
    assert missing.returncode == 2
    assert _quoted(missing.stderr) == [["sessions", "list", *flag]]

    piped = rolecall("chat", "panel", *flag, cwd=tmp_path, stdin="hello everyone\n/fork m1\n")
    assert piped.returncode == 0, piped.stderr
    [switch] = _quoted(piped.stderr)
    assert switch[0] == "resume" and switch[-2:] == flag
    assert not data_dir.exists()


def test_a_hint_about_a_store_names_its_data_dir(tmp_path: Path) -> None:
    """What the store and the web view print (`sessions delete ID` for a damaged row,
    `batch --resume NAME`, `resume ID`) carries the store's data directory, quoted."""
    from rolecall.paths import data_dir_flag, db_path

    data = tmp_path / "a b"
    assert shlex.split(f"rolecall resume x{data_dir_flag(db_path(data))}")[-2:] == [
        "--data-dir",
        str(data),
    ]
    assert data_dir_flag(tmp_path / "elsewhere.db") == ""  # not a data directory's store
