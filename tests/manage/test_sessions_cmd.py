"""`rolecall sessions list|show|trace|export|delete` on sessions stored by real runs."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
from pathlib import Path

import pytest

from rolecall.storage.document import read_session_file
from tests.manage import call, files_under, records, rolecall, session_ids, write_world

SECRET = "sk-test-SECRET-1234567890"


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A data directory with two sessions of the relay world: finished, and stopped after 3."""
    base = tmp_path_factory.mktemp("stored")
    world = write_world(base / "relay")
    home = base / "home"
    full = rolecall("run", str(world), "--json", home=home)
    assert full.returncode == 0, full.stderr
    part = rolecall("run", str(world), "--json", "--mode", "step", home=home, stdin="\n\n\nq\n")
    assert part.returncode == 0, part.stderr
    finished, stopped = session_ids(home)
    return home, finished, stopped


@pytest.fixture
def home(
    stored: tuple[Path, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, str, str]:
    """A private copy of the stored data directory (ROLECALL_HOME points at it)."""
    source, finished, stopped = stored
    target = tmp_path / "home"
    shutil.copytree(source, target)
    monkeypatch.setenv("ROLECALL_HOME", str(target))
    return target, finished, stopped


# ------------------------------------------------------------------ list
def test_list(home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]) -> None:
    _, finished, stopped = home
    code, out, err = call(capsys, "sessions", "list")
    assert code == 0, err
    # cells are apart by two spaces or more, and never hold two in a row
    header, *lines = [re.split(r" {2,}", line.strip()) for line in out.splitlines()]
    assert header == [
        *("ID", "WORLD", "TITLE", "STATUS", "STOP", "MSGS", "TOKENS", "COST", "PREVIEW")
    ]
    assert [line[0] for line in lines] == [stopped, finished]  # newest first
    rows = {line[0]: line for line in lines}
    assert rows[finished][1:6] == ["relay", "Relay <b>race</b> & co", "finished", "flow_end", "8"]
    assert rows[stopped][1:6] == ["relay", "Relay <b>race</b> & co", "finished", "manual", "3"]
    # the tokens as `sessions show` totals them; scripted roles are free; no human
    # message: the topic
    _, shown, _ = call(capsys, "sessions", "show", finished)
    assert f"tokens: {rows[finished][6]} in 8 messages · cost $0" in shown
    assert rows[finished][7:] == ["$0", "relays"]


def test_list_on_an_empty_data_dir_creates_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    empty = tmp_path / "nothing-here"
    code, out, _ = call(capsys, "sessions", "list", "--data-dir", str(empty))
    assert code == 0
    assert "no sessions stored" in out
    assert not empty.exists()


# ------------------------------------------------------------------ show
def test_show_the_transcript(
    home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, finished, _ = home
    code, out, err = call(capsys, "sessions", "show", finished)
    assert code == 0, err
    assert "status: finished: flow_end (after the last step 'four')" in out
    assert "[m1] a  [step one]" in out
    assert "[m2] b → a  [step two]" in out
    assert "[m4] b → a  [step two · loop 1]" in out
    assert "[m7] a → b  [step three · loop 2]" in out
    assert "  a speaks 1 at m1 <script>alert(1)</script>" in out  # plain text: as written
    assert out.count("\n[m") == 8


def test_show_filters_by_role_and_search(
    home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, finished, _ = home
    _, out, _ = call(capsys, "sessions", "show", finished, "--role", "b")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("[m")] == [
        "[m2]",
        "[m4]",
        "[m6]",
        "[m8]",
    ]
    assert "4 of 8 messages (role b)" in out
    _, out, _ = call(capsys, "sessions", "show", finished, "--search", "A SPEAKS 3")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("[m")] == ["[m5]"]
    _, out, _ = call(capsys, "sessions", "show", finished, "--role", "b", "--search", "#4")
    assert [line.split()[0] for line in out.splitlines() if line.startswith("[m")] == ["[m8]"]


def test_show_refuses_an_unknown_role_or_session(
    home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, finished, _ = home
    code, _, err = call(capsys, "sessions", "show", finished, "--role", "bb")
    assert code == 2
    assert "has no role 'bb'" in err and "did you mean b" in err
    code, _, err = call(capsys, "sessions", "show", "20990101-000000-ffffff")
    assert code == 2
    assert "no session '20990101-000000-ffffff'" in err and finished in err


# ------------------------------------------------------------------ trace
def test_trace_shows_the_execution_log(
    home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    _, finished, _ = home
    code, out, err = call(capsys, "sessions", "trace", finished)
    assert code == 0, err
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("#"))
    assert lines[header].split() == [
        "#",
        "step",
        "speaker",
        "message",
        "loop",
        "result",
        "in",
        "out",
        "started",
        "took",
    ]
    rows = [line.split() for line in lines[header + 1 : header + 9]]
    assert [r[:6] for r in rows] == [
        ["1", "one", "a", "m1", "0", "success"],
        ["2", "two", "b", "m2", "0", "success"],
        ["3", "three", "a", "m3", "0", "loop_continue"],
        ["4", "two", "b", "m4", "1", "success"],
        ["5", "three", "a", "m5", "1", "loop_continue"],
        ["6", "two", "b", "m6", "2", "success"],
        ["7", "three", "a", "m7", "2", "loop_break"],
        ["8", "four", "b", "m8", "0", "success"],
    ]
    assert all(int(r[6]) > 0 and int(r[7]) > 0 for r in rows)  # tokens
    assert "8 steps" in out


# ------------------------------------------------------------------ export
def test_export_markdown_and_html(
    home: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, finished, _ = home
    code, md, err = call(capsys, "sessions", "export", finished, "--format", "md")
    assert code == 0, err
    assert md.startswith("# Relay \\<b\\>race\\</b\\> \\& co\n")
    assert "### m4 · b → a" in md and "*step two · loop 1*" in md
    assert "> \\# b answers a #1\\" in md  # the message's heading is text
    out = tmp_path / "exports" / "relay.html"
    code, msg, err = call(
        capsys, "sessions", "export", finished, "--format", "html", "--out", str(out)
    )
    assert code == 0, err
    assert f"exported session {finished} as html to {out}: 8 messages" in msg
    page = out.read_text("utf-8")
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "finished: flow_end" in page
    code, _, _ = call(capsys, "sessions", "export", finished, "--format", "html", "--role", "a")
    assert code == 0


def test_export_json_is_the_session_document_with_memory(
    home: tuple[Path, str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, _, stopped = home
    out = tmp_path / "saved.json"
    code, _, err = call(
        capsys, "sessions", "export", stopped, "--format", "json", "--out", str(out)
    )
    assert code == 0, err
    doc = read_session_file(out)
    assert doc.session_id == stopped and len(doc.messages) == 3
    assert [e["message_id"] for e in doc.memory["a"]] == ["m1", "m2", "m3"]
    assert doc.events and all(e["topic"] != "sse" for e in doc.events)
    code, stdout, _ = call(capsys, "sessions", "export", stopped, "--format", "json")
    assert code == 0
    assert json.loads(stdout) == json.loads(out.read_text("utf-8"))
    code, _, err = call(capsys, "sessions", "export", stopped, "--format", "json", "--role", "a")
    assert code == 2 and "--format json is always the whole session document" in err
    # the exported file resumes in another data directory and finishes the flow
    elsewhere = tmp_path / "elsewhere"
    resumed = rolecall("resume", str(out), "--json", "--mode", "auto", home=elsewhere)
    assert resumed.returncode == 0, resumed.stderr
    recs = records(resumed.stdout)
    assert [r["message_id"] for r in recs if r["type"] == "message"] == [
        f"m{i}" for i in range(4, 9)
    ]
    assert recs[-1]["reason"] == "flow_end"


# ------------------------------------------------------------------ delete
def test_delete_removes_the_session_and_its_memory_only(
    home: tuple[Path, str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    data, finished, stopped = home
    (data / "roles").mkdir()
    (data / "roles" / "keep.yaml").write_text("id: keep\nsystem_prompt: x\n")
    (data / "notes.txt").write_text("mine")
    before = files_under(data)
    _, kept_before, _ = call(capsys, "sessions", "export", stopped, "--format", "json")
    code, out, err = call(capsys, "sessions", "delete", finished)
    assert code == 0, err
    assert f"deleted session {finished}: 8 messages" in out
    assert session_ids(data) == [stopped]
    after = files_under(data)
    gone = {k for k in before if k not in after}
    assert gone == {f"memory/{finished}/a.jsonl", f"memory/{finished}/b.jsonl"}
    assert not (data / "memory" / finished).exists()
    changed = {k for k in after if before.get(k) != after[k]}
    assert changed <= {"rolecall.db", "rolecall.db-wal", "rolecall.db-shm"}
    assert set(after) - set(before) <= {"rolecall.db-wal", "rolecall.db-shm"}
    with sqlite3.connect(data / "rolecall.db") as db:
        for table in ("messages", "events", "execution_log", "drafts"):
            n = db.execute(f"SELECT COUNT(*) FROM {table} WHERE session_id = ?", (finished,))
            assert n.fetchone()[0] == 0, table
    _, kept_after, _ = call(capsys, "sessions", "export", stopped, "--format", "json")
    assert json.loads(kept_after) == json.loads(kept_before)  # the other session is intact
    code, _, err = call(capsys, "sessions", "delete", finished)
    assert code == 2 and f"no session '{finished}'" in err


# ------------------------------------------------------------------ unsafe ids
@pytest.mark.parametrize("bad", ["../x", "..", "a/b", "/etc", "a\x00b", ".hidden", "-rf"])
@pytest.mark.parametrize(
    "command",
    [
        ["sessions", "show"],
        ["sessions", "trace"],
        ["sessions", "delete"],
        ["sessions", "export", "--format", "json", "--out", "OUT"],
    ],
)
def test_unsafe_session_ids_are_refused_before_any_file_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, command: list[str]
) -> None:
    data = tmp_path / "data"
    out = tmp_path / "out.json"
    argv = [*(str(out) if a == "OUT" else a for a in command), "--data-dir", str(data), "--", bad]
    code, _, err = call(capsys, *argv)
    assert code == 2
    assert "session id" in err and "is not safe in a file name" in err
    assert files_under(tmp_path) == {}
    assert not data.exists()


def test_unsafe_ids_are_refused_on_the_command_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = rolecall("sessions", "show", "../x", home=home)
    assert result.returncode == 2
    assert "rolecall: session id '../x' is not safe in a file name" in result.stderr
    assert not home.exists()


# ------------------------------------------------------------------ secrets
SECRET_WORLD = """
name: keys
title: Keys
topic: keeping keys out of files
model: scripted
settings: {api_key_env: MY_TEST_KEY, memory_window: 4}
roles:
  - {id: a, api_key_env: MY_TEST_KEY, script: ["a says {n}"]}
  - {id: b, script: ["b answers {target}"]}
flow:
  steps:
    - {id: one, speaker: a}
    - {id: two, speaker: b, loop: {to: one, max: 2}}
"""


def test_no_secret_reaches_any_file_or_output(tmp_path: Path) -> None:
    world = tmp_path / "keys"
    world.mkdir()
    (world / "world.yaml").write_text(SECRET_WORLD)
    home = tmp_path / "home"
    env = {"MY_TEST_KEY": SECRET}
    outputs = []
    run = rolecall(
        "run",
        str(world),
        "--json",
        "-vv",
        "--log-file",
        str(tmp_path / "run.log"),
        "--session-file",
        str(tmp_path / "session.json"),
        home=home,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    outputs.append(run)
    (sid,) = session_ids(home)
    for argv in (
        ["sessions", "list"],
        ["sessions", "show", sid],
        ["sessions", "trace", sid],
        ["sessions", "export", sid, "--format", "json", "--out", str(tmp_path / "x.json")],
        ["sessions", "export", sid, "--format", "md", "--out", str(tmp_path / "x.md")],
        ["sessions", "export", sid, "--format", "html", "--out", str(tmp_path / "x.html")],
        ["memory", "show", sid, "a"],
    ):
        result = rolecall(
            *argv, "-vv", "--log-file", str(tmp_path / "manage.log"), home=home, env=env
        )
        assert result.returncode == 0, (argv, result.stderr)
        outputs.append(result)
    assert (tmp_path / "run.log").stat().st_size > 0
    assert read_session_file(tmp_path / "session.json").world["settings"]["api_key_env"] == (
        "MY_TEST_KEY"
    )
    files = files_under(tmp_path)
    assert "home/rolecall.db" in files and "session.json" in files and "x.html" in files
    assert any(name.startswith("home/memory/") for name in files)
    for name, content in files.items():
        assert SECRET.encode() not in content, name
    for result in outputs:
        assert SECRET not in result.stdout and SECRET not in result.stderr
