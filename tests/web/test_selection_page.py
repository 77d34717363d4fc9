"""Who chose each speaker, in the web view's thread (selection.md): the shipped offline
`moderated` world, whose moderator model picks the panellist answering each time. Each
chosen speaker's line says why, on a stored page and on a live one joined mid-stream.
A real `rolecall web`, Debian's chromium, at 1280 and 390 px."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server
from tests.web.test_live_page import _events, _finished, _start, _wait

SELECTED = ["m2", "m3", "m4", "m5", "m6"]  # the five `answer` turns; m1 and m7 are the host's


@pytest.fixture(scope="module")
def moderated(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("moderated")
    shutil.copytree(ROOT / "worlds" / "moderated", root / "worlds" / "moderated")
    data = root / "data"
    done = rolecall("run", "moderated", "--data-dir", str(data), "--json", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    return Site(root=root, data=data, ids={"moderated": _stored_id(done)})


@pytest.fixture(scope="module")
def moderated_server(moderated: Site) -> Iterator[Server]:
    running = start_server(moderated, env={"ROLECALL_STREAM_DELAY": "0.03"})
    yield running
    stop_server(running)


def _check_notes(page: Any) -> None:
    for mid in SELECTED:
        note = page.locator(f"#{mid} header .chosen")
        assert note.inner_text().startswith("chosen by the selector ("), mid
        speaker = page.locator(f"#{mid}").get_attribute("data-sender")
        assert speaker in note.inner_text(), (mid, speaker)  # the answer names it
    for mid in ("m1", "m7"):  # the host's steps name their speaker: nobody chose it
        assert page.locator(f"#{mid} header .chosen").count() == 0


def test_a_stored_session_says_on_each_line_who_chose_the_speaker(
    page: Any, moderated: Site, moderated_server: Server, tmp_path: Path
) -> None:
    page.goto(f"{moderated_server.url}/s/{moderated.ids['moderated']}")
    _check_notes(page)
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(tmp_path / f"moderated-{width}.png"), full_page=True)
        # nothing wider than the screen
        assert page.evaluate("document.documentElement.scrollWidth") <= width


@pytest.mark.timeout(120)
def test_a_live_page_joined_mid_stream_shows_who_chose_each_speaker(
    page: Any, moderated_server: Server
) -> None:
    sid = _start(moderated_server, "moderated")
    _wait(lambda: sum(e["type"] == "chunk" for e in _events(moderated_server, sid)) >= 3)
    page.goto(f"{moderated_server.url}/s/{sid}")
    page.locator("article.streaming").first.wait_for(timeout=10_000)  # joined mid-run
    _finished(page, timeout=90_000)
    _check_notes(page)
    chosen = [e for e in _events(moderated_server, sid) if e["type"] == "selection"]
    assert [e["by"] for e in chosen] == ["model"] * 5


GRADED = """\
name: graded
model: offline
topic: which fruit tree to plant in a small garden
roles:
  - id: grader
    output:
      schema:
        type: object
        properties:
          verdict: {type: string, enum: [apple, pear, plum]}
          score: {type: integer, minimum: 1, maximum: 10}
        required: [verdict, score]
  - id: sloppy
    model: scripted
    output: {schema: {type: object, required: [verdict]}}
    script: ["I think plum, really."]
flow:
  steps:
    - {id: grade, speaker: grader}
    - {id: again, speaker: sloppy}
"""


def test_a_structured_reply_is_shown_as_indented_data_and_an_invalid_one_with_its_error(
    page: Any, tmp_path: Path
) -> None:
    root = tmp_path / "site"
    (root / "worlds" / "graded").mkdir(parents=True)
    (root / "worlds" / "graded" / "world.yaml").write_text(GRADED, encoding="utf-8")
    data = root / "data"
    done = rolecall("run", "graded", "--data-dir", str(data), "--json", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    running = start_server(Site(root=root, data=data, ids={}))
    try:
        page.goto(f"{running.url}/s/{_stored_id(done)}")
        shown = page.locator("#m1 pre.data").inner_text()
        assert shown == '{\n  "verdict": "plum",\n  "score": 7\n}'
        assert page.locator("#m1 .data-error").count() == 0
        assert page.locator("#m2 pre.data").count() == 0
        assert page.locator("#m2 .body").inner_text() == "I think plum, really."
        assert (
            page.locator("#m2 .data-error")
            .inner_text()
            .startswith("not valid against its output schema: the reply is not JSON")
        )
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 700})
            page.screenshot(path=str(tmp_path / f"graded-{width}.png"), full_page=True)
            assert page.evaluate("document.documentElement.scrollWidth") <= width
    finally:
        stop_server(running)
