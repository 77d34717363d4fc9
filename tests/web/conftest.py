"""The web view as a person meets it: `rolecall web` started as a real process on a free
loopback port, stored sessions made by real `rolecall run`s, and Debian's chromium driven
by Playwright. Every page test keeps a screenshot under its tmp dir."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
SERVING = re.compile(r"serving on (http://\S+)")

HOSTILE_WORLD = """\
name: hostile
title: A hostile transcript
topic: markup in messages
model: scripted
roles:
  - id: mallory
    script:
      - "Look <script>window.pwned = 1</script> and [click me](javascript:window.pwned=2) **bold**"
  - id: bob
    script:
      - "I answer {target}: see [the docs](https://example.org/docs)."
flow:
  steps:
    - {id: one, speaker: mallory, reply_to: none}
    - {id: two, speaker: bob, reply_to: {role: mallory}}
"""

SLOW_WORLD = """\
name: slow
title: A slow scripted exchange
topic: pacing
model: scripted
roles:
  - id: alice
    script: ["one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen"]
  - id: bob
    script: ["bob answers {target} with a few words of his own, slowly"]
flow:
  steps:
    - {id: a, speaker: alice, reply_to: none}
    - {id: b, speaker: bob}
    - {id: c, speaker: alice}
"""

CHAT_WORLD = """\
name: talk
title: A chat to talk to
topic: anything
model: scripted
roles:
  - id: alice
    script: ["alice replies to {target}: noted"]
  - id: bob
    script: ["bob replies to {target}: agreed"]
"""


def rolecall(
    *args: str,
    cwd: Path,
    env: dict[str, str] | None = None,
    timeout: float = 60,
    stdin: str | None = None,
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
        input=stdin,
        check=False,
    )


@dataclass
class Site:
    """A data dir with stored sessions and a folder of editable worlds."""

    root: Path
    data: Path
    ids: dict[str, str]  # world name -> a stored session id

    @property
    def worlds(self) -> Path:
        return self.root / "worlds"


def streaming_so_far(page: Any, words: int = 3) -> tuple[str, str]:
    """Wait for a message streaming with at least `words` words; its id and its text so far.

    Both are read from the one element at once: a locator is resolved again for each read,
    and the next message may be streaming by then.
    """
    found = page.wait_for_function(
        "(words) => { const el = document.querySelector('article.streaming .live-text');"
        " return el && el.textContent.trim().split(' ').length >= words"
        " && [el.closest('article').id, el.textContent.trim()]; }",
        arg=words,
    ).json_value()
    return str(found[0]), str(found[1])


def _stored_id(result: subprocess.CompletedProcess[str]) -> str:
    first = json.loads(result.stdout.splitlines()[0])
    return str(first["session_id"])


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Site:
    root = tmp_path_factory.mktemp("site")
    data = root / "data"
    worlds = root / "worlds"
    for name, text in (("hostile", HOSTILE_WORLD), ("slow", SLOW_WORLD), ("talk", CHAT_WORLD)):
        (worlds / name).mkdir(parents=True)
        (worlds / name / "world.yaml").write_text(text)
    shutil.copytree(ROOT / "worlds" / "tutoring", worlds / "tutoring")
    ids = {}
    for name in ("hostile", "tutoring", "slow"):
        done = rolecall("run", name, "--data-dir", str(data), "--json", cwd=root)
        assert done.returncode == 0, done.stderr
        ids[name] = _stored_id(done)
    return Site(root=root, data=data, ids=ids)


@dataclass
class Server:
    url: str
    process: subprocess.Popen[str]
    stderr: list[str]


def start_server(
    site: Site, *extra: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> Server:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "rolecall.cli.main",
            "web",
            "--port",
            "0",
            "--data-dir",
            str(site.data),
            *extra,
        ],
        cwd=cwd or site.root,
        env={**os.environ, **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    deadline = time.monotonic() + 30
    seen = []
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        seen.append(line)
        found = SERVING.search(line)
        if found:
            # keep reading stderr, so the server never blocks on a full pipe
            threading.Thread(target=_drain, args=(process, seen), daemon=True).start()
            url = found.group(1).split("?")[0].rstrip("/")
            return Server(url=url, process=process, stderr=seen)
    process.kill()
    process.wait()
    process.stderr.close()
    raise AssertionError("rolecall web did not start: " + "".join(seen))


def _drain(process: subprocess.Popen[str], into: list[str]) -> None:
    assert process.stderr is not None
    for line in process.stderr:
        into.append(line)


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    assert server.process.stderr is not None
    server.process.stderr.close()


@pytest.fixture(scope="module")
def server(site: Site) -> Iterator[Server]:
    running = start_server(site, env={"ROLECALL_STREAM_DELAY": "0.05"})
    yield running
    stop_server(running)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"chromium is not installed at {CHROMIUM} (scripts/test installs it)")
    with sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        yield launched
        launched.close()


FAILED_CALL = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.when == "call":
        item.stash[FAILED_CALL] = report.failed
    return report


@pytest.fixture
def page(browser: Any, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    # Playwright's wait_for_function evaluates its predicate string in the page, which the
    # pages' Content-Security-Policy (no eval) refuses: test_guard.py checks the pages
    # under their policy, in a context of its own
    context = browser.new_context(viewport={"width": 1200, "height": 900}, bypass_csp=True)
    tab = context.new_page()
    tab.set_default_timeout(15_000)
    yield tab
    if request.node.stash.get(FAILED_CALL, True):  # what the page showed when it failed
        tab.screenshot(path=str(tmp_path / f"{request.node.name}.png"), full_page=True)
    context.close()
