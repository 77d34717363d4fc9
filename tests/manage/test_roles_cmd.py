"""`rolecall roles list|show|create|edit|delete`: the user's role library."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import yaml

from rolecall.cli.manage import role_library
from rolecall.cli.options import Options
from rolecall.errors import WorldError
from rolecall.world.library import RoleLibrary, builtin_roles
from rolecall.world.loader import load_world
from tests.manage import call, files_under, records, rolecall, session_ids

READONLY = (
    "role 'teacher' is built in and read-only; copy it: "
    "rolecall roles create my-teacher --from teacher"
)


def role_file(home: Path, role_id: str) -> dict[str, Any]:
    data = yaml.safe_load((home / "roles" / f"{role_id}.yaml").read_text("utf-8"))
    assert isinstance(data, dict)
    return data


def test_list_marks_builtins(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(capsys, "roles", "list")
    assert code == 0, err
    kinds = {line.split()[0]: line.split()[1] for line in out.splitlines()[1:] if line.strip()}
    for rid in builtin_roles():
        assert kinds[rid] == "built-in"
    assert f"{len(builtin_roles())} built-in (read-only), 0 user" in out
    assert not data_dir.exists()  # listing creates nothing


def test_crud_round_trip(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = call(
        capsys,
        "roles",
        "create",
        "my-teacher",
        "--from",
        "teacher",
        "--name",
        "Ms. Rivera",
        "--constraint",
        "Use SI units.",
        "--constraint",
        "note: at most 60 words",
    )
    assert code == 0, err
    assert "created role my-teacher from teacher" in out and "template: my-teacher" in out
    data = role_file(data_dir, "my-teacher")
    teacher = builtin_roles()["teacher"]
    assert data == {
        "id": "my-teacher",
        "name": "Ms. Rivera",
        "description": teacher["description"],
        "system_prompt": teacher["system_prompt"],
        "style": teacher["style"],
        "constraints": ["Use SI units.", "note: at most 60 words"],
    }
    # list and show
    _, out, _ = call(capsys, "roles", "list")
    assert any(line.split()[:2] == ["my-teacher", "user"] for line in out.splitlines())
    assert "1 user" in out
    code, out, _ = call(capsys, "roles", "show", "my-teacher")
    assert code == 0
    assert out.startswith("# my-teacher: user role")
    assert yaml.safe_load(out) == data
    # edit: only the given fields change; --constraint replaces the list
    code, out, err = call(
        capsys,
        "roles",
        "edit",
        "my-teacher",
        "--system-prompt",
        "You teach with questions.\nNever lecture.",
        "--constraint",
        "One question per turn.",
    )
    assert code == 0, err
    assert "updated role my-teacher (system_prompt, constraints)" in out
    edited = role_file(data_dir, "my-teacher")
    assert edited == {
        **data,
        "system_prompt": "You teach with questions.\nNever lecture.",
        "constraints": ["One question per turn."],
    }
    assert "system_prompt: |-\n" in (data_dir / "roles" / "my-teacher.yaml").read_text()
    code, _, _ = call(capsys, "roles", "edit", "my-teacher", "--no-constraints")
    assert code == 0 and role_file(data_dir, "my-teacher")["constraints"] == []
    # delete
    code, out, err = call(capsys, "roles", "delete", "my-teacher")
    assert code == 0, err
    assert not (data_dir / "roles" / "my-teacher.yaml").exists()
    code, _, err = call(capsys, "roles", "show", "my-teacher")
    assert code == 2 and "no role template 'my-teacher'" in err


def test_create_from_scratch_and_from_a_user_role(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = call(
        capsys, "roles", "create", "critic2", "--system-prompt", "Find the weakest claim."
    )
    assert code == 0, err
    assert role_file(data_dir, "critic2") == {
        "id": "critic2",
        "system_prompt": "Find the weakest claim.",
    }
    code, _, err = call(capsys, "roles", "create", "critic3", "--from", "critic2", "--style", "dry")
    assert code == 0, err
    assert role_file(data_dir, "critic3") == {
        "id": "critic3",
        "system_prompt": "Find the weakest claim.",
        "style": "dry",
    }
    code, _, err = call(capsys, "roles", "create", "empty", "--name", "Nobody")
    assert code == 2 and "a new role needs --system-prompt" in err
    code, _, err = call(capsys, "roles", "create", "x1", "--from", "nosuch")
    assert code == 2 and "no role template 'nosuch'" in err
    assert sorted(p.name for p in (data_dir / "roles").iterdir()) == [
        "critic2.yaml",
        "critic3.yaml",
    ]


def test_create_refuses_existing_and_builtin_ids(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert call(capsys, "roles", "create", "mine", "--system-prompt", "one")[0] == 0
    before = files_under(data_dir)
    code, _, err = call(capsys, "roles", "create", "mine", "--system-prompt", "two")
    assert code == 2 and "role 'mine' already exists" in err
    code, _, err = call(capsys, "roles", "create", "teacher", "--system-prompt", "two")
    assert code == 2
    assert "role 'teacher' is built in" in err
    assert "rolecall roles create my-teacher --from teacher" in err
    assert files_under(data_dir) == before


@pytest.mark.parametrize("action", ["edit", "delete"])
def test_builtins_are_read_only(
    data_dir: Path, capsys: pytest.CaptureFixture[str], action: str
) -> None:
    extra = ["--name", "X"] if action == "edit" else []
    code, out, err = call(capsys, "roles", action, "teacher", *extra)
    assert code == 2
    assert err.strip() == f"rolecall: {READONLY}"
    assert out == ""
    assert not data_dir.exists()


def test_edit_and_delete_unknown_roles(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = call(capsys, "roles", "edit", "ghost", "--name", "x")
    assert code == 2 and "no user role 'ghost'" in err and "you have no roles yet" in err
    call(capsys, "roles", "create", "ghostly", "--system-prompt", "boo")
    code, _, err = call(capsys, "roles", "delete", "ghost")
    assert code == 2 and "did you mean ghostly?" in err
    code, _, err = call(capsys, "roles", "edit", "ghostly")
    assert code == 2 and "nothing to change" in err


def test_edit_keeps_other_fields_of_a_hand_written_role(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = data_dir / "roles"
    roles.mkdir(parents=True)
    (roles / "coach.yaml").write_text(
        "id: coach\nsystem_prompt: You coach.\nmodel: offline\ntemperature: 0.2\n"
    )
    assert call(capsys, "roles", "edit", "coach", "--style", "upbeat")[0] == 0
    assert role_file(data_dir, "coach") == {
        "id": "coach",
        "system_prompt": "You coach.",
        "style": "upbeat",
        "model": "offline",
        "temperature": 0.2,
    }
    (roles / "broken.yaml").write_text("id: broken\nsytem_prompt: typo\n")
    code, _, err = call(capsys, "roles", "edit", "broken", "--style", "x")
    assert code == 2 and "sytem_prompt: unknown field" in err
    code, out, _ = call(capsys, "roles", "list")
    assert code == 0 and "coach" in out and "broken" in out


@pytest.mark.parametrize(
    "bad", ["../evil", "a/b", "/abs", "a\x00b", "..", "Teacher", "-x", "9lives", "a.b", "a b"]
)
@pytest.mark.parametrize("action", ["show", "create", "edit", "delete"])
def test_bad_role_ids_are_refused_before_any_file_is_touched(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], bad: str, action: str
) -> None:
    data = tmp_path / "data"
    extra = ["--system-prompt", "x"] if action in ("create", "edit") else []
    code, out, err = call(capsys, "roles", action, "--data-dir", str(data), *extra, "--", bad)
    assert code == 2
    assert out == ""
    assert "role id" in err and ("not safe in a file name" in err or "is not valid" in err)
    assert files_under(tmp_path) == {}


def test_bad_template_ids_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = tmp_path / "data"
    (tmp_path / "evil.yaml").write_text("id: evil\nsystem_prompt: pwned\n")
    code, _, err = call(
        capsys, "roles", "create", "ok", "--from", "../evil", "--data-dir", str(data)
    )
    assert code == 2 and "template id '../evil' is not safe" in err
    assert not data.exists()


def test_a_user_role_is_a_template_in_a_world(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call(capsys, "roles", "create", "tutor", "--from", "teacher", "--name", "Tina")
    world = tmp_path / "w" / "world.yaml"
    world.parent.mkdir()
    world.write_text(
        "name: w\nroles:\n  - template: tutor\n  - {template: student, id: sam}\n"
        "flow: {steps: [{id: one, speaker: tutor}, {id: two, speaker: sam}]}\n"
    )
    library = role_library(Options())
    loaded = load_world(world, library)
    tutor = loaded.world.role("tutor")
    assert tutor.name == "Tina"
    assert tutor.system_prompt == builtin_roles()["teacher"]["system_prompt"]


# ------------------------------------------------------------------ snapshot
ORIGINAL = (
    "You are a patient tutor. You explain every idea with a concrete everyday example, "
    "you check understanding with a question, and you never move on before the learner "
    "has restated the idea in their own words."
)
SNAPSHOT_WORLD = """
name: tutoring
topic: fractions
model: scripted
roles:
  - {template: tutor, script: ["tutor explains part {n}"]}
  - {id: pupil, script: ["pupil asks about {target} #{n}"]}
flow:
  steps:
    - {id: explain, speaker: tutor}
    - {id: ask, speaker: pupil}
    - {id: again, speaker: tutor, loop: {to: ask, max: 3}}
    - {id: close, speaker: pupil}
"""


def stored_world(home: Path, sid: str) -> dict[str, Any]:
    with sqlite3.connect(home / "rolecall.db") as db:
        (text,) = db.execute(
            "SELECT world_json FROM session_worlds WHERE session_id = ?", (sid,)
        ).fetchone()
    data = json.loads(text)
    assert isinstance(data, dict)
    return data


def test_a_saved_session_keeps_its_role_snapshot(tmp_path: Path) -> None:
    world = tmp_path / "tutoring"
    world.mkdir()
    (world / "world.yaml").write_text(SNAPSHOT_WORLD)
    # the reference: the same world run uninterrupted with the original role
    clean = tmp_path / "clean"
    made = rolecall("roles", "create", "tutor", "--system-prompt", ORIGINAL, home=clean)
    assert made.returncode == 0, made.stderr
    reference = rolecall("run", str(world), "--json", home=clean)
    assert reference.returncode == 0, reference.stderr
    expected = [r for r in records(reference.stdout) if r["type"] == "message"]
    assert len(expected) == 8

    home = tmp_path / "home"
    made = rolecall("roles", "create", "tutor", "--system-prompt", ORIGINAL, home=home)
    assert made.returncode == 0, made.stderr
    first = rolecall("run", str(world), "--json", "--mode", "step", home=home, stdin="\n\n\nq\n")
    assert first.returncode == 0, first.stderr
    before = [r for r in records(first.stdout) if r["type"] == "message"]
    assert len(before) == 3
    (sid,) = session_ids(home)
    snapshot = stored_world(home, sid)
    tutor = next(r for r in snapshot["roles"] if r["id"] == "tutor")
    assert tutor["system_prompt"] == ORIGINAL and tutor["template"] == "tutor"

    edited = rolecall("roles", "edit", "tutor", "--system-prompt", "CHANGED", home=home)
    assert edited.returncode == 0, edited.stderr
    assert yaml.safe_load((home / "roles" / "tutor.yaml").read_text())["system_prompt"] == "CHANGED"

    resumed = rolecall("resume", sid, "--json", "--mode", "auto", home=home)
    assert resumed.returncode == 0, resumed.stderr
    after = [r for r in records(resumed.stdout) if r["type"] == "message"]
    assert records(resumed.stdout)[-1]["reason"] == "flow_end"
    assert stored_world(home, sid) == snapshot  # the snapshot is unchanged
    # the prompts were built from the snapshot: same words and the same prompt sizes
    # (input tokens) as the uninterrupted run with the original role
    keys = ("message_id", "sender", "content", "step_id", "input_tokens", "output_tokens")
    assert [{k: r[k] for k in keys} for r in before + after] == [
        {k: r[k] for k in keys} for r in expected
    ]
    exported = rolecall("sessions", "export", sid, "--format", "json", home=home)
    assert exported.returncode == 0, exported.stderr
    roles = json.loads(exported.stdout)["world"]["roles"]
    assert next(r for r in roles if r["id"] == "tutor")["system_prompt"] == ORIGINAL
    # a new run picks up the edited role
    fresh = rolecall("run", str(world), "--json", "--max-turns", "1", home=home)
    assert fresh.returncode == 0, fresh.stderr
    newest = session_ids(home)[-1]
    tutor = next(r for r in stored_world(home, newest)["roles"] if r["id"] == "tutor")
    assert tutor["system_prompt"] == "CHANGED"
    (changed,) = [r for r in records(fresh.stdout) if r["type"] == "message"]
    assert changed["input_tokens"] < expected[0]["input_tokens"]  # the prompt size shows it


@pytest.mark.parametrize("reserved", ["human", "all", "system"])
def test_create_refuses_a_reserved_id(
    data_dir: Path, capsys: pytest.CaptureFixture[str], reserved: str
) -> None:
    code, out, err = call(capsys, "roles", "create", reserved, "--system-prompt", "x")
    assert code == 2 and out == ""
    assert f"role id '{reserved}' is reserved (" in err and "pick another id" in err
    assert not (data_dir / "roles" / f"{reserved}.yaml").exists()


# ------------------------------------------------------------------ broken role files
BROKEN_ROLES = {
    "listed": "- a\n",  # a list, not a mapping
    "empty_list": "[]\n",  # falsy: was read as an empty role
    "nope": "false\n",
    "mine": "name: Mine\nfoo: 1\ntemperature: 9\n",
    "twice": "name: A\nsystem_prompt: You help.\nname: B\n",
    "chained": "template: teacher\nname: C\n",
}


def _broken_roles(home: Path) -> Path:
    roles = home / "roles"
    roles.mkdir(parents=True)
    for rid, text in BROKEN_ROLES.items():
        (roles / f"{rid}.yaml").write_text(text)
    (roles / "fine.yaml").write_text("name: Fine\nsystem_prompt: You are fine.\n")
    return roles


def test_a_broken_role_file_is_a_problem_naming_that_file_and_its_line(tmp_path: Path) -> None:
    roles = _broken_roles(tmp_path)
    ids = [*BROKEN_ROLES, "fine"]
    text = "name: w\nroles:\n" + "".join(f"  - template: {rid}\n" for rid in ids)
    world = tmp_path / "w" / "world.yaml"
    world.parent.mkdir()
    world.write_text(text)
    with pytest.raises(WorldError) as info:
        load_world(world, RoleLibrary(roles))
    mapping = "expected a mapping of role fields (id, name, system_prompt, ...), got"

    def at(i: int, rid: str) -> str:
        return f"roles[{i}].template: role file {roles / rid}.yaml: "

    assert info.value.problems == [
        at(0, "listed") + f"{mapping} list",
        at(1, "empty_list") + f"{mapping} list",
        at(2, "nope") + f"{mapping} bool",
        at(3, "mine") + "line 2, column 1: foo: unknown field (fields: id, name, description, "
        "system_prompt, style, constraints, model, temperature, max_tokens, max_reply_tokens, "
        "api_base, api_key_env, script, price, transport, respond, tools, approve, knowledge, "
        "knowledge_top_k, sees, output)",
        at(3, "mine") + "line 3, column 1: temperature: input should be less than or equal to 2 "
        "(got 9)",
        at(4, "twice") + "line 3, column 1: name: duplicate key (also at line 1)",
        at(5, "chained") + "line 1, column 1: template: a role file cannot start from a "
        "template; copy its fields instead (rolecall roles create ID --from TEMPLATE)",
    ]
    # nothing is blamed on the world file's own fields
    assert not any(p.startswith("roles[3].foo") for p in info.value.problems)
    assert "  line 6, column 5: roles[3].template: role file" in str(info.value)


def test_roles_show_and_list_name_a_broken_role_file(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    roles = _broken_roles(data_dir)
    code, out, err = call(capsys, "roles", "show", "mine")
    assert code == 2 and out == ""
    assert err == (
        f"rolecall: {roles / 'mine.yaml'}: 2 problems\n"
        "  line 2, column 1: foo: unknown field (fields: id, name, description, system_prompt, "
        "style, constraints, model, temperature, max_tokens, max_reply_tokens, api_base, "
        "api_key_env, script, price, transport, respond, tools, approve, knowledge, "
        "knowledge_top_k, sees, output)\n"
        "  line 3, column 1: temperature: input should be less than or equal to 2 (got 9)\n"
    )
    code, _, err = call(capsys, "roles", "show", "listed")
    assert code == 2 and f"{roles / 'listed.yaml'}: expected a mapping of role fields" in err
    code, _, err = call(capsys, "roles", "create", "copy", "--from", "twice")
    assert code == 2 and f"{roles / 'twice.yaml'}: line 3, column 1: name: duplicate key" in err
    code, _, err = call(capsys, "roles", "edit", "twice", "--style", "calm")
    assert code == 2 and f"{roles / 'twice.yaml'}: line 3, column 1: name: duplicate key" in err

    # list: every role listed, the broken ones flagged; their problems on stderr; exit 0
    code, out, err = call(capsys, "roles", "list")
    assert code == 0
    rows = {line.split()[0]: line for line in out.splitlines()[1:] if line.strip()}
    assert "Fine" in rows["fine"] and "teacher" in rows
    for rid in BROKEN_ROLES:
        assert "(invalid: " in rows[rid], rows[rid]
    assert f"warning: role file {roles / 'mine.yaml'}: line 2, column 1: foo: unknown field" in err
    assert f"warning: role file {roles / 'listed.yaml'}: expected a mapping" in err
    assert "Traceback" not in err


def test_a_role_file_may_be_empty_or_name_any_role_field(tmp_path: Path) -> None:
    roles = tmp_path / "roles"
    roles.mkdir()
    (roles / "blank.yaml").write_text("# nothing yet\n")
    (roles / "coach.yaml").write_text(
        "system_prompt: You coach.\nmodel: scripted\nscript: [go]\ntemperature: 0.2\n"
        "price: {input_per_mtok: 1, output_per_mtok: 2}\n"
    )
    world = tmp_path / "world.yaml"
    world.write_text("name: w\nroles: [{template: blank}, {template: coach}]\n")
    loaded = load_world(world, RoleLibrary(roles))
    assert loaded.world.role_ids == ["blank", "coach"]
    assert loaded.world.role("coach").script == ["go"]
