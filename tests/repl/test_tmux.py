"""The real REPL on a real terminal: tmux runs it, send-keys types, capture-pane reads.

Each test starts its own tmux server (a private socket) with ``ROLECALL_HOME`` in a
temporary directory, polls the screen against a deadline, and kills the server at the
end whatever happened.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.conftest import ROOT

TMUX = shutil.which("tmux")
pytestmark = pytest.mark.skipif(
    TMUX is None, reason="tmux is not on PATH: the REPL needs a terminal"
)


class Terminal:
    """One REPL in a detached tmux session of 120x40."""

    def __init__(self, home: Path, name: str) -> None:
        self.home = home
        # a private server on a short socket path (unix sockets allow ~100 characters)
        self.folder = Path(tempfile.mkdtemp(prefix="rc-tmux-"))
        self.socket = str(self.folder / "sock")
        self.target = name

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        assert TMUX is not None
        return subprocess.run(
            [TMUX, "-S", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )

    def tmux(self, *args: str) -> str:
        return self.run(*args).stdout

    def start(self, *argv: str, env: dict[str, str] | None = None) -> None:
        variables = {"ROLECALL_HOME": str(self.home), "LANG": "C.UTF-8", **(env or {})}
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in variables.items())
        # the real commands: `rolecall chat WORLD ...`, `rolecall resume ID`,
        # `rolecall run ...` and `rolecall batch ...` on a terminal
        words = list(argv) if argv and argv[0] in ("resume", "batch", "run") else ["chat", *argv]
        command = " ".join(
            shlex.quote(a) for a in (sys.executable, "-m", "rolecall.cli.main", *words)
        )
        script = f"cd {shlex.quote(str(ROOT))} && env -u ROLECALL_MODEL {exports} {command}; echo EXIT=$?; sleep 60"
        for _ in range(3):  # a server that is still starting can refuse the first client
            started = self.run(
                "new-session", "-d", "-s", self.target, "-x", "120", "-y", "40", script
            )
            if started.returncode == 0:
                return
            time.sleep(0.2)
        raise AssertionError(f"tmux new-session failed: {started.stderr}")

    def type(self, text: str) -> None:
        self.tmux("send-keys", "-t", self.target, "-l", text)

    def key(self, *keys: str) -> None:
        self.tmux("send-keys", "-t", self.target, *keys)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-J", "-t", self.target, "-S", "-200")

    def wait_for(self, check: str | Callable[[str], bool], timeout: float = 15.0) -> str:
        deadline = time.monotonic() + timeout
        while True:
            screen = self.screen()
            if (check in screen) if isinstance(check, str) else check(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {check!r}; the screen:\n{screen}")
            time.sleep(0.05)

    def ready(self) -> str:
        """The first prompt is drawn (the toolbar ends with /help)."""
        return self.wait_for(lambda s: "› " in s and "/help" in toolbar(s))

    def close(self) -> None:
        self.tmux("kill-server")
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def terminal(tmp_path: Path) -> Iterator[Callable[[], Terminal]]:
    made: list[Terminal] = []

    def make() -> Terminal:
        t = Terminal(tmp_path / "home", f"t{len(made)}")
        made.append(t)
        return t

    try:
        yield make
    finally:
        for t in made:
            t.close()


def stored(home: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(home / "rolecall.db") as db:
        rows = db.execute("SELECT id, state, state_json FROM sessions").fetchall()
    return [(sid, state, json.loads(body)["pause_reason"]) for sid, state, body in rows]


def toolbar(screen: str) -> str:
    """The bottom toolbar: the last line drawn (empty while the prompt is being redrawn)."""
    lines = screen.rstrip("\n").splitlines()
    return lines[-1] if lines else ""


def flat(screen: str) -> str:
    """The screen's words on one line: a notice wider than the terminal is broken between
    words (never inside an id), so a test reads it whatever the width."""
    return " ".join(screen.split())


def last_prompt_line(screen: str) -> int:
    lines = screen.splitlines()
    return max(i for i, line in enumerate(lines) if line.startswith("›"))


def test_completion_streamed_reply_above_the_prompt_and_ctrl_d(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("worlds/panel")
    t.ready()
    t.type("@eco")
    t.wait_for("Dr. Amara Osei")  # the completion menu, with the role's name
    t.key("Tab")
    t.wait_for("› @ecologist")
    t.type(" where should a city start?")
    t.key("Enter")
    screen = t.wait_for(  # a toolbar drawn after the reply (not one being redrawn)
        lambda s: (
            "ecologist → human" in s
            and "  ↑" in s
            and "↑0 ↓0" not in toolbar(s)
            and toolbar(s).startswith(" panel │ ")
        )
    )
    lines = screen.splitlines()
    # the header says which message the reply answers (issue 16)
    header = lines.index('ecologist → human ↩ m1 "@ecologist where should a city start?"')
    assert lines[header - 1] == "› @ecologist where should a city start?"
    assert lines[header + 1].startswith("│ ")
    assert header < last_prompt_line(screen)  # the reply is printed above the prompt
    assert toolbar(screen).startswith(" panel │ ")  # world, session, state, tokens
    t.key("C-d")
    screen = t.wait_for("EXIT=0")
    ((sid, state, reason),) = stored(t.home)
    assert (state, reason) == ("paused", "quit")
    assert f"rolecall resume {sid}" in screen

    # coming back: the REPL over the stored session, where it stopped
    again = terminal()
    again.start("resume", sid)
    screen = again.ready()
    assert f"session {sid}: 2 messages, paused (quit)" in screen
    assert "ecologist → human" in screen  # the last message, for context
    again.type("@planner and you?")
    again.key("Enter")
    again.wait_for(lambda s: "planner → human" in s and "  ↑" in s and "ready" in toolbar(s))
    again.key("C-d")
    again.wait_for("EXIT=0")
    with sqlite3.connect(t.home / "rolecall.db") as db:
        senders = [json.loads(b)["sender"] for (b,) in db.execute("SELECT body FROM messages")]
    assert senders == ["human", "ecologist", "human", "planner"]
    assert stored(t.home) == [(sid, "paused", "quit")]


def test_next_in_step_mode_on_a_flow_world(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("worlds/tutoring", "--mode", "step")
    t.ready()
    t.type("/next")
    t.key("Enter")
    t.wait_for("tutor [step intro]")
    t.wait_for(lambda s: "step ask" in toolbar(s))  # the toolbar shows the next step
    t.key("Enter")  # an empty line in step mode runs the next turn
    t.wait_for("learner → tutor [step ask]")
    t.type("/flow")
    t.key("Enter")
    screen = t.wait_for(lambda s: "▶ explain" in s and "intro×1 ask×1" in toolbar(s))
    assert "✓ intro" in screen and "✓ ask" in screen
    assert "tutor → learner" not in screen  # nothing ran by itself
    t.key("C-d")
    t.wait_for("EXIT=0")
    ((_, state, reason),) = stored(t.home)
    assert (state, reason) == ("paused", "quit")


def test_ctrl_c_cancels_a_generation_and_resume_continues(terminal: Callable[[], Terminal]) -> None:
    t = terminal()
    t.start("worlds/panel", "--stream", "full", env={"ROLECALL_STREAM_DELAY": "0.05"})
    t.ready()
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    t.wait_for(lambda s: "historian → human" in s and "│ " in s)
    t.key("C-c")
    screen = t.wait_for("kept as an incomplete draft")
    # the draft has an id of its own: m2 is the message the resumed reply becomes
    assert "historian's reply is kept as an incomplete draft (d1)" in screen
    assert "⏸ paused (cancelled)" in t.wait_for("paused (cancelled)")
    assert "  ↑" not in screen  # the reply never completed
    t.type("/resume")
    t.key("Enter")
    t.wait_for(lambda s: s.count("historian → human") == 2 and "  ↑" in s, timeout=30)
    t.wait_for(lambda s: "│ ready │" in toolbar(s))  # the run is over
    t.type("/history")
    t.key("Enter")
    t.wait_for("1 incomplete draft outside the history")
    t.key("C-c")  # nothing runs now: armed ...
    t.wait_for("press Ctrl-C again to quit")
    t.key("C-c")  # ... and quit
    t.wait_for("EXIT=0")
    ((_, state, reason),) = stored(t.home)
    assert (state, reason) == ("paused", "quit")
    with sqlite3.connect(t.home / "rolecall.db") as db:
        drafts = db.execute("SELECT body FROM drafts").fetchall()
        messages = [json.loads(b)["sender"] for (b,) in db.execute("SELECT body FROM messages")]
    assert len(drafts) == 1 and json.loads(drafts[0][0])["reason"] == "cancelled"
    assert json.loads(drafts[0][0])["id"] == "d1"
    assert messages == ["human", "historian"]
    # every rendering names the draft d1 and m2 the reply that completed
    ((sid, _, _),) = stored(t.home)
    shown = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", "sessions", "show", sid],
        env={**os.environ, "ROLECALL_HOME": str(t.home)},
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert "[d1] historian (cancelled)" in shown
    assert shown.count("[m2]") == 1


def test_the_toolbar_shows_the_sessions_cost(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    world = tmp_path / "priced.yaml"
    world.write_text(
        "name: priced\nmodel: scripted\nroles:\n"
        "  - id: seller\n    script: ['a fair price for {topic}']\n"
        "    price: {input_per_mtok: 1000, output_per_mtok: 1000}\n",
        encoding="utf-8",
    )
    t = terminal()
    t.start(str(world))
    t.ready()
    assert "$" not in toolbar(t.screen())  # nothing spent yet
    t.type("@seller how much?")
    t.key("Enter")
    screen = t.wait_for(lambda s: "seller → human" in s and " · $0.0" in toolbar(s))
    ((sid, _, _),) = stored(t.home)
    with sqlite3.connect(t.home / "rolecall.db") as db:
        (cost,) = db.execute(
            "SELECT SUM(json_extract(body, '$.cost_usd')) FROM messages WHERE session_id = ?",
            (sid,),
        ).fetchone()
    from rolecall.money import money

    assert f" · {money(cost)} │" in toolbar(screen)


def test_a_streaming_reply_is_a_one_line_preview_then_printed_whole(
    terminal: Callable[[], Terminal],
) -> None:
    """Preview mode, the default (issue 16): while a reply streams the scrollback holds
    none of it, one line shows the speaker, its ↓ count and the latest words, and what
    the user types stays on the prompt; then the reply is printed once, whole."""
    t = terminal()
    t.start("worlds/panel", env={"ROLECALL_STREAM_DELAY": "0.05"})
    t.ready()
    t.type("@historian what happened in Chicago in 1995?")
    t.key("Enter")
    counts = []
    for _ in range(2):  # the preview updates in place: its ↓ count grows
        screen = t.wait_for(
            lambda s: (
                re.search(r"historian · [\d.]+s · ↓(\d+) ", s) is not None
                and (not counts or int(re.findall(r"↓(\d+) ", s)[-1]) > counts[-1])
            )
        )
        printed = screen.splitlines()
        assert not any(line.startswith(("historian → human", "│ ")) for line in printed)
        counts.append(int(re.findall(r"↓(\d+) ", screen)[-1]))
    t.type("typed meanwhile")
    # the reply printed whole, and the prompt drawn again below it with what was typed
    screen = t.wait_for(
        lambda s: "historian → human" in s and "  ↑" in s and "› typed meanwhile" in s,
        timeout=30,
    )
    lines = screen.splitlines()
    header = next(i for i, line in enumerate(lines) if line.startswith("historian → human"))
    assert lines[header].endswith('↩ m1 "@historian what happened in Chicago in…"')
    body = []
    for line in lines[header + 1 :]:
        if not line.startswith("│ "):
            break
        body.append(line)
    assert body and lines[header + 1 + len(body)].startswith("  ↑")  # whole, then tokens
    assert screen.count("historian → human") == 1
    assert "› typed meanwhile" in screen  # the input was left alone
    t.key("C-u")
    t.type("/stream full")
    t.key("Enter")
    t.wait_for("replies stream as: full (every line of a reply as it streams)")
    t.key("C-d")
    t.wait_for("EXIT=0")


def test_run_in_step_mode_on_a_terminal_names_the_world_and_session(
    terminal: Callable[[], Terminal],
) -> None:
    t = terminal()
    t.start("run", "worlds/tutoring", "--mode", "step")
    t.wait_for("[Enter] next turn")
    t.key("C-d")
    screen = t.wait_for("EXIT=0")
    ((sid, state, _),) = stored(t.home)
    assert f"rolecall · tutoring — A tutoring session on the seasons · session {sid}" in screen
    assert state == "paused"


def test_flow_breaks_long_lines_between_words(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    world = tmp_path / "long"
    world.mkdir()
    words = " ".join(f"word{i}" for i in range(40))
    (world / "world.yaml").write_text(
        f"""\
name: long
topic: t
model: scripted
roles: [{{id: a, script: ["hello"]}}, {{id: b, script: ["hi"]}}]
flow:
  steps:
    - {{id: one, speaker: a}}
    - {{id: two, speaker: b, loop: {{to: one, max: 3, until: {{contains: "{words}"}}}}}}
""",
        encoding="utf-8",
    )
    t = terminal()
    t.start(str(world), "--mode", "step")
    t.ready()
    t.type("/flow")
    t.key("Enter")
    t.wait_for("state created")
    # the screen as drawn, rows not joined (-J would join what the terminal wrapped)
    rows = t.tmux("capture-pane", "-p", "-t", t.target, "-S", "-200")
    seen = [word.strip("{}") for word in rows.split()]
    for i in range(40):  # each word whole on its row: none cut at the terminal's edge
        assert f"word{i}" in seen, (i, rows)
    t.key("C-d")
    t.wait_for("EXIT=0")


def test_a_chat_on_the_lean_client_never_loads_litellm(
    terminal: Callable[[], Terminal], tmp_path: Path
) -> None:
    """The REPL loads litellm ahead of a world's first reply (its import takes seconds),
    but not for ``settings.client: http``, which never uses it: loading it anyway took the
    CPU from the prompt and the first replies."""
    from tests.llm.openai_server import OpenAITestServer, Reply

    hook = tmp_path / "hook"
    hook.mkdir()
    seen = tmp_path / "litellm-loaded"
    (hook / "sitecustomize.py").write_text(
        "import atexit, sys\n"
        f"atexit.register(lambda: open({str(seen)!r}, 'w').write(str('litellm' in sys.modules)))\n",
        encoding="utf-8",
    )
    with OpenAITestServer() as server:
        server.queue(Reply("Hello from the lean client."))
        world = tmp_path / "lean.yaml"
        world.write_text(
            f"name: lean\nmodel: openai/gpt-4o-mini\n"
            f"settings: {{client: http, api_base: '{server.base_url}', api_key_env: LEAN_KEY}}\n"
            "roles: [{id: a}]\n",
            encoding="utf-8",
        )
        t = terminal()
        t.start(str(world), env={"PYTHONPATH": str(hook), "LEAN_KEY": "sk-test"})
        t.ready()
        t.type("@a hello")
        t.key("Enter")
        t.wait_for("Hello from the lean client.")
        time.sleep(1)  # a load started with the session would be under way by now
        t.type("/quit")
        t.key("Enter")
        t.wait_for("EXIT=0")
    assert seen.read_text(encoding="utf-8") == "False"
