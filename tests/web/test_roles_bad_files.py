"""`/roles` with files in the role library that cannot be used (a lone surrogate in a
field, as an old `roles import` wrote; a file name that is not UTF-8; broken YAML):
the page answers, shows each such file by name with its problem and lists the rest."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from tests.web.conftest import Site, start_server, stop_server


def test_bad_role_files_never_stop_the_roles_page(tmp_path: Path, page: Any) -> None:
    site = Site(root=tmp_path, data=tmp_path / "data", ids={})
    roles = site.data / "roles"
    roles.mkdir(parents=True)
    (site.root / "worlds").mkdir()
    (roles / "s-x.yaml").write_text('id: s-x\nname: "s\\uDC80x"\nsystem_prompt: hi\n')
    (roles / "good.yaml").write_text("id: good\nname: Goodwin\nsystem_prompt: hi\n")
    Path(os.fsdecode(bytes(roles) + b"/bad\xff.yaml")).write_text("id: bad\nsystem_prompt: hi\n")
    server = start_server(site)
    try:
        answer = httpx.get(server.url + "/roles", timeout=30)
        assert answer.status_code == 200, answer.text[-2000:]
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            page.goto(server.url + "/roles")
            assert page.locator("#role-good .role-name").inner_text() == "Goodwin"
            problem = page.locator("#role-s-x .error").inner_text()
            assert problem == (
                "This role file cannot be used: s-x.yaml: line 2, column 1: name: not text: "
                "a lone surrogate U+DC80 (a \\u escape of half a character)"
            )
            odd = page.locator("article.role-card", has_text="bad\\xff")
            assert (
                "This role file cannot be used: bad\\xff.yaml: its name is not a role id"
                in odd.inner_text()
            )
            assert page.locator("article.role-card").count() > 30  # the built-ins too
            page.screenshot(path=str(tmp_path / f"roles-{width}.png"), full_page=True)
        warned = "".join(server.stderr)
        assert "role_file_unusable" in warned and "s-x.yaml" in warned
    finally:
        stop_server(server)
