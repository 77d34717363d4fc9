"""Security: ids in paths, escaping of exports, secrets in artefacts, world-file sandboxing.

* An id that could escape its folder is refused wherever it becomes part of a path:
  ``safe_id`` itself, ``rolecall resume '../x'``, and session files carrying hostile
  session or agent ids (nothing is created outside the data directory).
* The HTML export escapes every piece of content: hostile text in every field a world,
  a run or a damaged session file can control produces no markup, no event handler, no
  link off the page. The Markdown export never lets raw HTML through.
* A key set in the environment and named by ``api_key_env`` reaches no artefact of a
  run: store, memory files, session file, log file, stdout, stderr (the litellm path,
  where the key is really sent, is checked in tests/faults/test_provider_faults.py).
* A world file cannot make the runtime read or write outside the world folder and the
  data directory: ids with ``../`` fail validation, a study document outside the world
  folder (``..``, absolute, through a symbolic link) is refused, and so should be a role
  ``template:`` that walks out of the user's role library.
"""

from __future__ import annotations

import html.parser
import json
import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import rolecall
from rolecall.errors import UnsafeIdError, WorldError
from rolecall.paths import safe_id
from rolecall.storage.document import SessionDocument
from rolecall.storage.in_memory import InMemoryStore
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import parse_world
from tests.faults import (
    Cli,
    assert_secret_absent,
    files_under,
    only_session,
    stored,
    write_net_guard,
)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == []


def scripted_world(**extra: str) -> str:
    lines = [
        "name: safe",
        "topic: security",
        "model: scripted",
        *(f"{k}: {v}" for k, v in extra.items()),
        "roles:",
        "  - {id: a, script: ['a says {n}']}",
        "  - {id: b, script: ['b answers {target} #{n}']}",
        "flow:",
        "  steps:",
        "    - {id: one, speaker: a}",
        "    - {id: two, speaker: b}",
    ]
    return "\n".join(lines) + "\n"


def write_world(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(text)
    return folder


def everything_under(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def neighbours(folder: Path) -> set[str]:
    """What sits beside ``folder`` (a write that climbs out of it lands there first)."""
    return {f"../{p.name}" for p in folder.parent.iterdir()}


# ------------------------------------------------------------------ ids in paths
@pytest.mark.parametrize(
    "value",
    ["a", "abc", "20261122-101500-a1b2c3", "A_b-c", "a.b", "x1", "9lives", "a" * 128],
)
def test_safe_id_accepts_plain_names(value: str) -> None:
    assert safe_id(value) == value


@pytest.mark.parametrize(
    "value",
    [
        *("", ".", "..", "../x", "x/../y", "a/b", "a\\b", "/etc/passwd", "C:\\x", ".hidden"),
        *("-rf", "a..b", "..a", "a\x00b", "a\nb", " a", "a ", "é", "a" * 129, "~root"),
        *("a\n", "20261122-101500-a1b2c3\n", "a\r", "a\n\n"),  # `$` allowed a final newline
    ],
)
def test_safe_id_refuses_what_could_escape_or_hide(value: str) -> None:
    with pytest.raises(UnsafeIdError, match="not safe in a file name"):
        safe_id(value, "session id")


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(st.text(max_size=20))
def test_an_accepted_id_always_names_a_direct_child(value: str) -> None:
    try:
        accepted = safe_id(value)
    except UnsafeIdError:
        return
    base = Path("/srv/data")
    assert (base / accepted).parent == base
    assert os.path.normpath(base / accepted) == str(base / accepted)
    assert not accepted.startswith((".", "-")) and accepted.isascii()
    assert all(c.isalnum() or c in "_.-" for c in accepted), repr(accepted)


def test_other_ids_refuse_a_trailing_newline(tmp_path: Path) -> None:
    """Role ids of the library, world names of `worlds new`, agents of a session file."""
    from rolecall.cli.modes_cmd import new_world_yaml
    from rolecall.errors import UsageError
    from rolecall.storage.document import SessionDocument
    from rolecall.world.library import RoleLibrary

    assert RoleLibrary(tmp_path)._user_path("critic\n") is None
    with pytest.raises(UsageError, match="bad world name"):
        new_world_yaml("debate", "panel\n")
    with pytest.raises(ValueError, match="is not an agent id"):
        SessionDocument._agent_ids({"a\n": []})


@pytest.mark.parametrize("session", ["../x", "a/b", "..", "../../etc/passwd"])
def test_resume_refuses_an_id_that_could_escape(cli: Cli, tmp_path: Path, session: str) -> None:
    result = cli.run("resume", session)
    assert result.returncode == 2, result.stderr
    assert "not safe in a file name" in result.stderr
    assert "Traceback" not in result.stderr
    assert everything_under(tmp_path) <= {
        "home",
        "home/rolecall.db",
        "guard",
        "guard/sitecustomize.py",
    }


@pytest.fixture
def session_file(cli: Cli, tmp_path: Path) -> dict[str, Any]:
    """A real session file (one message, then stopped by hand), as JSON data."""
    world = write_world(tmp_path / "w", scripted_world())
    saved = tmp_path / "saved.json"
    result = cli.run(
        "run", str(world), "--mode", "step", "--session-file", str(saved), stdin="\nq\n"
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(saved.read_text())
    assert len(data["messages"]) == 1
    return data


@pytest.mark.parametrize("where", ["session_id", "memory agent"])
def test_session_file_with_a_hostile_id_is_refused_and_writes_nothing_outside(
    cli: Cli, tmp_path: Path, session_file: dict[str, Any], where: str
) -> None:
    if where == "session_id":
        session_file["session_id"] = "../../escaped"
    else:
        session_file["session_id"] = "20990101-000000-abcdef"
        session_file["memory"]["../../../escaped"] = session_file["memory"]["a"]
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(session_file))
    before = everything_under(tmp_path) | neighbours(tmp_path)
    elsewhere = tmp_path / "elsewhere"

    result = cli.run("resume", str(hostile), ROLECALL_HOME=str(elsewhere))

    assert result.returncode == 2, result.stderr
    refusal = "not safe in a file name" if where == "session_id" else "is not an agent id"
    assert refusal in result.stderr and "Traceback" not in result.stderr
    after = everything_under(tmp_path) | neighbours(tmp_path)
    assert all(p.startswith("elsewhere") for p in after - before), after - before
    assert not any("escaped" in p for p in after)


def test_session_file_with_an_invalid_world_is_a_usage_error(
    cli: Cli, tmp_path: Path, session_file: dict[str, Any]
) -> None:
    session_file["world"]["roles"][0]["id"] = "../evil"
    hostile = tmp_path / "hostile.json"
    hostile.write_text(json.dumps(session_file))

    result = cli.run("resume", str(hostile), ROLECALL_HOME=str(tmp_path / "elsewhere"))

    paths = everything_under(tmp_path) | neighbours(tmp_path)
    assert not any("evil" in p for p in paths if "json" not in p)
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr


# ------------------------------------------------------------------ exports
PAYLOADS = [
    "<script>alert('x')</script>",
    '"><img src=x onerror=alert(1)>',
    "</div></article><iframe src=javascript:alert(1)></iframe>",
    "' onmouseover='alert(1)' x='",
    '<a href="https://evil.example/">click</a>',
    "<!-- comment --><svg onload=alert(1)>",
    "&lt;already escaped&gt; & ampersand",
    "line one\n<style>body{display:none}</style>\n\x1b[31mred\x00",
]
SAFE_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2", "p"),
    *("span", "dl", "dt", "dd", "time", "table", "thead", "tbody", "tfoot", "tr", "th", "td"),
    *("article", "div", "a", "footer", "section", "details", "summary", "ul", "li", "strong"),
    *("em", "code", "small", "br", "nav", "label", "caption", "col", "colgroup"),
}


class Structure(html.parser.HTMLParser):
    """The tags and attributes of a page, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, list[tuple[str, str | None]]]] = []
        self.text: list[str] = []
        self.styles = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, attrs))
        self.styles += tag == "style"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def hostile_document() -> SessionDocument:
    """A real scripted run whose texts are payloads, then every id made hostile too."""
    payload = " ".join(PAYLOADS[:4])
    world = parse_world(
        "name: hostile\n"
        f"title: {json.dumps(PAYLOADS[0])}\n"
        f"topic: {json.dumps(PAYLOADS[1])}\n"
        "model: scripted\n"
        "roles:\n"
        f"  - {{id: a, name: {json.dumps(PAYLOADS[2])}, script: {json.dumps(PAYLOADS[:4])}}}\n"
        f"  - {{id: b, name: {json.dumps(PAYLOADS[3])}, script: {json.dumps(PAYLOADS[4:])}}}\n"
        "flow:\n  steps:\n    - {id: one, speaker: a}\n"
        "    - {id: two, speaker: b, loop: {to: one, max: 4}}\n"
    ).world

    async def run() -> SessionDocument:
        store = InMemoryStore()
        result = await rolecall.run(world, store=store)
        return await store.load(result.session_id)

    data = json.loads(anyio.run(run).model_dump_json())
    data["created_at"] = datetime(2026, 1, 1, tzinfo=UTC).isoformat()
    # what a damaged or forged session file could carry
    data["session_id"] = PAYLOADS[1]
    data["world"]["name"] = PAYLOADS[0]
    data["world"]["roles"][1]["id"] = PAYLOADS[5]
    data["messages"][1]["sender"] = PAYLOADS[5]
    data["messages"][1]["id"] = PAYLOADS[3]
    data["messages"][2]["reply_to"] = PAYLOADS[3]
    data["messages"][2]["step_id"] = PAYLOADS[4]
    data["drafts"] = [
        {
            "message_id": PAYLOADS[1],
            "sender": PAYLOADS[2],
            "content": payload,
            "reason": PAYLOADS[0],
            "step_id": PAYLOADS[6],
            "ts": "2026-01-01T00:00:00Z",
        }
    ]
    return SessionDocument.model_validate(data)


@pytest.mark.parametrize("search", [None, PAYLOADS[0], "alert"])
def test_html_export_escapes_everything(search: str | None) -> None:
    export = pytest.importorskip("rolecall.export")
    doc = hostile_document()

    page = export.to_html(doc, search=search)

    parsed = Structure()
    parsed.feed(page)
    parsed.close()
    tags = {tag for tag, _ in parsed.tags}
    assert tags <= SAFE_TAGS, f"markup from content: {tags - SAFE_TAGS}"
    assert parsed.styles == 1  # the page's own, none from content
    for tag, attrs in parsed.tags:
        for name, value in attrs:
            assert not name.startswith("on"), (tag, name, value)
            assert name in {"class", "style", "id", "href", "lang", "charset", "name"} | {
                "content",
                "datetime",
                "title",
                "colspan",
            }, (tag, name)
            if name == "href":
                assert (value or "").startswith("#"), value  # no link off the page
            if name == "style":
                assert re.fullmatch(r"--c:\s*#[0-9a-fA-F]{3,8};?", value or ""), value
    text = "".join(parsed.text)
    assert "<script>alert('x')</script>" in text  # shown as text, not run
    assert "\x00" not in page and "\x1b" not in page
    assert "https://evil.example/" not in {v for _, attrs in parsed.tags for _, v in attrs}


def test_markdown_export_lets_no_html_through() -> None:
    export = pytest.importorskip("rolecall.export")
    doc = hostile_document()
    for search in (None, PAYLOADS[0]):
        markdown = export.to_markdown(doc, search=search)
        raw_tags = re.findall(r"(?<!\\)<\s*/?\s*[A-Za-z!]", markdown)
        assert raw_tags == [], raw_tags
        assert "](" not in markdown.replace("\\]", "")  # no Markdown link from content


# ------------------------------------------------------------------ secrets
def test_no_secret_in_any_artefact_of_a_run(cli: Cli, tmp_path: Path) -> None:
    secret = "sk-rolecall-security-4b8e1f0c9a7d2e63"
    text = scripted_world(settings="{api_key_env: ROLECALL_SECURITY_KEY}")
    text = text.replace("  - {id: a,", "  - {id: a, api_key_env: ROLECALL_OTHER_TOKEN,")
    world = write_world(tmp_path / "w", text)
    saved, log = tmp_path / "out" / "session.json", tmp_path / "out" / "rolecall.log"
    (tmp_path / "out").mkdir()
    env = {"ROLECALL_SECURITY_KEY": secret, "ROLECALL_OTHER_TOKEN": secret[::-1]}

    run = cli.run(
        "run",
        str(world),
        "--json",
        "--session-file",
        str(saved),
        "--log-file",
        str(log),
        "-vv",
        **env,
    )
    assert run.returncode == 0, run.stderr
    sid = only_session(cli.home)
    again = cli.run("resume", sid, "--json", "-vv", **env)  # finished: says so and exits
    assert again.returncode == 0, again.stderr

    assert stored(cli.home).state == "finished"
    assert "ROLECALL_SECURITY_KEY" in saved.read_text()  # the name is kept, not the value
    outputs = [run.stdout, run.stderr, again.stdout, again.stderr]
    for value in (secret, secret[::-1]):
        checked = assert_secret_absent(
            value, files=files_under(cli.home, saved, log), texts=outputs
        )
        assert checked >= 5  # store, two memory files, session file, log


# ------------------------------------------------------------------ world files
@pytest.mark.parametrize(
    ("yaml_text", "where"),
    [
        ("name: ../x\nroles: [{id: a}]", "name"),
        ("name: w\nroles: [{id: ../a}]", "roles[0].id"),
        ("name: w\nroles: [{id: a/b}]", "roles[0].id"),
        ("name: w\nroles: [{id: a}]\nflow: {steps: [{id: ../s, speaker: a}]}", "flow.steps[0].id"),
        (
            "name: w\nroles: [{id: a}]\nflow: {steps: [{id: s, speaker: ../a}]}",
            "flow.steps[0].speaker",
        ),
        ("name: w\nroles: [{template: ../../etc/passwd}]", "roles[0].template"),
        ("name: w\nroles: [{template: /etc/passwd}]", "roles[0].template"),
    ],
)
def test_ids_that_could_escape_fail_validation(yaml_text: str, where: str) -> None:
    with pytest.raises(WorldError) as caught:
        parse_world(yaml_text)
    assert any(p.startswith(f"{where}:") for p in caught.value.problems), caught.value.problems


MARKER = "MARKER-OUTSIDE-THE-WORLD-FOLDER-31f9"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A document outside the world folder, with text a study could use."""
    folder = tmp_path / "outside"
    folder.mkdir()
    doc = folder / "secret.md"
    doc.write_text(f"# Secret\n\n{MARKER} is a paragraph long enough to be a study unit.\n")
    return doc


def study_world(document: str) -> str:
    return f"name: w\nmode: study\nmodel: offline\nstudy: {{document: {json.dumps(document)}}}\n"


@pytest.mark.parametrize(
    "document",
    [
        *("../outside/secret.md", "/etc/passwd", "notes/../../outside/secret.md"),
        *("..\\outside\\x.md", "~/secret.md", "C:\\secret.md"),
    ],
)
def test_study_document_outside_the_world_folder_is_refused(document: str) -> None:
    pytest.importorskip("rolecall.modes.study")
    with pytest.raises(WorldError) as caught:
        parse_world(study_world(document))
    problems = [p for p in caught.value.problems if p.startswith("study.document:")]
    assert problems, caught.value.problems


def test_study_document_through_a_symlink_out_of_the_folder_is_refused(
    tmp_path: Path, outside: Path
) -> None:
    study = pytest.importorskip("rolecall.modes.study")
    if not hasattr(study, "load_study"):
        pytest.skip("rolecall.modes.study has no load_study yet")
    folder = write_world(tmp_path / "w", study_world("notes.md"))
    (folder / "notes.md").symlink_to(outside)
    world = parse_world(study_world("notes.md")).world

    with pytest.raises(WorldError) as caught:
        study.load_study(folder, world)

    assert any("outside the world folder" in p for p in caught.value.problems)
    assert MARKER not in str(caught.value)


def test_study_world_with_an_escaping_document_is_refused_by_the_cli(
    cli: Cli, tmp_path: Path, outside: Path
) -> None:
    pytest.importorskip("rolecall.modes.study")
    folder = write_world(tmp_path / "w", study_world("../outside/secret.md"))
    result = cli.run("run", str(folder), "--max-turns", "2")
    assert result.returncode == 2, result.stderr
    assert "study.document" in result.stderr and "Traceback" not in result.stderr
    assert MARKER not in result.stdout + result.stderr
    assert not (cli.home / "rolecall.db").exists()  # nothing started, nothing stored
    assert outside.is_file()


@pytest.mark.parametrize("template", ["../../outside/leak", "ABSOLUTE"])
def test_role_template_cannot_walk_out_of_the_role_library(tmp_path: Path, template: str) -> None:
    (tmp_path / "outside").mkdir()
    leak = tmp_path / "outside" / "leak.yaml"
    leak.write_text(f"system_prompt: {MARKER}\nname: Leak\n")
    roles = tmp_path / "data" / "roles"
    roles.mkdir(parents=True)
    name = str(leak.with_suffix("")) if template == "ABSOLUTE" else template
    text = f"name: w\nroles:\n  - {{template: {json.dumps(name)}, id: a}}\n"

    try:
        loaded = parse_world(text, library=RoleLibrary(roles)).world.model_dump_json()
    except WorldError as exc:
        loaded = str(exc)
    assert MARKER not in loaded


def test_world_template_cannot_read_outside_through_the_cli(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "leak.yaml").write_text(f"system_prompt: {MARKER}\nname: Leak\n")
    (cli.home / "roles").mkdir(parents=True)  # exists once the user has made a role
    text = scripted_world().replace(
        "  - {id: a, script:", "  - {template: ../../outside/leak, id: a, script:"
    )
    world = write_world(tmp_path / "w", text)

    result = cli.run("run", str(world), "--json")

    leaked = [p for p in files_under(cli.home) if MARKER.encode() in p.read_bytes()]
    assert leaked == [], f"text from outside the role library stored in {leaked}"
    assert MARKER not in result.stdout + result.stderr
    assert result.returncode == 2, result.stderr
