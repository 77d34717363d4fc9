"""Reply hygiene on the live page (real-models.md): text streamed and then cut from the
reply is struck through while it streams, and the finished message says how much was
shown and cut; a page joining mid-stream, and the stored page, show only the message. A
real `rolecall web`, a loopback OpenAI-compatible server, Debian's chromium."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.llm.openai_server import OpenAITestServer, Reply
from tests.web.conftest import Server
from tests.web.test_live_drafts import loopback, served

SAID = "The motion is sound and I stand by it."
LOOP = (SAID + " ") * 12


__all__ = ["loopback", "served"]  # the fixtures: test_live_drafts' one-role world on the wire


def test_a_cut_shown_live_is_marked_and_the_stored_message_is_only_the_message(
    page: Any, served: Server, loopback: OpenAITestServer, tmp_path: Path
) -> None:
    loopback.queue(Reply(LOOP, delay=0.15))
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(served.url + "/start")
    page.select_option("select[name=world]", "wire")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    page.fill("#say-text", "again?")
    page.press("#say-text", "Enter")
    # a second page joins while the reply streams
    page.locator("#m2.streaming .body").wait_for(timeout=30_000)
    joined = page.context.new_page()
    joined.goto(page.url)
    page.locator("#m2:not(.streaming) .cut-note").wait_for(timeout=30_000)
    note = page.locator("#m2 .cut-note").inner_text()
    assert "characters shown while streaming were cut (repeated text)" in note
    assert page.locator("#m2 .body").inner_text().strip() == f"{SAID} {SAID}"
    page.screenshot(path=str(tmp_path / "cut-1280.png"))
    page.set_viewport_size({"width": 390, "height": 800})
    page.screenshot(path=str(tmp_path / "cut-390.png"))
    joined.locator("#m2:not(.streaming)").wait_for(timeout=30_000)
    assert joined.locator("#m2 .body").inner_text().strip() == f"{SAID} {SAID}"
    # the stored page: only the message
    page.reload()
    page.locator("#m2").wait_for(timeout=10_000)
    assert page.locator("#m2 .body").inner_text().strip() == f"{SAID} {SAID}"
    assert page.locator(".cut-note, del.cut").count() == 0
