"""`rolecall memory show|clear SESSION AGENT` on sessions stored by real runs."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from tests.manage import call, files_under, records, rolecall, session_ids, write_world


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, str]:
    """The relay world stopped after 3 messages (manual stop in step mode)."""
    base = tmp_path_factory.mktemp("memory")
    world = write_world(base / "relay")
    home = base / "home"
    result = rolecall("run", str(world), "--json", "--mode", "step", home=home, stdin="\n\n\nq\n")
    assert result.returncode == 0, result.stderr
    (sid,) = session_ids(home)
    return home, world, sid


@pytest.fixture
def home(
    stored: tuple[Path, Path, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str]:
    source, _, sid = stored
    target = tmp_path / "home"
    shutil.copytree(source, target)
    monkeypatch.setenv("ROLECALL_HOME", str(target))
    return target, sid


def state_json(home: Path, sid: str) -> dict[str, Any]:
    with sqlite3.connect(home / "rolecall.db") as db:
        (text,) = db.execute("SELECT state_json FROM sessions WHERE id = ?", (sid,)).fetchone()
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def memory_ids(path: Path) -> list[str]:
    return [json.loads(line)["message_id"] for line in path.read_text().splitlines()]


def test_show(home: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    data, sid = home
    code, out, err = call(capsys, "memory", "show", sid, "a")
    assert code == 0, err
    path = data / "memory" / sid / "a.jsonl"
    assert out.splitlines()[0] == f"memory of a in session {sid}: 3 entries ({path})"
    blocks = out.split("\n\n")[1:]
    assert [b.splitlines()[0].split("  ")[0] for b in blocks] == [
        "[m1] own message",
        "[m2] from b",
        "[m3] own message",
    ]
    assert "  a speaks 1 at m1 <script>alert(1)</script>" in out
    # a multi-line message stays readable, every line indented
    assert "  # b answers a #1\n  ---\n  * more | x" in out


def test_show_refuses_unknown_agents_and_sessions(
    home: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    data, sid = home
    code, _, err = call(capsys, "memory", "show", sid, "bb")
    assert code == 2 and f"session {sid} has no agent 'bb'" in err and "did you mean b" in err
    code, _, err = call(capsys, "memory", "show", "20990101-000000-ffffff", "a")
    assert code == 2 and "no session '20990101-000000-ffffff'" in err
    assert not (data / "memory" / sid / "bb.jsonl").exists()


def test_clear_archives_and_resets_the_stored_state(
    home: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    data, sid = home
    folder = data / "memory" / sid
    b_before = (folder / "b.jsonl").read_bytes()
    state_before = state_json(data, sid)
    code, out, err = call(capsys, "memory", "clear", sid, "a")
    assert code == 0, err
    assert f"cleared the memory of a in session {sid}: archived a.jsonl as a." in out
    assert "its prompts start after message 3" in out
    (archive,) = folder.glob("a.*.jsonl.archived")
    assert memory_ids(archive) == ["m1", "m2", "m3"]
    assert not (folder / "a.jsonl").exists()
    assert (folder / "b.jsonl").read_bytes() == b_before  # the other agent is untouched
    state = state_json(data, sid)
    assert set(state) == set(state_before)  # the JSON shape of the state is kept
    assert state["turn_counts"]["a"] == 0
    assert state["memory_start"] == {"a": 3}
    unchanged = {k: v for k, v in state.items() if k not in ("turn_counts", "memory_start")}
    assert unchanged == {
        k: v for k, v in state_before.items() if k not in ("turn_counts", "memory_start")
    }
    code, out, _ = call(capsys, "memory", "show", sid, "a")
    assert code == 0
    assert ": 0 entries" in out
    assert "cleared after message 3" in out and "1 archived file(s)" in out
    # clearing again without a file still resets, and archives nothing
    code, out, _ = call(capsys, "memory", "clear", sid, "a")
    assert code == 0 and "no memory file yet" in out
    assert len(list(folder.glob("a.*.jsonl.archived"))) == 1


def test_a_cleared_agent_resumes_with_a_fresh_memory(
    stored: tuple[Path, Path, str], home: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    data, sid = home
    assert call(capsys, "memory", "clear", sid, "a")[0] == 0
    resumed = rolecall("resume", sid, "--json", "--mode", "auto", home=data)
    assert resumed.returncode == 0, resumed.stderr
    assert records(resumed.stdout)[-1]["reason"] == "flow_end"
    folder = data / "memory" / sid
    assert memory_ids(folder / "a.jsonl") == ["m4", "m5", "m6", "m7", "m8"]
    assert memory_ids(folder / "b.jsonl") == [f"m{i}" for i in range(1, 9)]
    # its prompts were smaller than in a run without the clear
    _, world, _ = stored
    clean = rolecall("run", str(world), "--json", home=data.parent / "clean")
    assert clean.returncode == 0, clean.stderr

    def tokens(out: str) -> dict[str, int]:
        return {r["message_id"]: r["input_tokens"] for r in records(out) if r["type"] == "message"}

    cleared, reference = tokens(resumed.stdout), tokens(clean.stdout)
    assert cleared["m5"] < reference["m5"]  # a's next turn
    assert cleared["m4"] == reference["m4"]  # b's memory is whole


@pytest.mark.parametrize(
    ("session", "agent", "what"),
    [
        ("../x", "a", "session id"),
        ("s", "../../etc", "agent id"),
        ("a/b", "a", "session id"),
        ("s", "a/b", "agent id"),
        ("a\x00b", "a", "session id"),
        ("s", "a\x00", "agent id"),
        ("..", "a", "session id"),
        ("s", ".hidden", "agent id"),
    ],
)
@pytest.mark.parametrize("action", ["show", "clear"])
def test_unsafe_ids_are_refused_before_any_file_is_touched(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    session: str,
    agent: str,
    what: str,
    action: str,
) -> None:
    data = tmp_path / "data"
    code, out, err = call(capsys, "memory", action, "--data-dir", str(data), "--", session, agent)
    assert code == 2
    assert out == ""
    assert f"rolecall: {what} " in err and "is not safe in a file name" in err
    assert files_under(tmp_path) == {}


def test_unsafe_ids_leave_a_real_data_dir_unchanged(
    home: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    data, sid = home
    before = files_under(data.parent)
    for argv in (
        ("memory", "show", "../x", "a"),
        ("memory", "clear", sid, "../../etc"),
        ("memory", "clear", sid, "../b"),
        ("memory", "clear", f"{sid}/..", "a"),
    ):
        code, _, err = call(capsys, *argv)
        assert code == 2, argv
        assert "is not safe in a file name" in err
    assert files_under(data.parent) == before


def test_on_the_command_line(home: tuple[Path, str]) -> None:
    data, sid = home
    result = rolecall("memory", "show", sid, "../../etc", home=data)
    assert result.returncode == 2
    assert "rolecall: agent id '../../etc' is not safe in a file name" in result.stderr
    result = rolecall("memory", "clear", sid, "b", home=data)
    assert result.returncode == 0, result.stderr
    assert state_json(data, sid)["memory_start"] == {"b": 3}
