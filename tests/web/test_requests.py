"""What the server answers to messages, forms and bodies off the beaten path: over real
HTTP to a real `rolecall web` process (no browser needed)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server

IMAGE_WORLD = """\
name: img
title: An image in a message
topic: images
model: scripted
settings: {max_turns: 2}
roles:
  - id: a
    script:
      - "See ![a chart](https://example.com/chart.png) and ![the map][m]\\n\\n[m]: https://example.com/map.png"
  - id: b
    script: ["[![logo](https://example.com/logo.png)](https://example.org) <https://example.net>"]
flow:
  steps:
    - {id: s1, speaker: a, reply_to: none}
    - {id: s2, speaker: b}
"""


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("requests")
    (root / "worlds" / "img").mkdir(parents=True)
    (root / "worlds" / "img" / "world.yaml").write_text(IMAGE_WORLD)
    site = Site(root=root, data=root / "data", ids={})
    done = rolecall("run", "img", "--data-dir", str(site.data), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    site.ids["img"] = _stored_id(done)
    return site


@pytest.fixture(scope="module")
def web(place: Site) -> Iterator[Server]:
    running = start_server(place)
    yield running
    stop_server(running)


def test_a_message_with_images_renders_them_as_links(web: Server, place: Site) -> None:
    page = httpx.get(f"{web.url}/s/{place.ids['img']}", timeout=10)
    assert page.status_code == 200, page.text
    html = page.text
    assert '<a href="https://example.com/chart.png" rel="nofollow noopener">a chart</a>' in html
    assert '<a href="https://example.com/map.png" rel="nofollow noopener">the map</a>' in html
    assert '<a href="https://example.org">logo</a>' in html
    assert '<a href="https://example.net">https://example.net</a>' in html
    assert "<img" not in html
    # the fragment the live page swaps in when a message completes
    fragment = httpx.get(f"{web.url}/s/{place.ids['img']}/m/m1", timeout=10)
    assert fragment.status_code == 200 and ">a chart</a>" in fragment.text
    assert not any("Traceback" in line for line in web.stderr)
