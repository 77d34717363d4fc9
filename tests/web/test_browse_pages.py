"""The web view's pages for finding one's way: the external flag of a session, the role
library, search inside messages with a snippet, a session's fork tree, and the JSON list
of sessions in the shape `rolecall sessions list --json` prints."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server

GATE = """\
name: gate
title: A gate held by a flag
topic: waiting for a go-ahead
model: scripted
roles:
  - id: alice
    name: Alice Abbott
    script: ["Is the gate open yet? The economists say maybe."]
  - id: bob
    script: ["Not until someone says go; replying to {target}."]
flow:
  stop:
    - {flag: done}
  steps:
    - {id: ask, speaker: alice, reply_to: none}
    - {id: answer, speaker: bob, loop: {to: ask, max: 5, until: {flag: go}}}
"""


def _fork(site: Site, sid: str, at: str, *edit: str) -> str:
    done = rolecall(
        "sessions",
        "fork",
        sid,
        "--at",
        at,
        *edit,
        "--data-dir",
        str(site.data),
        "-q",
        cwd=site.root,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.fixture(scope="module")
def gate(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Site, Server]]:
    root = tmp_path_factory.mktemp("browse")
    (root / "worlds" / "gate").mkdir(parents=True)
    (root / "worlds" / "gate" / "world.yaml").write_text(GATE)
    site = Site(root=root, data=root / "data", ids={})
    done = rolecall("run", "gate", "--data-dir", str(site.data), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    site.ids["gate"] = _stored_id(done)
    site.ids["fork"] = _fork(site, site.ids["gate"], "m2")
    site.ids["fork2"] = _fork(site, site.ids["fork"], "m1", "--edit", 'Open up, "economists"!')
    server = start_server(site)
    yield site, server
    stop_server(server)


def test_a_flag_set_on_the_page_is_shown_stored_and_steers_the_flow(
    page: Any, gate: tuple[Site, Server]
) -> None:
    site, server = gate
    sid = _fork(site, site.ids["gate"], "m2")  # paused, its flow going on at `ask`
    page.goto(f"{server.url}/s/{sid}")
    assert page.locator("#flags").inner_text() == "none"
    # the page suggests the flags the world's conditions check, as /flag's Tab does
    suggested = page.locator("#flag-names option").evaluate_all("os => os.map(o => o.value)")
    assert suggested == ["done", "go"]
    page.fill("#flag-name", "reviewed")  # any flag, typed
    page.click("#flag-form button[type=submit]")
    page.wait_for_function("document.getElementById('flags').textContent === 'reviewed'")
    page.click("button.flag-pick[data-flag=done]")  # one the world checks, one click
    page.wait_for_function("document.getElementById('flags').textContent === 'done, reviewed'")
    assert page.locator("#control-error").inner_text() == ""
    doc = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
    assert doc["state"]["flags"] == ["done", "reviewed"]
    page.reload()  # stored: the page shows it from the store too
    assert page.locator("#flags").inner_text() == "done, reviewed"
    # the flow's stop condition {flag: done} holds: Resume finishes the session
    page.click(".controls button[data-action=resume]")
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=20_000
    )
    doc = httpx.get(f"{server.url}/api/sessions/{sid}", timeout=10).json()
    assert doc["state"]["state"] == "finished"
    assert doc["state"]["stop_reason"] == "flag"
    assert len(doc["messages"]) < 10  # the unflagged session ran its loop to 10
    # a name that is not one word is refused, naming the field; a finished session takes none
    url = f"{server.url}/api/sessions/{site.ids['fork']}/flag"
    bad = httpx.post(url, json={"name": "two words"}, timeout=10)
    assert bad.status_code == 422 and bad.json()["error"].startswith("name: ")
    assert "one word" in bad.json()["error"]
    over = httpx.post(f"{server.url}/api/sessions/{sid}/flag", json={"name": "go"}, timeout=10)
    assert over.status_code == 409 and "finished" in over.json()["error"]
    # another site's page cannot set one (the guard's origin check)
    foreign = httpx.post(
        url, json={"name": "go"}, headers={"origin": "http://evil.example"}, timeout=10
    )
    assert foreign.status_code == 403


def test_the_role_library_lists_searches_and_shows_each_persona(
    page: Any, gate: tuple[Site, Server]
) -> None:
    site, server = gate
    made = rolecall(
        "roles",
        "create",
        "my-teacher",
        "--from",
        "teacher",
        "--name",
        "Ms. Rivera",
        "--data-dir",
        str(site.data),
        cwd=site.root,
    )
    assert made.returncode == 0, made.stderr
    (site.data / "roles" / "broken.yaml").write_text("name: [unclosed\n")
    page.goto(server.url + "/")
    page.click("header.top nav >> text=Roles")
    page.wait_for_url("**/roles")
    cards = page.locator("article.role-card")
    assert cards.count() >= 30
    mine = page.locator("#role-my-teacher")
    assert mine.locator(".role-name").inner_text() == "Ms. Rivera"
    assert mine.locator(".role-kind").inner_text() == "yours"
    assert page.locator("#role-teacher .role-kind").inner_text() == "built-in"
    # a role file that cannot be used says why, as `roles list` warns; the others are listed
    problem = page.locator("#role-broken .error").inner_text()
    assert problem.startswith(
        "This role file cannot be used: broken.yaml: line 2, column 1: invalid YAML"
    )
    # the worlds that take it as a template (shipped ones here)
    used = page.locator("#role-lawyer .role-used a").all_inner_texts()
    assert {"classroom", "courtroom"} <= set(used) and used == sorted(used)
    link = page.locator("#role-lawyer .role-used a").first.get_attribute("href")
    assert link == f"/w/{used[0]}/flow"
    assert page.locator("#role-my-teacher .role-used").count() == 0
    # the persona: what the model is told, its style and constraints
    teacher = page.locator("#role-teacher")
    assert not teacher.locator(".persona .prompt").is_visible()
    teacher.locator(".persona summary").click()
    assert "patient teacher" in teacher.locator(".persona .prompt").inner_text()
    assert "Explain one idea per turn." in teacher.locator(".constraints").inner_text()
    # searching finds words of a persona, not only of names
    page.fill("input[name=q]", "analogy")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**/roles?q=analogy")
    found = page.locator("article.role-card").evaluate_all("cs => cs.map(c => c.dataset.role)")
    assert "teacher" in found and "my-teacher" in found
    assert len(found) < cards.count() or len(found) < 30
    page.goto(server.url + "/roles?q=no-such-persona-anywhere")
    none = page.locator("#roles-none").inner_text()
    assert none == "No role matches “no-such-persona-anywhere”."
    # the cards filter as one types, before the form is sent
    page.goto(server.url + "/roles")
    page.locator("#roles-q").press_sequentially("ANALOGY")
    page.wait_for_function("document.getElementById('roles-count').textContent.includes('match')")
    visible = page.locator("article.role-card:visible").evaluate_all(
        "cs => cs.map(c => c.dataset.role)"
    )
    assert sorted(visible) == sorted(found)
    assert page.locator("#roles-count").inner_text() == (
        f"{len(found)} of {cards.count()} roles match “ANALOGY”"
    )


def test_search_finds_text_inside_words_and_links_to_the_message(
    page: Any, gate: tuple[Site, Server]
) -> None:
    site, server = gate
    page.goto(server.url + "/")
    page.fill("input[name=q]", "ECONOM")  # part of a word, in another case
    page.click("form.filters button[type=submit]")
    hits = page.locator("ol.hits li.hit")
    assert hits.count() >= 2
    edited = page.locator(f"li.hit[data-session='{site.ids['fork2']}']")
    assert edited.locator(".snippet").inner_text() == 'Open up, "economists"!'
    assert edited.locator("mark").inner_text() == "econom"
    assert edited.locator(".hit-where").inner_text() == "m1 · Alice Abbott"  # as the thread names
    # the sessions holding such a message are listed below, the word being inside another
    assert page.locator(f"tr[data-session='{site.ids['gate']}']").count() == 1
    # a few of each session's messages; a link shows the session's others
    group = page.locator(f".hit-group[data-session='{site.ids['gate']}']")
    assert group.locator("li.hit .mid").all_inner_texts() == ["m1", "m3", "m5"]
    more = group.locator(".hit-more a")
    assert more.inner_text() == "2 more in this session"
    assert more.get_attribute("href") == f"/s/{site.ids['gate']}?q=ECONOM"
    more.click()  # the session's messages holding it, the text marked in each
    page.wait_for_url(f"**/s/{site.ids['gate']}?q=ECONOM")
    assert page.locator("#thread article.message").count() == 5
    assert page.locator("#thread .body mark").all_inner_texts() == ["econom"] * 5
    page.go_back()
    first = page.locator(f"li.hit[data-session='{site.ids['gate']}'] a").first
    first.click()
    page.wait_for_url(f"**/s/{site.ids['gate']}?page=1#m1")
    assert "highlight" in (page.locator("#m1").get_attribute("class") or "")
    # a text JSON escapes (its quotes) is found as well
    page.goto(server.url + '/?q="economists"')
    assert page.locator("li.hit").count() == 1
    assert page.locator("li.hit mark").inner_text() == '"economists"'
    # markup in a search is text
    page.goto(server.url + "/?q=%3Cb%3Ex")
    assert page.locator("ol.hits").count() == 0
    assert page.locator(".hits .empty").inner_text() == "No message contains “<b>x”."


def test_the_fork_tree_shows_each_fork_under_its_parent_at_its_message(
    page: Any, gate: tuple[Site, Server]
) -> None:
    site, server = gate
    root, fork, fork2 = site.ids["gate"], site.ids["fork"], site.ids["fork2"]
    # the list says which sessions are forks, of which, where, with a link to the tree
    page.goto(server.url + "/")
    row = page.locator(f"tr[data-session='{fork2}']")
    assert row.locator(".forked").inner_text() == f"fork of {fork[-6:]} at m1 · tree"
    assert row.locator(".forked a").first.get_attribute("href") == f"/s/{fork}#m1"
    assert page.locator(f"tr[data-session='{root}'] .forked").count() == 0
    assert row.locator("td.status").inner_text() == "paused (fork)"  # as its page says
    page.goto(f"{server.url}/s/{fork}")
    page.click("nav.links >> text=Forks")
    page.wait_for_url(f"**/s/{fork}/forks")
    top = page.locator(f"ul.fork-tree > li[data-session='{root}']")
    assert top.count() == 1
    child = top.locator(f":scope > ul > li[data-session='{fork}']")
    assert child.count() == 1
    grandchild = child.locator(f":scope > ul > li[data-session='{fork2}']")
    assert grandchild.count() == 1
    assert "here" in (child.get_attribute("class") or "")
    assert child.locator(":scope > .fork-card .badge-here").inner_text() == "this session"
    at = grandchild.locator(":scope > .fork-card .fork-at").inner_text()
    assert at == 'forked at m1: “Open up, "economists"!”'
    # where each branch has got to: its latest message
    latest = child.locator(":scope > .fork-card .fork-latest").inner_text()
    assert latest == "latest: bob: Not until someone says go; replying to alice."
    # the fork point links to that message of the parent
    child.locator(":scope > .fork-card a.fork-point").click()
    page.wait_for_url(f"**/s/{root}?page=1#m2")
    assert "highlight" in (page.locator("#m2").get_attribute("class") or "")
    # the same family from its root; a session without forks says how to make one
    page.goto(f"{server.url}/s/{fork2}/forks")
    assert page.locator("li.fork-node.here").get_attribute("data-session") == fork2
    assert page.locator("li.fork-node").count() >= 3
    # a fork whose parent was deleted is the first of its own family
    middle = _fork(site, root, "m1")
    last = _fork(site, middle, "m1")
    gone = rolecall("sessions", "delete", middle, "--data-dir", str(site.data), cwd=site.root)
    assert gone.returncode == 0, gone.stderr
    page.goto(f"{server.url}/s/{last}/forks")
    assert page.locator("li.fork-node").count() == 1
    assert page.locator("ul.fork-tree > li.here").get_attribute("data-session") == last
    gone_text = f"{last} was forked from {middle} at m1, a session deleted since."
    assert page.locator("#fork-gone").inner_text() == gone_text
    missing = httpx.get(f"{server.url}/s/20990101-000000-abcdef/forks", timeout=10)
    assert missing.status_code == 404


def test_the_api_lists_sessions_as_sessions_list_json_prints_them(
    gate: tuple[Site, Server],
) -> None:
    site, server = gate
    listed = httpx.get(f"{server.url}/api/sessions?limit=500", timeout=10).json()
    printed = rolecall(
        "sessions", "list", "--json", "--all", "--data-dir", str(site.data), cwd=site.root
    )
    assert printed.returncode == 0, printed.stderr
    cli = json.loads(printed.stdout)
    assert listed["total"] == len(cli) == len(listed["sessions"])
    by_id = {row["session_id"]: row for row in cli}
    assert {row["session_id"]: row for row in listed["sessions"]} == by_id
    assert set(listed["sessions"][0]) == set(cli[0])  # one shape
    gate_row = by_id[site.ids["gate"]]
    assert gate_row["world"] == "gate" and gate_row["messages"] == 10
    # the page's filters still apply
    paused = httpx.get(f"{server.url}/api/sessions?status=paused", timeout=10).json()
    assert {r["status"] for r in paused["sessions"]} == {"paused"}
    assert all(r["pause_reason"] == "fork" for r in paused["sessions"])


def test_the_new_pages_fit_a_phone(browser: Any, gate: tuple[Site, Server]) -> None:
    site, server = gate
    context = browser.new_context(viewport={"width": 390, "height": 844})
    tab = context.new_page()
    try:
        for path, shown in (
            ("/roles", "article.role-card"),
            ("/roles?q=analogy", "article.role-card"),
            ("/?q=economists", "li.hit"),
            (f"/s/{site.ids['fork2']}/forks", "li.fork-node.here"),
            (f"/s/{site.ids['fork']}", "#flag-form"),
        ):
            tab.goto(server.url + path)
            assert tab.locator(shown).count() >= 1, path
            wide = tab.evaluate("document.documentElement.scrollWidth")
            assert wide <= 390, f"{path} is {wide} px wide on a 390 px screen"
    finally:
        context.close()
