"""What a person sees in the browser: the sessions list, a thread, live tokens, talking."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import urllib.request
from typing import Any

from tests.web.conftest import SERVING, Server, Site, stop_server, streaming_so_far


def _get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def test_sessions_list_shows_every_stored_session_and_searches_their_text(
    page: Any, server: Server, site: Site
) -> None:
    page.goto(server.url + "/")
    rows = page.locator("tr.session-row")
    assert rows.count() == 3
    assert page.locator(f"tr[data-session='{site.ids['tutoring']}']").count() == 1
    assert (
        "finished (flow_end)"
        in page.locator(f"tr[data-session='{site.ids['hostile']}'] td.status").inner_text()
    )
    # a word only the hostile session's messages contain
    page.fill("input[name=q]", "click me")
    page.click("form.filters button[type=submit]")
    page.wait_for_url("**/?q=click*")
    assert page.locator("tr.session-row").count() == 1
    assert page.locator(f"tr[data-session='{site.ids['hostile']}']").count() == 1
    page.select_option("select[name=world]", "tutoring")
    page.fill("input[name=q]", "")
    page.click("form.filters button[type=submit]")
    assert page.locator("tr.session-row").count() == 1
    assert page.locator(f"tr[data-session='{site.ids['tutoring']}']").count() == 1


def test_thread_links_each_reply_to_the_message_it_answers(
    page: Any, server: Server, site: Site
) -> None:
    sid = site.ids["tutoring"]
    page.goto(f"{server.url}/s/{sid}")
    assert page.locator("#status").inner_text().startswith("finished")
    messages = page.locator("article.message")
    assert messages.count() >= 4
    # m3 (the tutor's explanation) answers the learner's question m2
    reply = page.locator("#m3 a.reply")
    assert reply.get_attribute("href") == "#m2"
    assert "loop" not in page.locator("#m2 .where").inner_text()
    reply.click()
    page.wait_for_function("location.hash === '#m2'")
    assert "highlight" in (page.locator("#m2").get_attribute("class") or "")
    assert page.locator("#m2").is_visible()
    # the execution log and the exports are linked
    assert page.locator("table.log tbody tr").count() >= 4
    assert page.locator("a[href$='/export.md']").count() == 1
    assert page.locator("a[href$='/flow']").count() == 1


def test_message_markup_is_rendered_inert(page: Any, server: Server, site: Site) -> None:
    sid = site.ids["hostile"]
    page.goto(f"{server.url}/s/{sid}")
    body = page.locator("#m1 .body")
    assert "<script>window.pwned = 1</script>" in body.inner_text()
    assert body.locator("script").count() == 0
    assert page.evaluate("window.pwned === undefined")
    # the javascript: link is text, the https link a link, the Markdown rendered
    assert body.locator("a").count() == 0
    assert "[click me](javascript:window.pwned=2)" in body.inner_text()
    assert body.locator("strong").inner_text() == "bold"
    assert page.locator("#m2 .body a").get_attribute("href") == "https://example.org/docs"


def test_live_tokens_appear_while_a_started_session_runs(page: Any, server: Server) -> None:
    page.goto(server.url + "/start")
    page.select_option("select[name=world]", "slow")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    # a message's words arrive one by one, before it is complete
    mid, partial = streaming_so_far(page)
    assert page.locator("#thinking").is_visible()
    # once complete, each message is swapped for its rendered form, and the run finishes
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=30_000
    )
    page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")
    final = page.locator(f"#{mid} .body").inner_text().strip()
    assert final.startswith(partial) and len(final) > len(partial)
    assert page.locator("#m1 .body").inner_text().strip().endswith("sixteen")
    assert page.locator("#m2 a.reply").get_attribute("href") == "#m1"
    stored = _get_json(f"{server.url}/api/sessions/{sid}")
    assert stored["state"]["state"] == "finished"
    assert len(stored["messages"]) == 3


def test_pause_and_resume_buttons_and_the_page_follows_again(page: Any, server: Server) -> None:
    page.goto(server.url + "/start")
    page.select_option("select[name=world]", "slow")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    page.locator("article.streaming").first.wait_for()
    page.click(".controls button[data-action=pause]")  # after the turn under way
    page.wait_for_function("document.getElementById('status').textContent === 'paused (manual)'")
    stored = _get_json(f"{server.url}/api/sessions/{sid}")
    assert stored["state"]["state"] == "paused"  # stored as paused, not left running
    said = len(stored["messages"])
    assert said < 3
    page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")
    # the stream ended with the pause; resuming follows the session again, live
    page.click(".controls button[data-action=resume]")
    page.wait_for_function("document.getElementById('status').textContent === 'running'")
    assert page.locator("#control-error").inner_text() == ""  # answered before it follows
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=30_000
    )
    page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")
    assert page.locator("article.message").count() == 3
    assert page.locator("#talk").count() == 0  # finished: nothing more to say or press


def test_talking_to_a_chat_world_with_mention_completion(page: Any, server: Server) -> None:
    page.goto(server.url + "/start")
    page.select_option("select[name=world]", "talk")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    box = page.locator("#say-text")
    box.click()
    box.type("@b")
    option = page.locator("#mentions li")
    option.first.wait_for()
    assert option.all_inner_texts() == ["@bob"]
    box.press("Tab")
    assert box.input_value() == "@bob "
    box.type("what do you think?")
    box.press("Enter")
    page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
    assert "bob replies to human" in page.locator("#m2 .body").inner_text()
    assert page.locator("#m1 .who").inner_text() == "human"
    assert page.locator("#m2 a.reply").get_attribute("href") == "#m1"
    # stop ends the session
    page.click(".controls button[data-action=stop]")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('finished')")


def test_unknown_and_unsafe_session_ids_are_not_found(page: Any, server: Server) -> None:
    answer = page.goto(server.url + "/s/20990101-000000-abcdef")
    assert answer is not None and answer.status == 404
    assert "no session" in page.locator("p.error").inner_text()
    answer = page.goto(f"{server.url}/s/.hidden")
    assert answer is not None and answer.status == 404
    # what a browser would normalise away, sent as it is
    host, port = server.url.removeprefix("http://").split(":")
    for bad in ("..%2f..%2fetc%2fpasswd", "%2e%2e", "..%5c..%5cwin.ini", "a%00b"):
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", f"/s/{bad}")
        reply = conn.getresponse()
        assert reply.status == 404, bad
        assert "root:" not in reply.read().decode()
        conn.close()


def test_chat_web_opens_a_session_to_talk_to(page: Any, site: Site) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rolecall.cli.main",
            "chat",
            "talk",
            "--web",
            "--port",
            "0",
            "--data-dir",
            str(site.data),
        ],
        cwd=site.root,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    server = None
    try:
        assert process.stderr is not None
        line = process.stderr.readline()
        found = SERVING.search(line)
        assert found, line
        url = found.group(1)
        assert "/s/" in url
        server = Server(url=url, process=process, stderr=[line])
        page.goto(url)
        page.fill("#say-text", "@alice hello there")
        page.click("#say button[type=submit]")
        page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
        assert "alice replies to human" in page.locator("#m2 .body").inner_text()
    finally:
        if server is not None:
            stop_server(server)
        else:
            process.kill()
            process.wait()
            if process.stderr is not None:
                process.stderr.close()
