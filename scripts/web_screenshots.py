"""Take docs/web.md's screenshots: every page of the web view at 1280 and 390 px.

Usage (from the repository root; needs the dev dependencies, Playwright and Pillow, and
Debian's chromium)::

    .venv/bin/python scripts/web_screenshots.py [--out docs/img/web]

It makes a scratch folder, stores a few sessions with the offline model (`rolecall run`),
starts `rolecall web` on a free loopback port and saves ``PAGE-1280.png`` and
``PAGE-390.png`` for each page (the top of the page, as a screen shows it; a paused
fork's short page whole, its message box and flag below the thread), in 128
colours to keep them small.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
WIDTHS = {1280: 860, 390: 844}  # width: height of the screen shown
WHOLE = {"session-fork"}  # pages shown whole, not only their top


def rolecall(*args: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return done.stdout


def stored(world: str, cwd: Path, data: Path, *extra: str) -> str:
    out = rolecall("run", world, "--data-dir", str(data), "--json", *extra, cwd=cwd)
    return str(json.loads(out.splitlines()[0])["session_id"])


def fork(sid: str, at: str, cwd: Path, data: Path, *extra: str) -> str:
    out = rolecall(
        "sessions", "fork", sid, "--at", at, "--data-dir", str(data), "-q", *extra, cwd=cwd
    )
    return out.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "web")
    args = parser.parse_args()
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    import httpx
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="rolecall-shots-") as scratch:
        root = Path(scratch)
        data = root / "data"
        (root / "worlds").mkdir()
        shutil.copytree(
            ROOT / "src" / "rolecall" / "worlds" / "tutoring", root / "worlds" / "tutoring"
        )
        ids = {
            "tutoring": stored("tutoring", root, data, "--model", "offline"),
            "debate": stored("debate", root, data, "--model", "offline"),
        }
        # a fork of the tutoring at the learner's question, edited, and a fork of that fork
        edit = "Question 1: is it the tilt of the Earth's axis that makes summer warmer?"
        ids["fork"] = fork(ids["tutoring"], "m2", root, data, "--edit", edit)
        ids["fork2"] = fork(ids["fork"], "m1", root, data)
        # a role of one's own in the role library, beside the built-in ones
        mine = ("roles", "create", "my-teacher", "--from", "teacher", "--name", "Ms. Rivera")
        rolecall(*mine, "--data-dir", str(data), cwd=root)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "rolecall.cli.main",
                "web",
                "--port",
                "0",
                "--data-dir",
                str(data),
            ],
            cwd=root,
            env={**os.environ, "ROLECALL_STREAM_DELAY": "0.15"},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stderr is not None
            url = ""
            while not url:
                line = server.stderr.readline()
                if not line:
                    raise SystemExit("rolecall web did not start")
                found = re.search(r"serving on (http://\S+)", line)
                url = found.group(1).split("?")[0].rstrip("/") if found else ""
            # a chat: the panel answers a question (its page keeps the message box)
            started = httpx.post(url + "/api/sessions", json={"world": "panel"}, timeout=30)
            ids["panel"] = started.json()["session_id"]
            said = {"text": "What should a city do about heat waves?"}
            httpx.post(f"{url}/api/sessions/{ids['panel']}/say", json=said, timeout=30)
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                doc = httpx.get(f"{url}/api/sessions/{ids['panel']}", timeout=30).json()
                if len(doc["messages"]) >= 5 and not doc["state"]["pending"]:
                    break
                time.sleep(0.5)
            # a flag set on the fork (the session page's "Set a flag")
            flagged = {"name": "reviewed"}
            httpx.post(f"{url}/api/sessions/{ids['fork']}/flag", json=flagged, timeout=30)
            pages = {
                "sessions": "/",
                "search": "/?q=tilt",
                "session-chat": f"/s/{ids['panel']}",
                "session": f"/s/{ids['tutoring']}",
                "session-debate": f"/s/{ids['debate']}",
                "session-fork": f"/s/{ids['fork']}",
                "forks": f"/s/{ids['fork']}/forks",
                "session-flow": f"/s/{ids['tutoring']}/flow",
                "world-flow-editor": "/w/tutoring/flow",
                "start": "/start",
                "roles": "/roles",
                "roles-search": "/roles?q=analogy",
                "not-found": "/s/20990101-000000-abcdef",
            }
            with sync_playwright() as p:
                browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
                for width, height in WIDTHS.items():
                    context = browser.new_context(viewport={"width": width, "height": height})
                    tab = context.new_page()
                    for name, path in pages.items():
                        tab.goto(url + path)
                        whole = name in WHOLE  # a short page, its controls below the thread
                        tab.screenshot(path=str(out / f"{name}-{width}.png"), full_page=whole)
                    # a live page: a session started from /start, mid-message
                    tab.goto(url + "/start")
                    tab.select_option("select[name=world]", "debate")
                    tab.fill("#start-world input[name=model]", "offline")
                    tab.click("form.start button[type=submit]")
                    tab.wait_for_url("**/s/*")
                    tab.locator("#m2.streaming").wait_for(timeout=30_000)
                    time.sleep(1.5)
                    tab.screenshot(path=str(out / f"live-{width}.png"))
                    context.close()
                browser.close()
        finally:
            server.terminate()
            server.wait(timeout=10)
            if server.stderr is not None:
                server.stderr.close()
    from PIL import Image  # Pillow comes with fpdf2 (a dev dependency, the PDF export)

    for shot in sorted(out.glob("*.png")):
        with Image.open(shot) as image:  # 128 colours: a page's screenshot, a third the size
            small = image.convert("RGB").quantize(colors=128)
        small.save(shot, optimize=True)
        print(f"{shot.relative_to(ROOT) if shot.is_relative_to(ROOT) else shot}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
