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
