"""The web view's Markdown and HTML exports show the sources of cited passages."""

from __future__ import annotations

import shutil
from pathlib import Path

import httpx

from tests.conftest import ROOT
from tests.web.conftest import Site, _stored_id, rolecall, start_server, stop_server


def test_web_exports_list_cited_sources(tmp_path: Path) -> None:
    worlds = tmp_path / "worlds"
    shutil.copytree(ROOT / "worlds" / "garden", worlds / "garden")
    data = tmp_path / "data"
    done = rolecall("run", "garden", "--data-dir", str(data), "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    sid = _stored_id(done)
    server = start_server(Site(root=tmp_path, data=data, ids={"garden": sid}))
    try:
        html = httpx.get(f"{server.url}/s/{sid}/export.html", timeout=10)
        assert html.status_code == 200
        assert '<a class="cite" href="#m2-k1">[k1]</a>' in html.text
        assert '<li id="m2-k1">[k1] <code>docs/plants.md:1-9</code></li>' in html.text
        md = httpx.get(f"{server.url}/s/{sid}/export.md", timeout=10)
        assert "- \\[k1\\] docs/soil.md:10-15\n" in md.text
    finally:
        stop_server(server)
