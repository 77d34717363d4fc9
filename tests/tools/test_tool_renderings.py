"""Tool calls in `rolecall sessions show`, `sessions trace` and the HTML export: one
line per call (tool, short arguments, result, duration), collapsed in the page, and a
tool's control characters shown, never obeyed (tools.md, events in every rendering)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tools.helpers import FIXTURE, events, one_step_world, rolecall, write_world

SNEAKY = "\x1b]0;pwned\x07 \x1b[2Jhello"  # a retitle and a clear-screen, then text


@pytest.mark.timeout(150)  # several rolecall processes, one starting an MCP server
def test_show_trace_and_html_list_each_call_and_show_control_characters(
    tmp_path: Path, data_dir: Path
) -> None:
    world = one_step_world(
        [
            {"call": "fx.echo", "arguments": {"text": SNEAKY}},
            {"call": "compute", "arguments": {"expression": "6*7"}},
            "Done: {result}",
        ],
        tools={
            "mcp": {"fx": {"command": FIXTURE}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        },
        role_tools=["fx.*", "compute"],
    )
    ran = rolecall("run", str(write_world(tmp_path / "w", world)), "--json")
    assert ran.returncode == 0, ran.stderr
    sid = events(ran.stdout)[0]["session_id"]

    show = rolecall("sessions", "show", sid)
    assert show.returncode == 0, show.stderr
    assert "\x1b" not in show.stdout and "\x07" not in show.stdout
    lines = show.stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if "⚙ compute(" in ln)
    echo = lines[at - 1]
    assert echo.startswith('  ⚙ fx.echo(text="\\u001b]0;pwned\\u0007 \\u001b[2Jhello") → ')
    assert "→ ␛]0;pwned␇ ␛[2Jhello · " in echo and echo.endswith(" ms")
    assert lines[at].startswith('  ⚙ compute(expression="6*7") → 6*7 = 42 · ')
    assert lines[at + 1] == "  Done: 6*7 = 42"  # the message after its calls

    trace = rolecall("sessions", "trace", sid)
    assert trace.returncode == 0, trace.stderr
    assert "\x1b" not in trace.stdout
    rows = trace.stdout.splitlines()
    head = rows.index("2 tool calls:")
    assert rows[head + 1].split() == [
        "call", "message", "speaker", "tool", "arguments", "approval", "result", "took"
    ]  # fmt: skip
    first, second = rows[head + 2].split(), rows[head + 3].split()
    assert first[:4] == ["c1", "m1", "clerk", "fx.echo"] and "␛[2Jhello" in first
    assert second[:4] == ["c2", "m1", "clerk", "compute"]
    assert second[4:9] == ['expression="6*7"', "allow", "6*7", "=", "42"]

    page = rolecall("sessions", "export", sid, "--format", "html")
    assert page.returncode == 0, page.stderr
    html = page.stdout
    assert "\x1b" not in html
    assert '<details class="tools"><summary>2 tool calls</summary>' in html
    assert (
        "<li><code>compute</code> <code>{&quot;expression&quot;: &quot;6*7&quot;}</code>"
        " → 6*7 = 42 (" in html
    )
    assert "→ ␛]0;pwned␇ ␛[2Jhello (" in html
    # the calls come before the message's text, inside its article
    assert html.index("2 tool calls") < html.index("Done: 6*7 = 42")
