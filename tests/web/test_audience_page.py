"""Private messages on the web view (docs/audiences.md): the message box chooses who hears
a message, the thread marks private messages, and "as seen by" shows the session as one
role saw it, also on a page that joins mid-stream. A real `rolecall web`, paced scripted
models, Debian's chromium at 1280 and 390 px (screenshots under the test's tmp dir)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.web.conftest import Server, Site, start_server, stop_server
from tests.web.test_live_page import _events, _start, _wait

MARKER = "zanzibar"  # only the whisper holds it
WORDS = " ".join(f"w{i}" for i in range(1, 21))
TRIO = f"""\
name: trio
title: Three in a room
topic: anything
model: scripted
roles:
  - id: ann
    name: Ann Archer
    script: ["ann replies to {{target}} {WORDS}"]
  - id: bob
    name: Bob Baker
    script: ["bob replies to {{target}} {WORDS}"]
  - id: cid
    name: Cid Carter
    script: ["cid replies to {{target}} {WORDS}"]
"""
SHOTS = Path(os.environ.get("ROLECALL_SHOTS", "")) if os.environ.get("ROLECALL_SHOTS") else None


@pytest.fixture(scope="module")
def trio_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("trio")
    (root / "worlds" / "trio").mkdir(parents=True)
    (root / "worlds" / "trio" / "world.yaml").write_text(TRIO)
    running = start_server(
        Site(root=root, data=root / "data", ids={}), env={"ROLECALL_STREAM_DELAY": "0.06"}
    )
    yield running
    stop_server(running)


def _shot(page: Any, tmp_path: Path, name: str) -> None:
    for where in (tmp_path, SHOTS):
        if where is not None:
            where.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(where / f"{name}.png"), full_page=True)


def _done(page: Any, ids: list[str]) -> None:
    for mid in ids:
        page.locator(f"#{mid}:not(.streaming)").wait_for(timeout=30_000)


def test_the_message_box_sends_a_whisper_and_the_thread_marks_it(
    page: Any, trio_server: Server, tmp_path: Path
) -> None:
    sid = _start(trio_server, "trio")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{trio_server.url}/s/{sid}")
    page.check("#hear input[value=ann]")
    page.check("#hear input[value=bob]")
    page.fill("#say-text", f"the code word is {MARKER}")
    page.press("#say-text", "Enter")
    _done(page, ["m1", "m2", "m3"])
    assert page.locator("#m1 .private").inner_text() == "to ann, bob only"
    assert page.locator("#m2 .private").inner_text() == "to ann, bob only"
    assert page.locator("#m3 .private").inner_text() == "to ann, bob only"
    assert page.locator("#m4").count() == 0  # cid did not answer what it never saw
    assert not page.locator("#hear input:checked").count()  # ticks cleared after sending
    _shot(page, tmp_path, "whisper-1280")
    page.set_viewport_size({"width": 390, "height": 844})
    _shot(page, tmp_path, "whisper-390")
    # what the server stored: the audience on the message event
    said = [e for e in _events(trio_server, sid) if e["type"] == "message"]
    assert [e.get("audience") for e in said] == [["ann", "bob"]] * 3
    # as cid saw it: nothing of the whisper
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{trio_server.url}/s/{sid}?as=cid")
    assert MARKER not in page.locator("#thread").inner_text()
    assert page.locator("#thread article.message").count() == 0
    assert "as Cid Carter saw it" in page.locator("#seen-note").inner_text()
    page.goto(f"{trio_server.url}/s/{sid}?as=ann")
    assert MARKER in page.locator("#thread").inner_text()


def test_a_page_joining_mid_stream_as_an_outsider_never_shows_the_whisper(
    page: Any, trio_server: Server, tmp_path: Path
) -> None:
    sid = _start(trio_server, "trio")
    said = httpx.post(
        f"{trio_server.url}/api/sessions/{sid}/say",
        json={"text": f"psst {MARKER}", "audience": ["ann"]},
        timeout=10,
    )
    assert said.status_code == 202, said.text
    # ann's private reply is streaming: open the page as cid, and as everyone
    _wait(lambda: sum(e["type"] == "chunk" for e in _events(trio_server, sid)) >= 3)
    page.goto(f"{trio_server.url}/s/{sid}?as=cid")
    other = page.context.new_page()
    other.goto(f"{trio_server.url}/s/{sid}")
    other.locator("#m2 .private").wait_for(timeout=10_000)  # the streaming reply, marked
    assert other.locator("#m2 .private").inner_text() == "to ann only"
    other.locator("#m2:not(.streaming)").wait_for(timeout=30_000)
    # then a public message: cid's view shows it and its replies, never the whisper
    public = httpx.post(
        f"{trio_server.url}/api/sessions/{sid}/say", json={"text": "@cid hello"}, timeout=10
    )
    assert public.status_code == 202, public.text
    page.locator("#m4:not(.streaming)").wait_for(timeout=30_000)
    ids = page.eval_on_selector_all("#thread article.message", "els => els.map(e => e.id)")
    assert ids == ["m3", "m4"]
    assert MARKER not in page.locator("#thread").inner_text()
    _shot(page, tmp_path, "as-cid-1280")
    other.close()


def test_a_whisper_to_an_unknown_role_is_refused_by_name(trio_server: Server) -> None:
    sid = _start(trio_server, "trio")
    said = httpx.post(
        f"{trio_server.url}/api/sessions/{sid}/say",
        json={"text": "psst", "audience": ["ann", "eve"]},
        timeout=10,
    )
    assert said.status_code == 409
    assert "no role 'eve'" in said.text and "roles: ann, bob, cid" in said.text
    assert not [e for e in _events(trio_server, sid) if e["type"] == "message"]
    bad = httpx.get(f"{trio_server.url}/s/{sid}?as=eve", timeout=10)
    assert bad.status_code == 400 and "no such role" in bad.text
