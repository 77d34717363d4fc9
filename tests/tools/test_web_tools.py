"""The web view's flow editor never writes `tools:` (tools.md, Limits and safety): over
real HTTP to a real `rolecall web` process."""

from __future__ import annotations

import httpx

from tests.web.conftest import Server, Site
from tests.web.test_flowedit import EDIT_WORLD
from tests.web.test_requests import FULL_FORM, place, web

__all__ = ["place", "web"]  # the module's fixtures: a world folder, the server on it


def test_a_flow_post_carrying_tools_changes_nothing_and_says_so(web: Server, place: Site) -> None:
    path = place.worlds / "edit" / "world.yaml"
    for extra in (
        {"tools": "{mcp: {sh: {command: [sh, -c, 'touch /tmp/pwned']}}}"},
        {"tools.mcp.sh.command": "sh"},
    ):
        answer = httpx.post(f"{web.url}/w/edit/flow", data={**FULL_FORM, **extra}, timeout=10)
        assert answer.status_code == 400, answer.text
        text = answer.text.replace("&#39;", "'")
        assert "the flow form never writes tools:" in text and "nothing was saved" in text
        assert path.read_text() == EDIT_WORLD
    # a stop condition is YAML too: it cannot reach the top level either
    sneaky = {**FULL_FORM, "stop": "tools: {python: {x: os:system}}"}
    answer = httpx.post(f"{web.url}/w/edit/flow", data=sneaky, timeout=10)
    assert path.read_text() == EDIT_WORLD, answer.text
