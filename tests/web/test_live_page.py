"""The live page as a person sees it while sessions run: the order of messages, a page
opened mid-message, pausing a chat, what the status says, and sessions let go when they
finish. A real `rolecall web` with paced scripted models, Debian's chromium."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import Server, Site, start_server, stop_server

WORDS = " ".join(f"w{i}" for i in range(1, 25))

PANEL = f"""\
name: panelish
title: A named panel
topic: pacing
model: scripted
roles:
  - id: moderator
    name: Moderator Mia
    script: ["moderator opens {WORDS}"]
  - id: expert
    name: Expert Eve
    script: ["expert answers {{target}} {WORDS}"]
flow:
  steps:
    - {{id: open, speaker: moderator, reply_to: none}}
    - {{id: answer, speaker: expert}}
    - {{id: close, speaker: moderator}}
"""

CHATTY = f"""\
name: chatty
title: Two who answer everything
topic: anything
model: scripted
roles:
  - id: ann
    name: Ann Archer
    script: ["ann replies to {{target}} {WORDS}"]
  - id: ben
    name: Ben Baker
    script: ["ben replies to {{target}} {WORDS}"]
"""


@pytest.fixture(scope="module")
def lively(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("lively")
    for name, text in (("panelish", PANEL), ("chatty", CHATTY)):
        (root / "worlds" / name).mkdir(parents=True)
        (root / "worlds" / name / "world.yaml").write_text(text)
    return Site(root=root, data=root / "data", ids={})


@pytest.fixture(scope="module")
def slow_server(lively: Site) -> Iterator[Server]:
    # 24 words at 0.08 s: each message streams for about two seconds
    running = start_server(lively, env={"ROLECALL_STREAM_DELAY": "0.08"})
    yield running
    stop_server(running)


def _api(server: Server, path: str, body: dict[str, Any] | None = None) -> httpx.Response:
    url = server.url + path
    if body is None:
        return httpx.get(url, timeout=10)
    return httpx.post(url, json=body, timeout=10)


def _start(server: Server, world: str) -> str:
    answer = _api(server, "/api/sessions", {"world": world})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["session_id"])


def _events(server: Server, sid: str) -> list[dict[str, Any]]:
    answer = _api(server, f"/api/sessions/{sid}/events?after=0")
    assert answer.status_code == 200, answer.text
    events: list[dict[str, Any]] = answer.json()
    return events


def _wait(what: Any, timeout: float = 30) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError("timed out waiting")


def _thread_ids(page: Any) -> list[str]:
    ids: list[str] = page.eval_on_selector_all(
        "#thread article.message", "els => els.map(e => e.id)"
    )
    return ids


def _in_order(ids: list[str]) -> bool:
    return ids == sorted(ids, key=lambda mid: int(mid.removeprefix("m")))


def _finished(page: Any, timeout: float = 40_000) -> None:
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=timeout
    )
    page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")


def test_a_page_opened_mid_message_shows_what_was_streamed_and_goes_on(
    page: Any, slow_server: Server
) -> None:
    sid = _start(slow_server, "panelish")
    # the moderator's opening is streaming: a few words are out, the message is not done
    _wait(lambda: sum(e["type"] == "chunk" for e in _events(slow_server, sid)) >= 4)
    page.goto(f"{slow_server.url}/s/{sid}")
    page.wait_for_function(
        "() => { const el = document.querySelector('#m1.streaming .live-text');"
        " return el && el.textContent.trim().split(/\\s+/).length >= 4; }",
        timeout=5_000,
    )
    # from the start its sender is named as the world names it, with its @id beside
    assert page.locator("#m1 .who").inner_text() == "Moderator Mia"
    assert page.locator("#m1 .rid").inner_text() == "@moderator"
    assert page.locator("#m1").get_attribute("aria-busy") == "true"
    assert page.locator("#thread").get_attribute("aria-live") == "polite"
    shown = page.locator("#m1 .live-text").inner_text().split()
    page.wait_for_function(
        f"document.querySelector('#m1 .live-text, #m1 .body').textContent.trim()"
        f".split(/\\s+/).length > {len(shown)}"
    )
    _finished(page)
    assert _thread_ids(page) == ["m1", "m2", "m3"]
    assert page.locator("#m1 .body").inner_text().strip().endswith("w24")
    assert page.locator("#m2 .who").inner_text() == "Expert Eve"


def test_the_step_shown_is_the_one_speaking_and_the_end_is_shown_whole(
    page: Any, slow_server: Server
) -> None:
    page.goto(slow_server.url + "/start")
    page.select_option("select[name=world]", "panelish")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    page.locator("#m2.streaming").wait_for(timeout=20_000)
    assert page.locator("#step").inner_text() == "step answer"
    assert page.locator("#m2 .who").inner_text() == "Expert Eve"
    page.locator("#m3.streaming").wait_for(timeout=20_000)
    assert page.locator("#step").inner_text() == "step close"
    _finished(page)
    assert _thread_ids(page) == ["m1", "m2", "m3"]
    # how it stands after the run, and nothing left to type into
    assert page.locator("#detail").inner_text().startswith("finished: flow_end")
    assert page.locator("#talk").count() == 0
    # released by the server once finished: read from the store from now on
    stored = _wait(
        lambda: (r := _api(slow_server, f"/api/sessions/{sid}").json())["live"] is False and r
    )
    assert stored["state"]["state"] == "finished"
    page.reload()
    assert page.locator("#status").inner_text() == "finished (flow_end)"
    assert page.locator("#talk").count() == 0
    row = f"tr[data-session='{sid}'] td.status"
    page.goto(slow_server.url + "/")
    assert page.locator(row).inner_text() == "finished (flow_end)"


def test_messages_said_on_the_page_come_before_their_replies(
    page: Any, slow_server: Server
) -> None:
    page.goto(slow_server.url + "/start")
    page.select_option("select[name=world]", "chatty")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    for n, said in enumerate(("first question", "second question"), start=0):
        page.fill("#say-text", said)
        page.press("#say-text", "Enter")
        page.locator(f"#m{3 * n + 3}:not(.streaming)").wait_for(timeout=30_000)
        ids = _thread_ids(page)
        assert _in_order(ids), ids
    assert page.locator("#m1 .body").inner_text().strip() == "first question"
    assert page.locator("#m4 .body").inner_text().strip() == "second question"
    assert "ann replies to human" in page.locator("#m2 .body").inner_text()
    assert "ben replies to human" in page.locator("#m6 .body").inner_text()
    assert _thread_ids(page) == [f"m{i}" for i in range(1, 7)]


def test_pause_during_a_chat_reply_holds_and_resume_answers_the_rest(
    page: Any, slow_server: Server
) -> None:
    page.goto(slow_server.url + "/start")
    page.select_option("select[name=world]", "chatty")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    page.fill("#say-text", "both of you, please")
    page.press("#say-text", "Enter")
    page.locator("#m2.streaming").wait_for(timeout=20_000)
    page.click(".controls button[data-action=pause]")  # ann is answering: ben waits
    page.wait_for_function(
        "document.getElementById('status').textContent === 'paused (manual)'", timeout=20_000
    )
    page.wait_for_function("document.querySelectorAll('article.streaming').length === 0")
    assert page.locator("#detail").inner_text() == "paused (manual)"
    time.sleep(3)  # ben's reply (two seconds of words) would be under way by now
    stored = _api(slow_server, f"/api/sessions/{sid}").json()
    assert stored["state"]["state"] == "paused"
    assert [m["sender"] for m in stored["messages"]] == ["human", "ann"]
    assert page.locator("article.message").count() == 2
    # the list says so too
    listed = httpx.get(slow_server.url + "/", timeout=10).text
    assert "paused (manual)" in listed
    page.click(".controls button[data-action=resume]")
    page.locator("#m3:not(.streaming)").wait_for(timeout=20_000)
    assert page.locator("#control-error").inner_text() == ""
    assert "ben replies to human" in page.locator("#m3 .body").inner_text()
    assert page.locator("#m3 .who").inner_text() == "Ben Baker"


def test_messages_sent_at_once_to_a_stored_paused_session_are_all_taken(
    lively: Site, tmp_path: Path
) -> None:
    first = start_server(lively)
    try:
        sid = _start(first, "chatty")
        assert _api(first, f"/api/sessions/{sid}/control", {"action": "pause"}).status_code == 202
    finally:
        stop_server(first)
    second = start_server(lively)
    try:
        assert _api(second, f"/api/sessions/{sid}").json()["live"] is False
        answers: list[int] = []
        barrier = threading.Barrier(5)

        def send(n: int) -> None:
            barrier.wait()
            answer = _api(second, f"/api/sessions/{sid}/say", {"text": f"@ann message {n}"})
            answers.append(answer.status_code)

        senders = [threading.Thread(target=send, args=(n,)) for n in range(5)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(30)
        assert sorted(answers) == [202] * 5, answers

        def answered() -> dict[str, Any] | None:
            doc: dict[str, Any] = _api(second, f"/api/sessions/{sid}").json()
            return doc if len(doc["messages"]) >= 10 else None

        doc = _wait(answered)
        said = sorted(m["content"] for m in doc["messages"] if m["sender"] == "human")
        assert said == [f"@ann message {n}" for n in range(5)]
        assert sum(m["sender"] == "ann" for m in doc["messages"]) == 5
    finally:
        stop_server(second)


def test_the_list_says_what_each_held_session_is_doing(slow_server: Server) -> None:
    idle = _start(slow_server, "chatty")  # a chat nobody has talked to yet
    listed = httpx.get(slow_server.url + "/", timeout=10).text
    row = listed[listed.index(f'data-session="{idle}"') :]
    status = row[
        row.index('class="status">') + len('class="status">') : row.index(
            "</td>", row.index('class="status">')
        )
    ]
    assert status == "waiting for you"  # a chat: nothing runs until you say something
    assert json.loads(_api(slow_server, f"/api/sessions/{idle}").text)["live"] is True


def test_retry_in_a_chat_asks_the_same_agent_again(page: Any, slow_server: Server) -> None:
    sid = _start(slow_server, "chatty")
    assert _api(slow_server, f"/api/sessions/{sid}/say", {"text": "@ann hi"}).status_code == 202
    _wait(lambda: len(_api(slow_server, f"/api/sessions/{sid}").json()["messages"]) == 2)
    _wait(lambda: _api(slow_server, f"/api/sessions/{sid}").json()["state"]["pending"] == [])
    page.goto(f"{slow_server.url}/s/{sid}")
    page.locator("#m2 form.retry button").click()
    page.wait_for_url(lambda url: sid not in url and "/s/" in url)
    branch = page.url.rsplit("/", 1)[1]
    page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
    assert page.locator("#m2 .who").inner_text() == "Ann Archer"
    assert "ann replies to human" in page.locator("#m2 .body").inner_text()
    doc = _api(slow_server, f"/api/sessions/{branch}").json()
    assert [m["sender"] for m in doc["messages"]] == ["human", "ann"]
    assert doc["state"]["pending"] == []
    assert len(_api(slow_server, f"/api/sessions/{sid}").json()["messages"]) == 2
