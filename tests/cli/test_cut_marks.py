"""A live display marks text it showed and reply hygiene then cut (real-models.md); a
display of messages as published (not live) shows only the message."""

from __future__ import annotations

import io
from typing import Literal

import pytest

import rolecall
from rolecall.cli.display import TerminalDisplay
from rolecall.cli.palette import Palette
from rolecall.cli.repl.display import ReplDisplay
from rolecall.world.models import World
from tests.helpers import world_from

pytestmark = pytest.mark.anyio

LOOP = "It is late and we should go. " * 6 + "Goodbye."
KEPT = "It is late and we should go. It is late and we should go."
MARK = "✂ cut (repeated text): the last"


def looping() -> World:
    world = world_from(
        {
            "name": "loop",
            "model": "scripted",
            "roles": [{"id": "a", "script": [LOOP]}, {"id": "b", "script": ["b {n}"]}],
            "flow": {"steps": [{"id": "one", "speaker": "a"}]},
        }
    )
    return world


async def test_the_run_display_marks_a_cut_it_showed_live() -> None:
    out = io.StringIO()
    display = TerminalDisplay(out, io.StringIO(), role_order=["a", "b"], live=True, color=False)
    async with rolecall.open_session(looping(), sinks=[display]) as session:
        await session.run()
    text = out.getvalue()
    assert session.transcript[0].content == KEPT
    assert text.count(MARK) == 1
    assert "published as" not in text  # the mark says it; the message is what was kept


async def test_a_display_of_published_messages_shows_only_the_message() -> None:
    out = io.StringIO()
    display = TerminalDisplay(out, io.StringIO(), role_order=["a", "b"], live=False, color=False)
    await rolecall.run(looping(), sinks=[display])
    text = out.getvalue()
    assert KEPT in text and "✂" not in text
    assert text.count("It is late") == 2


@pytest.mark.parametrize(
    ("stream", "width", "marked"),
    [("full", 24, True), ("full", 200, False), ("preview", 24, False)],
)
async def test_the_repl_marks_a_cut_it_printed_and_takes_back_one_it_held(
    stream: Literal["full", "preview"], width: int, marked: bool
) -> None:
    """Streamed in full and narrow, the cut words were printed (wrapped) before the cut
    was known: marked; wide, they were still the line's unprinted end, and in preview
    the reply is printed when complete: taken back, nothing to mark."""
    display = ReplDisplay(Palette(["a", "b"], color=False), width=lambda: width, stream=stream)
    async with rolecall.open_session(looping()) as session:
        session.bus.subscribe(display)
        await session.run()
    lines = display.take_output().splitlines()
    # the REPL wraps its notes between words, as its replies (a narrow mark spans lines)
    flat = " ".join(line.removeprefix("│").strip() for line in lines)
    assert (MARK in flat) is marked, lines
    body = " ".join(line.lstrip("│ ") for line in lines if line.startswith("│") and "✂" not in line)
    assert body.split().count("late") == (3 if marked else 2), lines
