"""`/whisper` in piped chat, `sessions show --as`, and the marks exports put on private
messages (docs/audiences.md), driven as a user would: real subprocesses, real files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.chat.test_piped_cli import records_of, rolecall

MARKER = "zanzibar"  # only the whisper holds it
WORLD = {
    "name": "trio",
    "model": "scripted",
    "roles": [
        {"id": "ann", "script": ["ann answers #{n}"]},
        {"id": "bob", "script": ["bob answers #{n}"]},
        {"id": "cid", "script": ["cid answers #{n}"]},
    ],
}
INPUT = f"/whisper @ann @bob the code is {MARKER}\n@cid hello\n"


@pytest.fixture
def world_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "trio"
    folder.mkdir()
    (folder / "world.yaml").write_text(yaml.safe_dump(WORLD, sort_keys=False), "utf-8")
    return folder


def test_a_piped_whisper_is_answered_by_its_audience_and_kept_from_the_rest(
    world_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    result = rolecall("chat", str(world_dir), "--json", stdin=INPUT, home=home)
    assert result.returncode == 0, result.stderr
    messages = [r for r in records_of(result.stdout) if r["type"] == "message"]
    assert [(m["sender"], m.get("audience")) for m in messages] == [
        ("human", ["ann", "bob"]),
        ("ann", ["ann", "bob"]),
        ("bob", ["ann", "bob"]),
        ("human", None),
        ("cid", None),
    ]
    assert messages[0]["content"] == f"the code is {MARKER}"
    sid = messages[0]["session_id"]
    cid_file = (home / "memory" / sid / "cid.jsonl").read_text("utf-8")
    assert MARKER not in cid_file and "m4" in cid_file
    assert MARKER in (home / "memory" / sid / "bob.jsonl").read_text("utf-8")

    # the text transcript marks the whisper on its header line
    shown = rolecall("sessions", "show", sid, stdin="", home=home)
    assert shown.returncode == 0, shown.stderr
    assert "[m1] human (to ann, bob only)" in shown.stdout
    assert "[m2] ann → human (to ann, bob only)" in shown.stdout
    # as cid saw it: the whisper and its replies are not there
    as_cid = rolecall("sessions", "show", sid, "--as", "cid", stdin="", home=home)
    assert as_cid.returncode == 0, as_cid.stderr
    assert MARKER not in as_cid.stdout and "[m1]" not in as_cid.stdout
    assert "[m4] human" in as_cid.stdout and "as seen by cid" in as_cid.stdout
    as_bob = rolecall("sessions", "show", sid, "--as", "bob", stdin="", home=home)
    assert MARKER in as_bob.stdout
    bad = rolecall("sessions", "show", sid, "--as", "eve", stdin="", home=home)
    assert bad.returncode != 0 and "--as eve" in bad.stderr and "Traceback" not in bad.stderr
    # every export marks it
    for fmt, mark in (("md", "to ann, bob only"), ("html", "badge private")):
        out = rolecall("sessions", "export", sid, "--format", fmt, stdin="", home=home)
        assert out.returncode == 0, out.stderr
        assert mark in out.stdout
    as_cid_md = rolecall(
        "sessions", "export", sid, "--format", "md", "--as", "cid", stdin="", home=home
    )
    assert MARKER not in as_cid_md.stdout
    # the session document keeps the audience (json export, then resume from the file)
    saved = tmp_path / "saved.json"
    out = rolecall(
        "sessions", "export", sid, "--format", "json", "--out", str(saved), stdin="", home=home
    )
    assert out.returncode == 0, out.stderr
    doc = json.loads(saved.read_text("utf-8"))
    assert doc["messages"][0]["audience"] == ["ann", "bob"]
    assert "audience" not in doc["messages"][3]  # a public message's is left out


def test_a_whisper_naming_nobody_or_an_unknown_agent_is_refused(
    world_dir: Path, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    lines = "/whisper hello there\n/whisper @eve psst\n/whisper @ann\n"
    result = rolecall("chat", str(world_dir), "--json", stdin=lines, home=home)
    assert result.returncode == 0, result.stderr
    assert "name who hears it first" in result.stderr
    assert "no role 'eve'" in result.stderr
    assert "nothing to say after the names" in result.stderr
    assert "Traceback" not in result.stderr
    assert not [r for r in records_of(result.stdout) if r["type"] == "message"]
