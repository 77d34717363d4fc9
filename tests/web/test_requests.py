"""What the server answers to messages, forms and bodies off the beaten path: over real
HTTP to a real `rolecall web` process (no browser needed)."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import time
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from rolecall import open_session
from tests.conftest import ROOT
from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server
from tests.web.test_flowedit import EDIT_WORLD

IMAGE_WORLD = """\
name: img
title: An image in a message
topic: images
model: scripted
settings: {max_turns: 2}
roles:
  - id: a
    script:
      - "See ![a chart](https://example.com/chart.png) and ![the map][m]\\n\\n[m]: https://example.com/map.png"
  - id: b
    script: ["[![logo](https://example.com/logo.png)](https://example.org) <https://example.net>"]
flow:
  steps:
    - {id: s1, speaker: a, reply_to: none}
    - {id: s2, speaker: b}
"""


FULL_FORM = {
    "step.0": "s1",
    "step.1": "s2",
    "loop.0.to": "",
    "loop.0.max": "",
    "loop.0.until": "",
    "loop.1.to": "s1",
    "loop.1.max": "2",
    "loop.1.until": "",
    "stop": "",
}


VERSION = re.compile(r'name="version" value="([0-9a-f]+)"')


def versioned(web: Server, world: str, form: dict[str, str]) -> dict[str, str]:
    """``form`` with the version of world.yaml that the flow page shows now."""
    page = httpx.get(f"{web.url}/w/{world}/flow", timeout=10)
    found = VERSION.search(page.text)
    assert found, page.text
    return {**form, "version": found.group(1)}


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("requests")
    (root / "worlds" / "img").mkdir(parents=True)
    (root / "worlds" / "img" / "world.yaml").write_text(IMAGE_WORLD)
    (root / "worlds" / "edit").mkdir()
    (root / "worlds" / "edit" / "world.yaml").write_text(EDIT_WORLD)
    # a preset world of its own: its mode makes its flow, there are no steps to edit
    shutil.copytree(
        ROOT / "src" / "rolecall" / "worlds" / "consensus", root / "worlds" / "consensus"
    )
    site = Site(root=root, data=root / "data", ids={})
    done = rolecall("run", "img", "--data-dir", str(site.data), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    site.ids["img"] = _stored_id(done)
    return site


@pytest.fixture(scope="module")
def web(place: Site) -> Iterator[Server]:
    running = start_server(place)
    yield running
    stop_server(running)


def test_a_message_with_images_renders_them_as_links(web: Server, place: Site) -> None:
    page = httpx.get(f"{web.url}/s/{place.ids['img']}", timeout=10)
    assert page.status_code == 200, page.text
    html = page.text
    assert (
        '<a href="https://example.com/chart.png" rel="nofollow noopener noreferrer">a chart</a>'
        in html
    )
    assert (
        '<a href="https://example.com/map.png" rel="nofollow noopener noreferrer">the map</a>'
        in html
    )
    assert '<a href="https://example.org" rel="nofollow noopener noreferrer">logo</a>' in html
    assert (
        '<a href="https://example.net" rel="nofollow noopener noreferrer">https://example.net</a>'
        in html
    )
    assert "<img" not in html
    # the fragment the live page swaps in when a message completes
    fragment = httpx.get(f"{web.url}/s/{place.ids['img']}/m/m1", timeout=10)
    assert fragment.status_code == 200 and ">a chart</a>" in fragment.text
    assert not any("Traceback" in line for line in web.stderr)


@pytest.mark.parametrize(
    ("headers", "body", "problem"),
    [
        ({"content-type": "application/json"}, b'{"a": 1}', "not application/json"),
        ({}, b"", "not a body without a type"),
        ({"content-type": "text/plain"}, b"loop.1.to=", "not text/plain"),
        (
            {"content-type": "application/x-www-form-urlencoded"},
            b"",
            "it lacks step.0, loop.0.to, loop.0.max",
        ),
        (
            {"content-type": "application/x-www-form-urlencoded"},
            b"step.0=s1&step.1=s2&loop.0.to=&loop.0.max=&loop.0.until=&loop.1.to=&loop.1.max="
            b"&loop.1.until=",
            "it lacks stop, version;",
        ),
    ],
)
def test_a_flow_post_without_the_form_is_refused_and_saves_nothing(
    web: Server, place: Site, headers: dict[str, str], body: bytes, problem: str
) -> None:
    path = place.worlds / "edit" / "world.yaml"
    answer = httpx.post(f"{web.url}/w/edit/flow", headers=headers, content=body, timeout=10)
    assert answer.status_code == 400, answer.text
    assert problem in answer.text.replace("&#39;", "'"), answer.text
    assert "nothing was saved" in answer.text
    assert path.read_text() == EDIT_WORLD


def test_the_flow_form_saves_and_lists_every_problem(web: Server, place: Site) -> None:
    path = place.worlds / "edit" / "world.yaml"
    bad = {**FULL_FORM, "loop.1.max": "x", "loop.1.until": "{contains: [", "stop": "[oops"}
    answer = httpx.post(f"{web.url}/w/edit/flow", data=versioned(web, "edit", bad), timeout=10)
    assert answer.status_code == 200
    assert answer.text.count('class="field-error"') == 3
    assert path.read_text() == EDIT_WORLD
    try:
        good = versioned(web, "edit", {**FULL_FORM, "loop.1.max": "3"})
        saved = httpx.post(f"{web.url}/w/edit/flow", data=good, timeout=10)
        assert saved.status_code == 303 and saved.headers["location"].endswith("?saved=1")
        assert path.read_text() == EDIT_WORLD.replace("max: 2}", "max: 3}")
        # a multipart form is a form too
        files = {k: (None, v) for k, v in versioned(web, "edit", FULL_FORM).items()}
        again = httpx.post(f"{web.url}/w/edit/flow", files=files, timeout=10)
        assert again.status_code == 303
        assert path.read_text() == EDIT_WORLD
        files = {k: (None, v) for k, v in versioned(web, "edit", FULL_FORM).items()}
        files["stop"] = ("stop.txt", "{flag: f}")
        uploaded = httpx.post(f"{web.url}/w/edit/flow", files=files, timeout=10)
        assert uploaded.status_code == 400 and "no file fields (stop)" in uploaded.text
        assert path.read_text() == EDIT_WORLD
    finally:
        path.write_text(EDIT_WORLD)


def test_a_world_whose_mode_makes_its_flow_refuses_a_flow_post(web: Server, place: Site) -> None:
    path = place.worlds / "consensus" / "world.yaml"
    before = path.read_text()
    answer = httpx.post(f"{web.url}/w/consensus/flow", data={"stop": ""}, timeout=10)
    assert answer.status_code == 409 and "no flow steps of its own" in answer.text
    assert path.read_text() == before


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"world": "img", "topic": 5}, "topic: input should be a valid string, got 5"),
        ({"world": "img", "model": ["x"]}, 'model: input should be a valid string, got ["x"]'),
        ({"world": 5}, "world: input should be a valid string, got 5"),
        ({"topic": "t"}, "world is missing"),
        ({"world": "img", "wrld": 1}, "wrld is not a field of this request"),
    ],
)
def test_a_start_body_of_the_wrong_shape_names_the_field_and_starts_nothing(
    web: Server, body: dict[str, object], problem: str
) -> None:
    before = httpx.get(f"{web.url}/api/sessions", timeout=10).json()["total"]
    answer = httpx.post(f"{web.url}/api/sessions", json=body, timeout=10)
    assert answer.status_code == 422, answer.text
    assert problem in answer.json()["error"]
    assert "sqlite" not in answer.text.lower() and "binding" not in answer.text
    assert httpx.get(f"{web.url}/api/sessions", timeout=10).json()["total"] == before


def test_say_and_control_bodies_are_checked_too(web: Server, place: Site) -> None:
    sid = place.ids["img"]  # finished: a right body would get 409
    said = httpx.post(f"{web.url}/api/sessions/{sid}/say", json={"text": 5}, timeout=10)
    assert said.status_code == 422 and said.json()["error"].startswith("text: ")
    done = httpx.post(f"{web.url}/api/sessions/{sid}/control", json={"action": "jump"}, timeout=10)
    assert done.status_code == 422
    assert done.json()["error"].startswith("action: input should be 'pause', 'resume'")
    right = httpx.post(f"{web.url}/api/sessions/{sid}/control", json={"action": "stop"}, timeout=10)
    assert right.status_code == 409 and "finished" in right.json()["error"]
    for raw, problem in ((b"nope", "not JSON"), (b"[1]", "must be a JSON object")):
        answer = httpx.post(
            f"{web.url}/api/sessions",
            content=raw,
            headers={"content-type": "application/json"},
            timeout=10,
        )
        assert answer.status_code == 400 and problem in answer.json()["error"]


REMOTE_WORLD = """\
name: duo
topic: t
model: scripted
roles:
  - {id: a, script: ["a says {n} one two three"]}
  - {id: b, transport: nats, script: ["b says {n} four five six"]}
flow:
  steps: [{id: s1, speaker: a}, {id: s2, speaker: b}]
"""


def test_without_nats_a_world_with_remote_roles_is_refused_before_it_starts(
    web: Server, place: Site
) -> None:
    (place.worlds / "duo").mkdir(exist_ok=True)
    (place.worlds / "duo" / "world.yaml").write_text(REMOTE_WORLD)
    before = httpx.get(f"{web.url}/api/sessions", timeout=10).json()["total"]
    refused = httpx.post(f"{web.url}/api/sessions", json={"world": "duo"}, timeout=10)
    assert refused.status_code == 422
    assert "(transport: nats: b)" in refused.json()["error"]
    assert "--nats URL" in refused.json()["error"]
    assert httpx.get(f"{web.url}/api/sessions", timeout=10).json()["total"] == before


def test_a_stored_session_with_remote_roles_is_not_reopened_without_nats(
    web: Server, place: Site
) -> None:
    """Its next turn could not be generated: the server refuses to resume it (409, naming
    the role), before anything runs, and the stored session is left as it was."""
    (place.worlds / "duo").mkdir(exist_ok=True)
    (place.worlds / "duo" / "world.yaml").write_text(
        REMOTE_WORLD.replace("transport: nats", "transport: local")
    )

    async def one_step() -> str:
        async with open_session(place.worlds / "duo", data_dir=place.data, mode="step") as session:
            await session.step()
            return session.session_id

    sid = anyio.run(one_step)
    # the session's world as another machine ran it: b generated over NATS
    with sqlite3.connect(place.data / "rolecall.db") as db:
        (text,) = db.execute(
            "SELECT world_json FROM session_worlds WHERE session_id = ?", (sid,)
        ).fetchone()
        doc = json.loads(text)
        doc["roles"][1]["transport"] = "nats"
        db.execute(
            "UPDATE session_worlds SET world_json = ? WHERE session_id = ?",
            (json.dumps(doc), sid),
        )
    before = httpx.get(f"{web.url}/api/sessions/{sid}", timeout=10).json()
    resumed = httpx.post(
        f"{web.url}/api/sessions/{sid}/control", json={"action": "resume"}, timeout=10
    )
    assert resumed.status_code == 409, resumed.text
    assert "role b of world 'duo' has transport: nats" in resumed.json()["error"]
    after = httpx.get(f"{web.url}/api/sessions/{sid}", timeout=10).json()
    assert after["last_seq"] == before["last_seq"] and after["state"] == before["state"]
    assert not any("Traceback" in line for line in web.stderr)


def test_talking_to_a_stored_session_writes_every_agents_memory_file(
    web: Server, place: Site
) -> None:
    """A session the server reopens to talk to keeps its memory files, as resume does."""
    done = rolecall(
        "chat",
        "panel",
        "--data-dir",
        str(place.data),
        "--json",
        cwd=place.root,
        stdin="@ecologist hello\n",
    )
    assert done.returncode == 0, done.stderr
    sid = _stored_id(done)
    said = httpx.post(
        f"{web.url}/api/sessions/{sid}/say", json={"text": "@planner what next?"}, timeout=10
    )
    assert said.status_code < 300, said.text
    memory = place.data / "memory" / sid

    def lines(agent: str) -> list[dict[str, Any]]:
        path = memory / f"{agent}.jsonl"
        return [json.loads(x) for x in path.read_text("utf-8").splitlines()]

    deadline = time.monotonic() + 20
    while not any(e["role"] == "assistant" for e in lines("planner")):
        assert time.monotonic() < deadline, "the planner's reply never reached its memory"
        time.sleep(0.05)
    for agent in ("ecologist", "economist", "planner", "historian"):
        contents = [e["content"] for e in lines(agent)]
        assert "@ecologist hello" in contents and "@planner what next?" in contents, agent


def test_a_flow_post_to_a_world_with_a_key_given_twice_names_it_and_saves_nothing(
    web: Server, place: Site
) -> None:
    (place.worlds / "twice").mkdir(exist_ok=True)
    path = place.worlds / "twice" / "world.yaml"
    text = EDIT_WORLD.replace("name: edit\n", "name: twice\n") + "topic: again\n"
    path.write_text(text)
    answer = httpx.post(f"{web.url}/w/twice/flow", data={**FULL_FORM, "version": "0"}, timeout=10)
    assert 400 <= answer.status_code < 500, answer.text
    assert "duplicate key" in answer.text
    assert path.read_text() == text
    assert not any("Traceback" in line for line in web.stderr)
