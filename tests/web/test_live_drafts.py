"""A generation cut short on the live page: its element becomes the draft it is kept as
(``d1``) and gives up its message id, which the next message takes, so ``#mN`` and every
``[mN]`` link name one message. A real `rolecall web`, a loopback OpenAI-compatible
server that drops the connection mid-reply, Debian's chromium."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.llm.openai_server import Break, OpenAITestServer, Reply
from tests.web.conftest import Server, Site, start_server, stop_server


@pytest.fixture
def loopback() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


@pytest.fixture
def served(tmp_path: Path, loopback: OpenAITestServer) -> Iterator[Server]:
    folder = tmp_path / "worlds" / "wire"
    folder.mkdir(parents=True)
    (folder / "world.yaml").write_text(
        f"""\
name: wire
title: One over the wire
topic: anything
model: openai/gpt-4o-mini
settings:
  client: http
  api_base: {loopback.base_url}
  api_key_env: ROLECALL_DRAFT_TEST_KEY
  retries: 0
roles:
  - id: ann
    name: Ann Archer
""",
        encoding="utf-8",
    )
    site = Site(root=tmp_path, data=tmp_path / "data", ids={})
    running = start_server(site, env={"ROLECALL_DRAFT_TEST_KEY": "sk-local-test"})
    yield running
    stop_server(running)


def test_a_cut_reply_becomes_its_draft_and_the_next_reply_takes_the_id(
    page: Any, served: Server, loopback: OpenAITestServer
) -> None:
    loopback.queue(Break("half of an answer"), Reply("the whole answer at last"))
    page.goto(served.url + "/start")
    page.select_option("select[name=world]", "wire")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    page.fill("#say-text", "tell me")
    page.press("#say-text", "Enter")
    page.wait_for_function(
        "document.getElementById('status').textContent === 'paused (error)'", timeout=30_000
    )
    draft = page.locator("article.message.draft")
    draft.wait_for(timeout=10_000)
    assert draft.locator(".mid").inner_text() == "d1"
    assert "half of an answer" in draft.locator(".body").inner_text()
    assert page.locator("#m2").count() == 0  # m2 is not the draft's
    assert page.locator("article.streaming").count() == 0
    page.click(".controls button[data-action=resume]")
    page.locator("#m2:not(.streaming)").wait_for(timeout=30_000)
    assert page.locator("#m2 .body").inner_text().strip() == "the whole answer at last"
    assert "the whole answer" not in draft.inner_text()  # nothing streamed into the draft
    assert page.locator("article.message").count() == 3  # m1, the draft, m2
