"""The REPL shows the source of each passage a reply cites (tmux drives it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.repl.test_tmux import TMUX, Terminal

pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not on PATH: the REPL needs a terminal"
)


@pytest.fixture
def repl(tmp_path: Path) -> Iterator[Terminal]:
    t = Terminal(tmp_path / "home", "knowledge")
    try:
        yield t
    finally:
        t.close()


def test_a_cited_reply_lists_its_sources(repl: Terminal) -> None:
    repl.start("garden", "--mode", "step")
    repl.ready()
    repl.type("@soil_scientist how much lime raises the pH of acid soil?")
    repl.key("Enter")
    screen = repl.wait_for("[k1] docs/soil.md:10-15", timeout=30)
    flat = " ".join(screen.replace("│", " ").split())
    assert "According to [k1]: To make acid soil less acidic" in flat
    reply = flat.split("According to [k1]")[1]
    assert reply.index("[k1] docs/soil.md:10-15") < reply.index("↑")  # under the reply
