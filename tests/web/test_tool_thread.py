"""Tool calls in the web view's thread (tools.md): a stored session's calls under their
message, a live turn's calls as they happen, and `approve: ask` answered on the page.

A real `rolecall web`, roles calling the real `mcp-server-time` (stdio) and a Python
tool, Debian's chromium."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import ROOT
from tests.tools.helpers import FIXTURE, TIME, write_world
from tests.web.conftest import Server, Site, _stored_id, rolecall, start_server, stop_server
from tests.web.test_live_page import _api, _events, _start, _wait

# a tool's output with markup and terminal controls: shown as text, never obeyed
HOSTILE = "<script>window.pwned=1</script>\x1b[31mred\x07 & <b>bold</b>"
COMPUTE = "rolecall.examples.desk_tools:compute"


def _world(name: str, script: list[Any], approve: Any, *, fixture: bool = False) -> dict[str, Any]:
    mcp: dict[str, Any] = {"time": {"command": TIME}}
    if fixture:
        mcp["fx"] = {"command": FIXTURE}
    return {
        "name": name,
        "title": f"The {name} desk",
        "topic": "what time it is, and a sum",
        "model": "scripted",
        "tools": {"mcp": mcp, "python": {"compute": COMPUTE}},
        "roles": [
            {
                "id": "clerk",
                "name": "Clerk Cleo",
                "tools": ["time.*", "compute", *(["fx.echo"] if fixture else [])],
                "approve": approve,
                "script": script,
            }
        ],
        "flow": {"steps": [{"id": "look", "speaker": "clerk", "reply_to": "none"}]},
    }


TIME_CALL = {"call": "time.get_current_time", "arguments": {"timezone": "UTC"}}
ASKED = _world(
    "asked",
    [TIME_CALL, {"call": "compute", "arguments": {"expression": "1+1"}}, "It is {result}"],
    {"time.*": "ask", "compute": "ask"},
)
REFUSED = _world(
    "refused",
    [{"call": "compute", "arguments": {"expression": "2+2"}}, "Then: {result}"],
    "ask",
)


@pytest.fixture(scope="module")
def desk(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("desk")
    for world in (ASKED, REFUSED):
        write_world(root / "worlds" / world["name"], world)
    return Site(root=root, data=root / "data", ids={})


@pytest.fixture(scope="module")
def desk_server(desk: Site) -> Iterator[Server]:
    running = start_server(desk)
    yield running
    stop_server(running)


def _calls(page: Any, mid: str) -> list[str]:
    found: list[str] = page.eval_on_selector_all(
        f"#{mid} ol.tools > li.tool-call > details > summary",
        "els => els.map(e => e.textContent.trim())",
    )
    return found


@pytest.mark.timeout(150)  # a rolecall run starting three MCP servers, then the page
def test_a_stored_turns_calls_show_under_its_message_and_their_output_is_only_text(
    page: Any, tmp_path: Path
) -> None:
    script = [
        TIME_CALL,
        {"call": "compute", "arguments": {"expression": "6*7"}},
        {"call": "fx.echo", "arguments": {"text": HOSTILE}},
        "Here it is: {result}",
    ]
    folder = write_world(
        tmp_path / "worlds" / "stored", _world("stored", script, "auto", fixture=True)
    )
    data = tmp_path / "data"
    done = rolecall("run", str(folder), "--data-dir", str(data), "--json", cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    sid = _stored_id(done)
    server = start_server(Site(root=tmp_path, data=data, ids={}))
    try:
        page.goto(f"{server.url}/s/{sid}")
        calls = _calls(page, "m1")
        assert len(calls) == 3, calls
        assert calls[0].startswith('⚙ time.get_current_time(timezone="UTC") · ') and calls[
            0
        ].endswith(" ms")
        assert calls[1].startswith('⚙ compute(expression="6*7") · ')
        # arguments as JSON: its controls as escapes
        assert calls[2].startswith('⚙ fx.echo(text="<script>window.pwned=1</script>\\u001b[31m')
        # each result folded under its line: hidden until opened, then readable
        result = page.locator("#call-c2 pre.result")
        assert not result.is_visible()
        page.click("#call-c2 > details > summary")
        assert result.inner_text() == "6*7 = 42"
        page.click("#call-c1 > details > summary")
        assert json.loads(page.locator("#call-c1 pre.result").inner_text())["timezone"] == "UTC"
        page.click("#call-c3 > details > summary")
        assert page.locator("#call-c3 pre.result").inner_text() == (
            "<script>window.pwned=1</script>␛[31mred␇ & <b>bold</b>"
        )
        assert page.locator("#call-c3 b, #call-c3 script").count() == 0
        # the message quoting it ({result}) shows it the same way
        assert page.locator("#m1 .body").inner_text().strip() == (
            "Here it is: <script>window.pwned=1</script>␛[31mred␇ & <b>bold</b>"
        )
        assert page.evaluate("window.pwned") is None
        # the message after its calls, as the terminal shows it
        order = page.eval_on_selector_all("#m1 > *", "els => els.map(e => e.className)")
        assert order.index("tools") < order.index("body")
    finally:
        stop_server(server)


def _waits(page: Any, call: str) -> None:
    page.locator(f"#call-{call}.state-waiting .approval button.approve").wait_for(timeout=30_000)


@pytest.mark.timeout(150)  # the session starts mcp-server-time in the server
def test_calls_are_approved_in_the_browser_and_a_page_that_joins_sees_them_waiting(
    page: Any, browser: Any, desk_server: Server
) -> None:
    page.goto(desk_server.url + "/start")
    page.select_option("select[name=world]", "asked")
    page.click("form.start button[type=submit]")
    page.wait_for_url("**/s/*")
    sid = page.url.rsplit("/", 1)[1]
    _waits(page, "c1")
    assert (
        page.locator("#call-c1 > details > summary")
        .inner_text()
        .startswith('⚙ time.get_current_time(timezone="UTC")')
    )
    assert page.locator("#thinking").inner_text() == (
        "a call waits: time.get_current_time (Approve / Deny)"
    )
    assert page.locator("#m1 .who").inner_text() == "Clerk Cleo"
    waiting = _api(desk_server, f"/api/sessions/{sid}/approvals").json()["waiting"]
    assert waiting == [
        {
            "call_id": "c1",
            "sender": "clerk",
            "tool": "time.get_current_time",
            "arguments": {"timezone": "UTC"},
        }
    ]
    # nobody answers for a while: the call still waits (tools.md: until a person answers)
    page.wait_for_timeout(1500)
    assert not any(e["type"] == "tool_result" for e in _events(desk_server, sid))

    page.click("#call-c1 button.approve")
    # the result streams in; the next call waits: a second page opened now joins the turn
    _waits(page, "c2")
    other = browser.new_context(viewport={"width": 390, "height": 844}, bypass_csp=True)
    late = other.new_page()
    late.set_default_timeout(15_000)
    try:
        late.goto(f"{desk_server.url}/s/{sid}")
        _waits(late, "c2")
        late.click("#call-c1 > details > summary")
        assert json.loads(late.locator("#call-c1 pre.result").inner_text())["timezone"] == "UTC"
        assert "approved" in late.locator("#call-c1 > details > summary").inner_text()
        # the late page edits the arguments and approves; both pages see the end
        late.click("#call-c2 .approval details.edit summary")
        late.fill("#call-c2 .approval textarea", "[1, 2]")
        late.click("#call-c2 button.approve-edited")
        assert late.locator("#call-c2 .approval .error").inner_text() == (
            "the arguments must be a JSON object"
        )
        late.fill("#call-c2 .approval textarea", '{"expression": "6*7"}')
        late.click("#call-c2 button.approve-edited")
        for tab in (page, late):
            tab.wait_for_function(
                "document.getElementById('status').textContent.startsWith('finished')",
                timeout=30_000,
            )
            tab.locator("#m1 .tokens").wait_for()  # the server's rendering of it, swapped in
            assert tab.locator("#m1 .body").inner_text().strip() == "It is 6*7 = 42"
            assert tab.locator("#m1 .approval").count() == 0
            line = _calls(tab, "m1")[1]
            assert line.startswith('⚙ compute(expression="6*7") · ')
            assert line.endswith(" ms · approved with edited arguments"), line
            tab.click("#call-c2 > details > summary")
            assert json.loads(tab.locator("#call-c2 pre.asked").inner_text()) == {
                "expression": "1+1"
            }
    finally:
        other.close()
    decisions = [
        (e["call_id"], e["decision"], e["by"])
        for e in _events(desk_server, sid)
        if e["type"] == "tool_approval"
    ]
    assert decisions == [("c1", "allow", "human"), ("c2", "allow", "human")]
    # the stored page shows the same, read from the store
    page.reload()
    assert _calls(page, "m1")[0].endswith(" ms · approved")
    assert _calls(page, "m1")[1].endswith(" ms · approved with edited arguments")


@pytest.mark.timeout(150)
def test_deny_refuses_the_call_and_the_turn_goes_on(page: Any, desk_server: Server) -> None:
    sid = _start(desk_server, "refused")
    page.goto(f"{desk_server.url}/s/{sid}")
    _waits(page, "c1")
    page.click("#call-c1 button.deny")
    page.wait_for_function(
        "document.getElementById('status').textContent.startsWith('finished')", timeout=30_000
    )
    page.locator("#m1 .tokens").wait_for()
    assert page.locator("#m1 .body").inner_text().strip() == (
        "Then: refused: the person refused compute"
    )
    line = _calls(page, "m1")[0]
    assert line == '⚙ compute(expression="2+2") · refused by human', line
    assert page.locator("#call-c1.state-refused").count() == 1
    page.click("#call-c1 > details > summary")
    assert page.locator("#call-c1 pre.result").inner_text() == (
        "refused: the person refused compute"
    )
    kinds = [(e["type"], e.get("decision")) for e in _events(desk_server, sid)]
    assert ("tool_approval", "deny") in kinds
    assert not any(
        e["type"] == "tool_result" and "4" in e["content"] for e in _events(desk_server, sid)
    )


@pytest.mark.timeout(150)
def test_the_answer_api_checks_what_it_is_given_and_stop_refuses_a_waiting_call(
    desk_server: Server,
) -> None:
    sid = _start(desk_server, "refused")
    waits = _wait(lambda: _api(desk_server, f"/api/sessions/{sid}/approvals").json()["waiting"])
    assert [w["call_id"] for w in waits] == ["c1"]
    url = f"{desk_server.url}/api/sessions/{sid}/approve"
    answer = httpx.post(url, json={"call_id": "c9", "decision": "allow"}, timeout=10)
    assert answer.status_code == 409
    assert answer.json()["error"].startswith("no call c9 waits for an answer in session")
    assert "(waiting: c1)" in answer.json()["error"]
    answer = httpx.post(url, json={"call_id": "c1", "decision": "maybe"}, timeout=10)
    assert answer.status_code == 422 and "decision" in answer.json()["error"]
    answer = httpx.post(
        url,
        json={"call_id": "c1", "decision": "deny", "arguments": {"expression": "1"}},
        timeout=10,
    )
    assert answer.status_code == 422
    # another site's page cannot answer it (web/guard.py)
    answer = httpx.post(
        url,
        json={"call_id": "c1", "decision": "allow"},
        headers={"origin": "http://evil.example", "sec-fetch-site": "cross-site"},
        timeout=10,
    )
    assert answer.status_code == 403
    assert _api(desk_server, f"/api/sessions/{sid}/approvals").json()["waiting"]
    # Stop: the waiting call is refused, the turn ends, the session finishes
    stop = _api(desk_server, f"/api/sessions/{sid}/control", {"action": "stop"})
    assert stop.status_code == 202, stop.text
    _wait(lambda: _api(desk_server, f"/api/sessions/{sid}").json()["state"]["state"] == "finished")
    events = _events(desk_server, sid)
    (decision,) = [e for e in events if e["type"] == "tool_approval"]
    assert decision["decision"] == "deny" and decision["by"] == "human"
    assert decision["reason"] == "the session was stopped before anyone answered"
    gone = httpx.post(url, json={"call_id": "c1", "decision": "allow"}, timeout=10)
    assert gone.status_code == 409
    # a session that does not exist
    assert _api(desk_server, "/api/sessions/nope-nope/approvals").status_code == 404
