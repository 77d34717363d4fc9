"""What a live session's page says as it runs (issue 46): its execution log grows with
each step (a page opened at the start, and one joining mid-stream, end with every
step), Retry is offered only where it works (not on the first message, not while a
call waits), and a chat with every reply in says it waits for you, on its page and in
the list. A real `rolecall web` with paced scripted models, Debian's chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.tools.helpers import write_world
from tests.web.conftest import Server, Site, start_server, stop_server
from tests.web.test_live_page import CHATTY, PANEL, _api, _events, _finished, _start, _wait

COMPUTE = "rolecall.examples.desk_tools:compute"
ASKING = {
    "name": "asking",
    "title": "A clerk who asks first",
    "topic": "sums",
    "model": "scripted",
    "tools": {"python": {"compute": COMPUTE}},
    "roles": [
        {"id": "host", "script": ["host opens the desk"]},
        {
            "id": "clerk",
            "tools": ["compute"],
            "approve": "ask",
            "script": [
                "clerk answers {target} plainly",
                {"call": "compute", "arguments": {"expression": "6*7"}},
                "clerk computed {result}",
            ],
        },
    ],
    "flow": {
        "steps": [
            {"id": "open", "speaker": "host", "reply_to": "none"},
            {"id": "plain", "speaker": "clerk"},
            {"id": "sum", "speaker": "clerk"},
        ]
    },
}


@pytest.fixture(scope="module")
def record_site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("record")
    for name, text in (("panelish", PANEL), ("chatty", CHATTY)):
        (root / "worlds" / name).mkdir(parents=True)
        (root / "worlds" / name / "world.yaml").write_text(text)
    write_world(root / "worlds" / "asking", ASKING)
    return Site(root=root, data=root / "data", ids={})


@pytest.fixture(scope="module")
def server(record_site: Site) -> Iterator[Server]:
    running = start_server(record_site, env={"ROLECALL_STREAM_DELAY": "0.05"})
    yield running
    stop_server(running)


def _log_summary(page: Any) -> str:
    return str(page.locator("#log > summary").inner_text())


def _shoot(page: Any, tmp_path: Path, name: str) -> None:
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(tmp_path / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1200, "height": 900})


def test_the_execution_log_grows_on_a_page_opened_at_the_start_and_one_joining_later(
    page: Any, browser: Any, server: Server, tmp_path: Path
) -> None:
    sid = _start(server, "panelish")
    page.goto(f"{server.url}/s/{sid}")  # before any step is recorded
    assert not page.locator("#log").is_visible()
    # a second page joins mid-stream: the first step is done, the second streaming
    _wait(lambda: any(e["type"] == "step" for e in _events(server, sid)))
    _wait(lambda: sum(e["type"] == "start" for e in _events(server, sid)) >= 2)
    later = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    joined = later.new_page()
    try:
        joined.goto(f"{server.url}/s/{sid}")
        for tab in (page, joined):
            _finished(tab)
            tab.wait_for_function("document.querySelectorAll('#log-rows tr').length === 3")
            assert _log_summary(tab) == "Execution log (3 steps)"
            rows = tab.eval_on_selector_all(
                "#log-rows tr", "rs => rs.map(r => r.firstElementChild.textContent)"
            )
            assert rows == ["1", "2", "3"]  # once each, in order (none replayed twice)
        page.click("#log > summary")
        assert page.locator("#log-rows tr").nth(1).inner_text().split("\t")[:3] == [
            "2",
            "step answer",
            "Expert Eve",
        ]
        _shoot(page, tmp_path, "log")
    finally:
        later.close()


def test_retry_is_offered_only_where_it_works(page: Any, server: Server, tmp_path: Path) -> None:
    sid = _start(server, "asking")
    _wait(lambda: _api(server, f"/api/sessions/{sid}/approvals").json()["waiting"])
    page.goto(f"{server.url}/s/{sid}")
    page.locator("#call-c1 button.approve").wait_for()
    # the first message cannot be asked again (nothing before it to fork at); the latest
    # answer cannot while a call of the next turn waits (the server answers 409)
    assert page.locator("#m1 form.retry").count() == 0
    assert page.locator("#m2 form.retry").count() == 1
    assert not page.locator("#m2 form.retry").is_visible()
    refused = httpx.post(
        f"{server.url}/s/{sid}/fork", data={"at": "m2", "action": "retry"}, timeout=10
    )
    assert refused.status_code == 409
    _shoot(page, tmp_path, "waiting")
    page.locator("#call-c1 button.approve").click()
    _finished(page)
    page.locator("#m3 form.retry").wait_for(state="visible")
    assert page.locator("#m2 form.retry").count() == 0  # Retry is for the latest answer


def test_an_idle_chat_says_it_waits_for_you(page: Any, server: Server, tmp_path: Path) -> None:
    sid = _start(server, "chatty")
    page.goto(f"{server.url}/s/{sid}")
    page.wait_for_function("document.getElementById('status').textContent === 'waiting for you'")
    page.fill("#say-text", "@ann hi")
    page.press("#say-text", "Enter")
    page.locator("#m2:not(.streaming)").wait_for(timeout=20_000)
    page.wait_for_function("document.getElementById('status').textContent === 'waiting for you'")
    assert page.locator("#detail").inner_text() == "waiting for you"
    page.locator("#m2 form.retry").wait_for(state="visible")
    listed = httpx.get(server.url + "/", timeout=10).text
    row = listed[listed.index(f'data-session="{sid}"') :]
    status = re.search(r'class="status">([^<]*)</td>', row)
    assert status is not None and status[1] == "waiting for you"
    # a reload says the same
    page.reload()
    assert page.locator("#status").inner_text() == "waiting for you"
    _shoot(page, tmp_path, "idle-chat")
