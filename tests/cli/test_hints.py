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
    resumed = rolecall(*command)
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
