"""The web view's compare page (docs/compare.md): sessions picked from the list, side by
side with their scores, and where the first two first differ; in Chromium at 1280 and
390 px, against a real `rolecall web` on stored sessions made by real commands."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.web.conftest import Server, Site, rolecall, start_server, stop_server

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Site:
    """A tutoring session, its fork at m4 with the learner's text edited (resumed to its
    stop), and an offline judge's score of the parent."""
    root = tmp_path_factory.mktemp("compare")
    data = root / "data"
    flag = ("--data-dir", str(data))
    ran = rolecall("run", "worlds/tutoring", *flag, "--json", cwd=ROOT)
    assert ran.returncode == 0, ran.stderr
    parent = json.loads(ran.stdout.splitlines()[0])["session_id"]
    fork = rolecall(
        "sessions",
        "fork",
        parent,
        "--at",
        "m4",
        "--edit",
        "UNDERSTOOD, thank you",
        "-q",
        *flag,
        cwd=ROOT,
    ).stdout.strip()
    assert rolecall("resume", fork, "-q", *flag, cwd=ROOT).returncode == 0
    scored = rolecall("score", parent, "--judge", "offline", "--json", *flag, cwd=ROOT)
    assert scored.returncode == 0, scored.stderr
    return Site(root=root, data=data, ids={"parent": parent, "fork": fork})


@pytest.fixture(scope="module")
def compare_server(pair: Site) -> Iterator[Server]:
    running = start_server(pair)
    yield running
    stop_server(running)


def _shots(page: Any, name: str) -> None:
    folder = (
        Path(os.environ.get("ROLECALL_SHOTS", "")) if os.environ.get("ROLECALL_SHOTS") else None
    )
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("width", [1280, 390])
def test_two_sessions_picked_in_the_list_are_compared(
    browser: Any, compare_server: Server, pair: Site, width: int, tmp_path: Path
) -> None:
    parent, fork = pair.ids["parent"], pair.ids["fork"]
    context = browser.new_context(viewport={"width": width, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15_000)
    try:
        page.goto(compare_server.url + "/")
        page.get_by_label(f"compare {parent}").check()
        page.get_by_label(f"compare {fork}").check()
        _shots(page, f"list-{width}")
        page.get_by_role("button", name="Compare selected").click()
        page.wait_for_url("**/compare?*")
        rows = page.locator("tr.compare-row")
        # in the list's order (newest first): the fork, then its parent
        assert [rows.nth(i).get_attribute("data-session") for i in range(2)] == [fork, parent]
        by_id = {rows.nth(i).get_attribute("data-session"): rows.nth(i) for i in range(2)}
        assert "offline: score=" in by_id[parent].locator("td.scores").inner_text()
        assert by_id[fork].locator("td.scores").inner_text().strip() == "–"
        assert int(by_id[parent].locator("td.turns").inner_text()) > int(
            by_id[fork].locator("td.turns").inner_text()
        )
        diff = page.locator("#difference")
        assert "Message 4: another text." in diff.inner_text()
        assert "UNDERSTOOD, thank you" in page.locator("#word-diff del").all_inner_texts()[0]
        assert "Question 2" in page.locator("#word-diff ins").all_inner_texts()[0]
        assert page.locator(".side .mid").all_inner_texts() == ["m4", "m4"]
        # nothing wider than the window (the table scrolls inside its own box)
        overflow = page.evaluate("document.documentElement.scrollWidth")
        assert overflow <= width, overflow
        _shots(page, f"compare-{width}")
        page.locator(f".side[data-session='{parent}'] h3 a").click()
        page.wait_for_url(f"**/s/{parent}*")
        assert "offline" in page.locator("#scores").inner_text()
        _shots(page, f"session-{width}")
    finally:
        context.close()


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_too_few_or_unknown_sessions_say_so(compare_server: Server, pair: Site) -> None:
    one, text = _status(compare_server.url + f"/compare?s={pair.ids['parent']}")
    assert one == 400 and "Compare needs two or more sessions" in text
    gone, text = _status(
        compare_server.url + f"/compare?s={pair.ids['parent']}&s=20990101-000000-abcdef"
    )
    assert gone == 404 and "no session &#39;20990101-000000-abcdef&#39;" in text
