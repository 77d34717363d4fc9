"""What the terminal already gives, on the web pages: every page usable on a phone, cited
message ids as links, what each session is about in the list, an icon for the tab."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server

CITES = """\
name: cites
title: A closing that cites
topic: whether citations link
model: scripted
roles:
  - id: alice
    name: Alice Abbott
    script: ["Trees cool streets by shading them."]
  - id: bob
    script: ["As [m1] says, shade matters; see also [m9] and `[m1]`."]
flow:
  steps:
    - {id: one, speaker: alice, reply_to: none}
    - {id: two, speaker: bob}
"""


@pytest.fixture(scope="module")
def shown(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Server]]:
    root = tmp_path_factory.mktemp("parity")
    (root / "worlds" / "cites").mkdir(parents=True)
    (root / "worlds" / "cites" / "world.yaml").write_text(CITES)
    shutil.copytree(ROOT / "worlds" / "tutoring", root / "worlds" / "tutoring")
    site = Site(root=root, data=root / "data", ids={})
    for name in ("cites", "tutoring"):
        done = rolecall("run", name, "--data-dir", str(site.data), "--json", cwd=root)
        assert done.returncode == 0, done.stderr
        site.ids[name] = _stored_id(done)
    server = start_server(site)
    yield site, server
    stop_server(server)


def test_every_page_fits_a_phone_and_the_diagram_stays_readable(
    browser: Any, shown: tuple[Site, Server]
) -> None:
    site, server = shown
    context = browser.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    try:
        for path in (
            "/",
            f"/s/{site.ids['tutoring']}",
            f"/s/{site.ids['tutoring']}/flow",
            "/w/tutoring/flow",
            "/start",
        ):
            tab.goto(server.url + path)
            wide = tab.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, f"{path} is {wide} px wide on a 390 px screen"
        # the flow diagram's words are as big as the page's (scrolled sideways, not shrunk)
        tab.goto(f"{server.url}/w/tutoring/flow")
        height = tab.evaluate(
            "document.querySelector('.node .title').getBoundingClientRect().height"
        )
        assert height >= 12, f"the diagram's text is {height} px high"
        # the editor's fields are each labelled in view, none cut off
        fits = tab.evaluate(
            "[...document.querySelectorAll('.loops-form input, .loops-form select')]"
            ".every(el => el.getBoundingClientRect().right <= 390)"
        )
        assert fits
    finally:
        context.close()


def test_cited_ids_link_to_the_message_and_names_show_their_id(
    page: Any, shown: tuple[Site, Server]
) -> None:
    site, server = shown
    page.goto(f"{server.url}/s/{site.ids['cites']}")
    cite = page.locator("#m2 .body a.cite").first
    assert cite.inner_text() == "[m1]"
    assert page.locator("#m2 .body code").inner_text() == "[m1]"  # code stays code
    assert page.locator("#m2 .body a.cite").count() == 2
    cite.click()
    page.wait_for_function("location.hash === '#m1'")
    assert "highlight" in (page.locator("#m1").get_attribute("class") or "")
    # a named role shows its @id beside the name; an unnamed one only its id
    assert page.locator("#m1 .who").inner_text() == "Alice Abbott"
    assert page.locator("#m1 .rid").inner_text() == "@alice"
    assert page.locator("#m2 .rid").count() == 0


def test_the_list_says_what_each_session_is_about(page: Any, shown: tuple[Site, Server]) -> None:
    site, server = shown
    page.goto(server.url + "/")
    row = page.locator(f"tr[data-session='{site.ids['cites']}']")
    assert row.locator("td.about .topic").inner_text() == "whether citations link"
    assert row.locator("td.about .latest").inner_text().startswith("bob: As [m1] says")
    assert row.locator("td.status").inner_text() == "finished (flow_end)"


def test_every_page_has_an_icon(page: Any, shown: tuple[Site, Server]) -> None:
    _, server = shown
    page.goto(server.url + "/start")
    href = page.locator("link[rel=icon]").get_attribute("href")
    assert href
    icon = httpx.get(server.url + href, timeout=10)
    assert icon.status_code == 200
    assert icon.headers["content-type"].startswith("image/svg+xml")
    assert "<svg" in icon.text


def test_a_debate_and_a_consensus_start_from_their_forms_with_options(
    page: Any, shown: tuple[Site, Server]
) -> None:
    _, server = shown
    page.goto(server.url + "/start")
    form = page.locator("#start-debate")
    form.locator("input[name=topic]").fill("Sugar should be taxed")
    form.locator("select[name=profile]").select_option("technical")
    form.locator("input[name=pro]").fill("a public-health doctor")
    form.locator("input[name=max_turns]").fill("2")
    form.locator("input[name=no_dynamic]").check()
    form.locator("input[name=model]").fill("offline")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=40_000
    )
    doc = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
    assert doc["world"]["topic"] == "Sugar should be taxed"
    assert doc["world"]["debate"]["profile"] == "technical"
    assert doc["world"]["debate"]["max_turns"] == 2
    assert "public-health doctor" in json_text(doc["world"]["roles"][0])
    senders = [m["sender"] for m in doc["messages"]]
    assert senders == ["pro", "con", "moderator"]
    # each side's badge and turn, as the terminal shows them (live, and on a reload)
    for _ in range(2):
        page.wait_for_function("document.querySelectorAll('#thread .badge').length === 3")
        badges = page.locator("#thread .badge").all_inner_texts()
        assert [b.strip() for b in badges] == ["#1 PRO", "#2 CON", "#3 MODERATOR"]
        page.reload()
    page.goto(server.url + "/start")
    form = page.locator("#start-consensus")
    form.locator("input[name=topic]").fill("Which database should we adopt?")
    form.locator("select[name=profile]").select_option("brainstorm")
    form.locator("input[name=max_rounds]").fill("1")
    form.locator("input[name=model]").fill("offline")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/s/*")
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=40_000
    )
    sid = page.url.rsplit("/", 1)[1]
    doc = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
    options = doc["world"]["consensus"]
    assert (options["profile"], options["max_rounds"]) == ("brainstorm", 1)
    assert {"dreamer", "realist"} <= {m["sender"] for m in doc["messages"]}
    # an option out of range: the page says which, and nothing starts
    before = httpx.get(f"{server.url}/api/sessions", timeout=10).json()["total"]
    refused = httpx.post(
        f"{server.url}/start",
        data={"preset": "debate", "topic": "x", "max_turns": "40"},
        timeout=10,
    )
    assert refused.status_code == 422
    assert "debate.max_turns: input should be less than or equal to 20" in refused.text
    assert httpx.get(f"{server.url}/api/sessions", timeout=10).json()["total"] == before


def json_text(value: Any) -> str:
    import json

    return json.dumps(value)


def test_fork_from_a_message_with_an_edit_and_go_on_from_there(
    page: Any, shown: tuple[Site, Server]
) -> None:
    site, server = shown
    parent = site.ids["cites"]
    page.goto(f"{server.url}/s/{parent}")
    page.locator("#m1 details.fork summary").click()
    box = page.locator("#m1 details.fork textarea")
    assert box.input_value() == "Trees cool streets by shading them."
    box.fill("Fountains cool squares.")
    page.locator("#m1 details.fork button[type=submit]").click()
    page.wait_for_url(lambda url: parent not in url and "/s/" in url)
    fork = page.url.rsplit("/", 1)[1]
    assert page.locator("#status").inner_text() == "paused (fork)"
    assert page.locator("#m1 .body").inner_text().strip() == "Fountains cool squares."
    assert page.locator("article.message").count() == 1
    assert f"forked from {parent} at m1" in page.locator("#detail").inner_text()
    page.click(".controls button[data-action=resume]")
    page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=20_000
    )
    assert "As [m1] says" in page.locator("#m2 .body").inner_text()
    # the parent is as it was
    doc = httpx.get(f"{server.url}/api/sessions/{parent}", timeout=10).json()
    assert doc["messages"][0]["content"] == "Trees cool streets by shading them."
    assert fork != parent


def test_retry_asks_the_latest_speaker_again_in_a_new_branch(
    page: Any, shown: tuple[Site, Server]
) -> None:
    site, server = shown
    parent = site.ids["cites"]
    page.goto(f"{server.url}/s/{parent}")
    assert page.locator("form.retry").count() == 1  # on the latest answer only
    assert page.locator("#m2 form.retry").count() == 1
    page.locator("#m2 form.retry button").click()
    page.wait_for_url(lambda url: parent not in url and "/s/" in url)
    branch = page.url.rsplit("/", 1)[1]
    page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
    assert page.locator("#m2 .who").inner_text() == "bob"
    assert "As [m1] says" in page.locator("#m2 .body").inner_text()
    # the flow ends after bob's step, in the branch as it did here
    page.wait_for_function(
        "document.getElementById('status').textContent === 'finished (flow_end)'", timeout=20_000
    )
    doc = httpx.get(f"{server.url}/api/sessions/{branch}", timeout=10).json()
    assert [m["sender"] for m in doc["messages"]] == ["alice", "bob"]
    before = httpx.get(f"{server.url}/api/sessions/{parent}", timeout=10).json()
    assert len(before["messages"]) == 2  # the old answer stays in its session
    # only the latest agent answer is asked again
    refused = httpx.post(
        f"{server.url}/s/{parent}/fork", data={"at": "m1", "action": "retry"}, timeout=10
    )
    assert refused.status_code == 409
    assert "m1 is not the latest answer of an agent" in refused.text


def test_a_study_starts_from_an_uploaded_document(
    page: Any, shown: tuple[Site, Server], tmp_path: Any
) -> None:
    _, server = shown
    notes = tmp_path / "seasons.md"
    notes.write_text(
        "# Seasons\n\n## Tilt\n\nThe axis is tilted by 23.4 degrees, so sunlight meets each "
        "hemisphere at a steeper angle in its summer.\n"
    )
    page.goto(server.url + "/start")
    form = page.locator("#start-study")
    form.locator("input[name=document]").set_input_files(str(notes))
    form.locator("input[name=delay]").fill("2")
    form.locator("button[type=submit]").click()
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    page.locator("#m1").wait_for(timeout=20_000)
    doc = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
    study = doc["world"]["study"]
    assert study["document"] == "seasons.md" and study["delay"] == 2
    assert "tilted by 23.4 degrees" in study["text"]
    assert doc["world"]["title"] == "Study: seasons.md"
    # a document it cannot read: the page says why, nothing starts
    refused = httpx.post(
        f"{server.url}/start",
        data={"preset": "study"},
        files={"document": ("notes.docx", b"PK\x03\x04", "application/octet-stream")},
        timeout=10,
    )
    assert refused.status_code == 422
    assert "notes.docx: unsupported document type" in refused.text
