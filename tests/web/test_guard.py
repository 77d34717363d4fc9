"""The web view against other sites and odd requests: a real `rolecall web` process, real
HTTP, raw sockets, and Debian's chromium on a page served from another origin."""

from __future__ import annotations

import http.server
import json
import re
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest

from tests.conftest import ROOT
from tests.web.conftest import (
    CHAT_WORLD,
    HOSTILE_WORLD,
    Server,
    Site,
    _stored_id,
    rolecall,
    start_server,
    stop_server,
)
from tests.web.test_flowedit import EDIT_WORLD

TOKEN = "t0ken"
VERSION = re.compile(r'name="version" value="([0-9a-f]+)"')
NOT_A_MAPPING = EDIT_WORLD.replace("name: edit", "name: notmap").replace(
    "    - id: s1\n      speaker: a   # first\n", "    - just a string\n"
)


@pytest.fixture(scope="module")
def spot(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("guard")
    worlds = root / "worlds"
    for name, text in (("edit", EDIT_WORLD), ("talk", CHAT_WORLD), ("hostile", HOSTILE_WORLD)):
        (worlds / name).mkdir(parents=True)
        (worlds / name / "world.yaml").write_text(text)
    (worlds / "latin").mkdir()
    (worlds / "latin" / "world.yaml").write_bytes(
        EDIT_WORLD.replace("name: edit", "name: latin").encode().replace(b"Alice", b"Al\xefce")
    )
    (worlds / "notmap").mkdir()
    (worlds / "notmap" / "world.yaml").write_text(NOT_A_MAPPING)
    site = Site(root=root, data=root / "data", ids={})
    done = rolecall("run", "hostile", "--data-dir", str(site.data), "--json", cwd=root)
    assert done.returncode == 0, done.stderr
    site.ids["hostile"] = _stored_id(done)
    # a chat stored paused: talking to it makes the server open it again
    chat = rolecall(
        "chat", "talk", "--data-dir", str(site.data), "--json", cwd=root, stdin="@alice hi\n"
    )
    assert chat.returncode == 0, chat.stderr
    site.ids["talk"] = _stored_id(chat)
    return site


@pytest.fixture(scope="module")
def web(spot: Site) -> Iterator[Server]:
    running = start_server(spot, env={"ROLECALL_WEB_REQUEST_TIMEOUT": "1.5"})
    yield running
    stop_server(running)


def _no_traceback(server: Server) -> None:
    assert not any("Traceback" in line for line in server.stderr), "".join(server.stderr)


def _total(web: Server, **headers: str) -> int:
    listed = httpx.get(f"{web.url}/api/sessions", headers=headers, timeout=10)
    return int(listed.json()["total"])


# ------------------------------------------------------------ another origin


class _Attacker:
    """A site on another port of 127.0.0.1 whose pages are given by the test."""

    def __init__(self) -> None:
        self.pages: dict[str, str] = {}
        pages = self.pages

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = pages.get(self.path, "").encode()
                self.send_response(200 if body else 404)
                self.send_header("content-type", "text/html; charset=utf-8")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                return

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def _form(action: str, fields: dict[str, str]) -> str:
    inputs = "".join(
        f"<textarea name='{k}'>{v}</textarea>" for k, v in fields.items()
    )  # values of the test's own making
    return (
        f"<form method='post' action='{action}'>{inputs}</form>"
        "<script>document.forms[0].submit()</script>"
    )


def _fetch(url: str, body: dict[str, str]) -> str:
    # a "simple" request: no preflight, so the browser sends it to any server
    return (
        f"<script>fetch({json.dumps(url)}, {{method: 'POST', mode: 'no-cors', "
        f"headers: {{'content-type': 'text/plain'}}, body: {json.dumps(json.dumps(body))}}})"
        "</script>"
    )


def test_a_page_of_another_origin_can_neither_start_nor_talk_nor_save_a_flow(
    spot: Site, browser: Any, tmp_path: Path
) -> None:
    """Even in a browser holding the token's cookie: the other page is on another port of
    127.0.0.1 (same site for cookies), and every attempt is refused with 403."""
    web = start_server(spot, "--token", TOKEN)
    attacker = _Attacker()
    context = browser.new_context()
    page = context.new_page()
    page.set_default_timeout(15_000)
    auth = {"authorization": f"Bearer {TOKEN}"}
    flow = spot.worlds / "edit" / "world.yaml"
    sid = spot.ids["talk"]
    try:
        page.goto(f"{web.url}/?token={TOKEN}")  # the cookie, as a user would have it
        assert page.locator("h1, table").count() > 0
        shown = httpx.get(f"{web.url}/w/edit/flow", headers=auth, timeout=10).text
        found = VERSION.search(shown)
        assert found, shown
        before_total = _total(web, **auth)
        before_talk = httpx.get(f"{web.url}/api/sessions/{sid}", headers=auth, timeout=10).json()
        pwned = {
            "step.0": "s1",
            "step.1": "s2",
            "loop.0.to": "",
            "loop.0.max": "",
            "loop.0.until": "",
            "loop.1.to": "",
            "loop.1.max": "",
            "loop.1.until": "",
            "stop": "{contains: pwned}",
            "version": found.group(1),  # even knowing it
        }
        attacker.pages.update(
            {
                "/start": _form(f"{web.url}/start", {"world": "talk"}),
                "/flow": _form(f"{web.url}/w/edit/flow", pwned),
                "/api": _fetch(f"{web.url}/api/sessions", {"world": "talk"}),
                "/say": _fetch(f"{web.url}/api/sessions/{sid}/say", {"text": "@alice pwned"}),
            }
        )

        def posted(r: Any) -> bool:
            return bool(r.url.startswith(web.url) and r.method == "POST")

        for path in ("/start", "/flow"):  # forms: the browser shows the answer
            with page.expect_response(lambda r: posted(r.request)) as answer:
                page.goto(attacker.url + path)
            assert answer.value.status == 403, (path, answer.value.status)
        # fetches: the browser withholds the answer from the other page (ORB), which the
        # page sees as a failed request, once the server has answered
        for path in ("/api", "/say"):
            with page.expect_event("requestfailed", posted):
                page.goto(attacker.url + path)
        page.screenshot(path=str(tmp_path / "refused.png"))
        assert flow.read_text() == EDIT_WORLD
        assert _total(web, **auth) == before_total
        after_talk = httpx.get(f"{web.url}/api/sessions/{sid}", headers=auth, timeout=10).json()
        assert after_talk["last_seq"] == before_talk["last_seq"]
        assert after_talk["messages"] == before_talk["messages"]
        # the server's own page still saves (same origin)
        page.goto(f"{web.url}/w/edit/flow")
        page.fill("input[name='loop.1.max']", "3")
        page.click("button[type=submit]")
        page.wait_for_url("**/w/edit/flow?saved=1")
        assert flow.read_text() == EDIT_WORLD.replace("max: 2}", "max: 3}")
        _no_traceback(web)
    finally:
        flow.write_text(EDIT_WORLD)
        context.close()
        attacker.close()
        stop_server(web)


def test_the_cookie_is_strict_and_the_api_takes_only_json(web: Server, spot: Site) -> None:
    with_token = start_server(spot, "--token", TOKEN)
    try:
        opened = httpx.get(f"{with_token.url}/?token={TOKEN}", timeout=10)
        assert opened.status_code == 303
        cookie = opened.headers["set-cookie"].lower()
        assert "samesite=strict" in cookie and "httponly" in cookie
    finally:
        stop_server(with_token)
    before = _total(web)
    plain = httpx.post(
        f"{web.url}/api/sessions",
        content=json.dumps({"world": "talk"}),
        headers={"content-type": "text/plain"},
        timeout=10,
    )
    assert plain.status_code == 415 and "application/json" in plain.json()["error"]
    assert _total(web) == before
    # a script (no Origin, no Sec-Fetch-Site) with JSON is served as before
    started = httpx.post(f"{web.url}/api/sessions", json={"world": "talk"}, timeout=10)
    assert started.status_code == 201, started.text


def test_a_host_name_other_than_the_servers_is_refused(web: Server) -> None:
    port = web.url.rsplit(":", 1)[1]
    for host in ("rebind.example", f"rebind.example:{port}", "127.0.0.1.nip.io"):
        answer = httpx.get(f"{web.url}/api/sessions", headers={"host": host}, timeout=10)
        assert answer.status_code == 421, (host, answer.text)
        assert "sessions" not in answer.text
    for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
        answer = httpx.get(f"{web.url}/api/sessions", headers={"host": host}, timeout=10)
        assert answer.status_code == 200, (host, answer.text)


# ------------------------------------------------------------ headers, bodies, timeouts


def test_pages_send_security_headers_and_work_under_their_policy(
    web: Server, spot: Site, browser: Any, tmp_path: Path
) -> None:
    answer = httpx.get(f"{web.url}/", timeout=10)
    csp = answer.headers["content-security-policy"]
    assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
    assert answer.headers["x-frame-options"] == "DENY"
    assert answer.headers["x-content-type-options"] == "nosniff"
    sid = spot.ids["hostile"]
    thread = httpx.get(f"{web.url}/s/{sid}", timeout=10).text
    assert 'href="https://example.org/docs" rel="nofollow noopener noreferrer"' in thread
    context = browser.new_context()  # the pages' policy in force (the fixture bypasses it)
    page = context.new_page()
    page.set_default_timeout(15_000)
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if "Refused" in m.text else None)
    page.on("console", lambda m: problems.append(m.text) if "Policy" in m.text else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    try:
        for path in ("/", f"/s/{sid}", f"/s/{sid}/flow", "/w/edit/flow", "/start"):
            page.goto(web.url + path)
            page.wait_for_load_state("load")
        page.goto(f"{web.url}/s/{sid}/export.html")
        page.goto(f"{web.url}/s/{sid}")
        colour = page.evaluate(
            "getComputedStyle(document.querySelector('.message')).getPropertyValue('--role')"
        )
        assert colour.strip().startswith("#"), colour  # the role's colour: a style attribute
        assert page.evaluate("typeof window.pwned") == "undefined"
        # the live page under the policy: the script, its fetches and its event stream
        page.goto(f"{web.url}/start")
        page.select_option("select[name=world]", "hostile")
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/s/[^/]+$"))
        page.locator("#status", has_text="finished").wait_for(timeout=30_000)
        page.locator("#m2 .body", has_text="I answer").wait_for()
        page.screenshot(path=str(tmp_path / "under-csp.png"))
        assert problems == [], problems
    finally:
        context.close()


def test_bodies_too_large_or_too_deep_get_a_clear_4xx(web: Server, spot: Site) -> None:
    sid = spot.ids["talk"]
    big = httpx.post(
        f"{web.url}/api/sessions/{sid}/say", json={"text": "x" * (1024 * 1024 + 10)}, timeout=10
    )
    assert big.status_code == 413 and "larger than" in big.json()["error"]

    def chunks() -> Iterator[bytes]:  # no length given: counted as it comes
        for _ in range(40):
            yield b"x" * 65536

    streamed = httpx.post(
        f"{web.url}/w/edit/flow",
        content=chunks(),
        headers={"content-type": "application/x-www-form-urlencoded"},
        timeout=10,
    )
    assert streamed.status_code == 413 and "<title>Too large" in streamed.text
    deep = httpx.post(
        f"{web.url}/api/sessions",
        content="[" * 100_000 + "]" * 100_000,
        headers={"content-type": "application/json"},
        timeout=10,
    )
    assert deep.status_code == 400 and "nested too deeply" in deep.json()["error"]
    _no_traceback(web)


def _port(web: Server) -> int:
    return int(web.url.rsplit(":", 1)[1])


def test_a_half_open_request_is_closed_after_the_timeout(web: Server) -> None:
    """Headers that never end, a connection that never sends, a body that never comes:
    each is closed (or answered 408) after ROLECALL_WEB_REQUEST_TIMEOUT (1.5 s here)."""
    silent = socket.create_connection(("127.0.0.1", _port(web)), timeout=10)
    half = socket.create_connection(("127.0.0.1", _port(web)), timeout=10)
    slow = socket.create_connection(("127.0.0.1", _port(web)), timeout=10)
    try:
        half.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        slow.sendall(
            b"POST /api/sessions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b'Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{"world"'
        )
        started = time.monotonic()
        assert silent.recv(100) == b""  # closed by the server, nothing to answer
        assert half.recv(100) == b""
        answer = slow.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408"), answer
        assert time.monotonic() - started < 9  # well before the 10 s of the client
        # a well-behaved request on a fresh connection is served as usual
        assert httpx.get(f"{web.url}/api/sessions", timeout=10).status_code == 200
    finally:
        for sock in (silent, half, slow):
            sock.close()


# ------------------------------------------------------------ the events of a session


def test_the_events_of_a_reopened_session_start_at_its_first(web: Server, spot: Site) -> None:
    done = rolecall(
        "chat", "talk", "--data-dir", str(spot.data), "--json", cwd=spot.root,
        stdin="@alice one\n@bob two\n",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    sid = _stored_id(done)
    stored = httpx.get(f"{web.url}/api/sessions/{sid}/events?after=0", timeout=10).json()
    said = httpx.post(f"{web.url}/api/sessions/{sid}/say", json={"text": "@alice three"})
    assert said.status_code == 202, said.text
    deadline = time.monotonic() + 20
    while True:
        events = httpx.get(f"{web.url}/api/sessions/{sid}/events?after=0", timeout=10).json()
        if any(e.get("type") == "message" and "three" in json.dumps(e) for e in events):
            break
        assert time.monotonic() < deadline, "the message never showed"
        time.sleep(0.1)
    seqs = [e["seq"] for e in events]
    assert seqs[: len(stored)] == [e["seq"] for e in stored]  # the history, then the rest
    assert seqs == list(range(1, len(seqs) + 1))
    later = httpx.get(f"{web.url}/api/sessions/{sid}/events?after=5", timeout=10).json()
    assert [e["seq"] for e in later] == seqs[5:]
    # the stream too, from the first event
    got: list[int] = []
    with httpx.stream("GET", f"{web.url}/api/sessions/{sid}/stream?after=0", timeout=20) as s:
        for line in s.iter_lines():
            if line.startswith("id: "):
                got.append(int(line[4:]))
            if line.startswith("event: end") or len(got) >= len(seqs):
                break
    assert got[: len(seqs)] == seqs


# ------------------------------------------------------------ no 500s


def test_odd_numbers_and_odd_files_get_a_4xx_or_an_empty_answer_never_a_500(
    web: Server, spot: Site
) -> None:
    sid = spot.ids["hostile"]
    huge = "9" * 40
    for path in (
        f"/api/sessions/{sid}/events?after={huge}",
        f"/api/sessions?offset={huge}",
        f"/?page={huge}",
        f"/s/{sid}?page={huge}",
    ):
        answer = httpx.get(web.url + path, timeout=10)
        assert answer.status_code == 200, (path, answer.text)
    assert httpx.get(f"{web.url}/api/sessions/{sid}/events?after={huge}").json() == []
    bad = httpx.get(f"{web.url}/api/sessions?offset=lots", timeout=10)
    assert bad.status_code == 400 and "offset must be a whole number" in bad.json()["error"]
    latin = spot.worlds / "latin" / "world.yaml"
    before = latin.read_bytes()
    form = {"stop": "", "version": "0"}
    answer = httpx.post(f"{web.url}/w/latin/flow", data=form, timeout=10)
    assert answer.status_code == 409 and "not UTF-8" in answer.text, answer.text
    assert "<title>Cannot do that now" in answer.text
    assert latin.read_bytes() == before
    answer = httpx.post(f"{web.url}/w/notmap/flow", data=form, timeout=10)
    assert answer.status_code == 409 and "cannot be edited until it loads" in answer.text
    assert (spot.worlds / "notmap" / "world.yaml").read_text() == NOT_A_MAPPING
    assert httpx.get(f"{web.url}/w/notmap/flow", timeout=10).status_code == 422
    plain = httpx.post(
        f"{web.url}/w/edit/flow", content=b"x", headers={"content-type": "text/plain"}
    )
    assert plain.status_code == 400 and "<title>Bad request" in plain.text
    missing = httpx.get(f"{web.url}/s/nosuch", timeout=10)
    assert missing.status_code == 404 and "<title>Not found" in missing.text
    _no_traceback(web)


def test_a_token_that_is_not_ascii_is_refused_and_the_printed_address_encodes_it(
    spot: Site,
) -> None:
    token = "s3cret&é/x y"
    web = start_server(spot, "--token", token)
    try:
        printed = next(line for line in web.stderr if "serving on" in line)
        assert "?token=s3cret%26%C3%A9%2Fx%20y " in printed, printed
        wrong = httpx.get(f"{web.url}/?token=%C3%A9t%C3%A9", timeout=10)
        assert wrong.status_code == 401
        right = httpx.get(printed.split("serving on ")[1].split()[0], timeout=10)
        assert right.status_code == 303 and right.headers["location"] == "/"
        twisted = httpx.get(f"{web.url}//evil.example/x?token={quote(token)}", timeout=10)
        assert twisted.status_code == 303 and twisted.headers["location"] == "/evil.example/x"
        _no_traceback(web)
    finally:
        stop_server(web)


def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as sock:
            sock.bind(("::1", 0))
    except OSError:
        return False
    return True


@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_an_ipv6_address_is_printed_in_brackets_once(spot: Site, host: str) -> None:
    if not _ipv6_loopback():
        pytest.skip("no IPv6 loopback on this machine")
    web = start_server(spot, "--host", host)
    try:
        assert web.url.startswith("http://[::1]:"), web.url
        assert httpx.get(f"{web.url}/api/sessions", timeout=10).status_code == 200
    finally:
        stop_server(web)


# ------------------------------------------------------------ which worlds


def test_a_world_to_start_is_a_listed_world_never_another_file(web: Server, spot: Site) -> None:
    secret = spot.root / "secret.yaml"
    secret.write_text("password_of_the_db: hunter2\napi_key_x: abc\n")
    (spot.root / "elsewhere").mkdir(exist_ok=True)
    (spot.root / "elsewhere" / "world.yaml").write_text(CHAT_WORLD)  # a world, not listed
    before = _total(web)
    for world in (str(secret), str(spot.root / "elsewhere"), "../worlds/talk", "/etc/passwd"):
        answer = httpx.post(f"{web.url}/api/sessions", json={"world": world}, timeout=10)
        assert answer.status_code == 422, answer.text
        error = answer.json()["error"]
        assert error.startswith("no world named") and "talk" in error
        assert "password_of_the_db" not in error and "hunter2" not in error
    assert _total(web) == before
    # a listed world by the path of its folder or its world.yaml is that world
    for world in (str(spot.worlds / "talk"), str(spot.worlds / "talk" / "world.yaml")):
        answer = httpx.post(f"{web.url}/api/sessions", json={"world": world}, timeout=10)
        assert answer.status_code == 201, answer.text


def test_a_shipped_world_is_never_saved_through_the_checkouts_worlds_link(
    spot: Site, tmp_path: Path
) -> None:
    """In a checkout ./worlds is a link to the package's worlds: they are still shipped."""
    (tmp_path / "worlds").symlink_to(ROOT / "src" / "rolecall" / "worlds")
    path = ROOT / "src" / "rolecall" / "worlds" / "tutoring" / "world.yaml"
    before = path.read_bytes()
    web = start_server(spot, cwd=tmp_path)
    try:
        shown = httpx.get(f"{web.url}/w/tutoring/flow", timeout=10)
        assert shown.status_code == 200 and 'id="flow-form"' not in shown.text
        fields = {f"loop.{i}.{k}": "" for i in range(8) for k in ("to", "max", "until")}
        answer = httpx.post(
            f"{web.url}/w/tutoring/flow", data={**fields, "stop": "{contains: X}"}, timeout=10
        )
        assert answer.status_code == 403, answer.text
        assert "shipped with rolecall" in answer.text
        assert path.read_bytes() == before
    finally:
        path.write_bytes(before)
        stop_server(web)


# ------------------------------------------------------------ the flow form's file


def _shown_form(web: Server, world: str) -> dict[str, str]:
    page = httpx.get(f"{web.url}/w/{world}/flow", timeout=10).text
    fields = dict(re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)"', page))
    fields.update(re.findall(r'<input name="([^"]+)" size="\d+" value="([^"]*)"', page))
    chosen = re.findall(r'<select name="([^"]+)"[^>]*>(.*?)</select>', page, re.S)
    for name, options in chosen:
        picked = re.search(r'<option value="([^"]*)" selected>', options)
        fields[name] = picked.group(1) if picked else ""
    stop = re.search(r'<textarea id="stop-text" name="stop"[^>]*>(.*?)</textarea>', page, re.S)
    fields["stop"] = stop.group(1) if stop else ""
    return {k: v.replace("&#39;", "'").replace("&#34;", '"') for k, v in fields.items()}


def test_a_form_shown_before_world_yaml_changed_is_refused_not_written_over(
    web: Server, spot: Site
) -> None:
    path = spot.worlds / "edit" / "world.yaml"
    first = _shown_form(web, "edit")
    second = _shown_form(web, "edit")
    assert first["step.1"] == "s2" and first["loop.1.max"] == "2"
    try:
        # the first editor saves; the second editor's form is now stale
        saved = httpx.post(f"{web.url}/w/edit/flow", data={**first, "loop.1.max": "4"})
        assert saved.status_code == 303, saved.text
        late = httpx.post(f"{web.url}/w/edit/flow", data={**second, "loop.1.max": "9"})
        assert late.status_code == 409 and "changed since this form was shown" in late.text
        assert path.read_text() == EDIT_WORLD.replace("max: 2}", "max: 4}")
        # a step put in first on disk: the old form's row 1 is not that step's
        third = _shown_form(web, "edit")
        edited = path.read_text().replace(
            "  steps:\n", "  steps:\n    - id: s0\n      speaker: b\n", 1
        )
        path.write_text(edited)
        moved = httpx.post(
            f"{web.url}/w/edit/flow",
            data={**third, "loop.0.to": "s2", "loop.0.max": "3", "loop.1.max": "5"},
        )
        assert moved.status_code == 409, moved.text
        assert path.read_text() == edited
    finally:
        path.write_text(EDIT_WORLD)
    _no_traceback(web)
