"""`run`'s display and the REPL's are one renderer: the same events give the same header,
tool line and citation, whichever display prints them (issue 36, "Written twice")."""

from __future__ import annotations

import io

from rolecall.bus import (
    EventBus,
    KnowledgeEvent,
    MessageEvent,
    StreamChunk,
    StreamEnd,
    StreamStart,
    ToolCallEvent,
    ToolResultEvent,
)
from rolecall.cli.display import TerminalDisplay
from rolecall.cli.palette import Palette
from rolecall.cli.repl.display import ReplDisplay

REPLY = "Shade first [k1]."


def _events() -> list[object]:
    question = MessageEvent(message_id="m1", sender="human", content="Where do we start?")
    passages = [{"id": "k1", "path": "notes/heat.md", "line_start": 3, "line_end": 9}]
    return [
        question,
        KnowledgeEvent(role="alice", query="start", message_id="m2", passages=passages),
        ToolCallEvent(call_id="c1", message_id="m2", sender="alice", tool="add", arguments={}),
        ToolResultEvent(call_id="c1", tool="add", content="3", duration_ms=4),
        StreamStart(
            message_id="m2",
            sender="alice",
            target="bob",
            step_id="ask",
            loop_iteration=2,
            reply_to="m1",
        ),
        StreamChunk(message_id="m2", sender="alice", delta=REPLY, output_tokens=7),
        StreamEnd(message_id="m2", sender="alice", input_tokens=5, output_tokens=7),
        MessageEvent(
            message_id="m2",
            sender="alice",
            target="bob",
            content=REPLY,
            step_id="ask",
            loop_iteration=2,
            reply_to="m1",
            turn=1,
        ),
    ]


def _through_run() -> list[str]:
    out = io.StringIO()
    display = TerminalDisplay(out, io.StringIO(), role_order=["alice", "bob"], live=False)
    bus = EventBus("s1")
    bus.subscribe(display)
    for event in _events():
        bus.publish(event)  # type: ignore[arg-type]
    return out.getvalue().splitlines()


def _through_repl() -> list[str]:
    display = ReplDisplay(Palette(["alice", "bob"], color=False), width=lambda: 200)
    bus = EventBus("s1")
    bus.subscribe(display)
    for event in _events():
        bus.publish(event)  # type: ignore[arg-type]
    return display.take_output().splitlines()


def test_both_displays_print_one_header_tool_line_and_citation() -> None:
    header = 'alice → bob [step ask · loop 2] ↩ m1 "Where do we start?"'
    tool = "  ⚙ add() · 4 ms"
    run, repl = _through_run(), _through_repl()
    for lines in (run, repl):
        assert header in lines, lines
        assert tool in lines, lines
        cited = [line for line in lines if "[k1]" in line and "notes/heat.md" in line]
        assert len(cited) == 1, lines
    assert [line for line in run if "notes/heat.md" in line] == [
        line for line in repl if "notes/heat.md" in line
    ]
