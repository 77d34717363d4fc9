"""Citations in the web view's thread (knowledge.md): each `[kN]` a message cites links
to its source (file and lines) listed under the message, on a stored page and on a live
one, joined mid-stream. The shipped offline `garden` world, a real `rolecall web`,
Debian's chromium."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server
from tests.web.test_live_page import _events, _finished, _start, _wait

GARDEN = ROOT / "worlds" / "garden"
# each expert's answer: the sentence it quotes, and the passage it cites as [k1]
CITED = {
    "m2": (
        "When the oldest, lowest leaves of a plant turn yellow first",
        "docs/plants.md:1-9",
    ),
    "m4": ("spread ground limestone or dolomitic lime", "docs/soil.md:10-15"),
    "m6": ("Aphids are small sap-sucking insects that cluster on shoot tips", "docs/pests.md:1-9"),
}


@pytest.fixture(scope="module")
def garden(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("garden")
    shutil.copytree(GARDEN, root / "worlds" / "garden")
    data = root / "data"
    done = rolecall("run", "garden", "--data-dir", str(data), "--json", cwd=root, timeout=120)
    assert done.returncode == 0, done.stderr
    return Site(root=root, data=data, ids={"garden": _stored_id(done)})


@pytest.fixture(scope="module")
def garden_server(garden: Site) -> Iterator[Server]:
    # words paced so the run lasts a few seconds: long enough for a page to join it mid-stream
    running = start_server(garden, env={"ROLECALL_STREAM_DELAY": "0.03"})
    yield running
    stop_server(running)


def _lines(source: str) -> str:
    """The text of ``docs/x.md:A-B`` in the garden world, on one line."""
    path, _, span = source.rpartition(":")
    first, _, last = span.partition("-")
    lines = (GARDEN / path).read_text(encoding="utf-8").splitlines()
    return " ".join(" ".join(lines[int(first) - 1 : int(last or first)]).split())


def _check_citations(page: Any) -> None:
    for mid, (sentence, source) in CITED.items():
        body = page.locator(f"#{mid} .body")
        assert sentence in body.inner_text()
        # the [k1] in the text is a link to its source, listed under the message
        link = page.locator(f"#{mid} .body a.cite", has_text="[k1]")
        assert link.get_attribute("href") == f"#{mid}-k1"
        link.click()
        item = page.locator(f"#{mid}-k1")
        assert item.inner_text() == f"[k1] {source}"
        assert "highlight" in (item.get_attribute("class") or "")
        assert page.evaluate("location.hash") == f"#{mid}-k1"
        # ... and that source's lines hold what the message quotes from it
        assert sentence in _lines(source), (source, _lines(source))
        listed = page.locator(f"#{mid} ol.sources li").all_inner_texts()
        assert listed[0] == f"[k1] {source}" and all(t.startswith("[k") for t in listed)
    # a message citing nothing lists nothing
    assert page.locator("#m1 ol.sources").count() == 0


def test_a_stored_garden_session_links_each_citation_to_its_source(
    page: Any, garden: Site, garden_server: Server
) -> None:
    page.goto(f"{garden_server.url}/s/{garden.ids['garden']}")
    _check_citations(page)


@pytest.mark.timeout(120)
def test_a_live_page_joined_mid_stream_shows_the_sources_as_each_message_ends(
    page: Any, garden_server: Server
) -> None:
    sid = _start(garden_server, "garden")
    _wait(lambda: sum(e["type"] == "chunk" for e in _events(garden_server, sid)) >= 3)
    page.goto(f"{garden_server.url}/s/{sid}")
    page.locator("article.streaming").first.wait_for(timeout=10_000)  # joined mid-run
    _finished(page, timeout=90_000)
    page.locator("#m6 ol.sources").wait_for()
    _check_citations(page)
