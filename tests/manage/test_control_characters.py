"""Control characters in model text are shown, never obeyed: ``run``'s live display (on
a pseudo-terminal and piped), ``sessions show``, ``sessions list`` and the Markdown,
HTML and PDF exports, through real processes with a scripted model saying them."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.faults import Cli, only_session, write_net_guard

# what a hostile reply could hold: set the window title (OSC ... BEL), clear the screen
# (CSI 2J), a C1 CSI, NUL, backspaces, a carriage return that overwrites the line
HOSTILE = "safe\x1b]0;pwned\x07 \x1b[2Jwiped\x00 \x9b31mred\x08\x08 \rfake"
RAW = ("\x1b", "\x07", "\x00", "\x9b", "\x08", "\r")
SHOWN = "safe␛]0;pwned␇ ␛[2Jwiped␀ <U+009B>31mred␈␈ ␍fake"

WORLD = """\
name: hostile
topic: "topic \\e[31m here"
model: scripted
roles:
  - {id: a, script: ["%s"]}
  - {id: b, script: ["plain\\ttab\\nsecond line"]}
flow:
  steps: [{id: one, speaker: a}, {id: two, speaker: b}]
"""


def _yaml(text: str) -> str:
    """``text`` as the inside of a YAML double-quoted string."""
    out = []
    for ch in text:
        code = ord(ch)
        out.append(f"\\x{code:02x}" if code < 0x20 or 0x7F <= code <= 0x9F else ch)
    return "".join(out)


@pytest.fixture
def cli(tmp_path: Path) -> Iterator[Cli]:
    runner = Cli(home=tmp_path / "home", guard=write_net_guard(tmp_path / "guard"), cwd=tmp_path)
    yield runner
    assert runner.refused_connections() == []


@pytest.fixture
def world(tmp_path: Path) -> Path:
    folder = tmp_path / "hostile"
    folder.mkdir()
    (folder / "world.yaml").write_text(WORLD % _yaml(HOSTILE), encoding="utf-8")
    return folder


def assert_shown(text: str) -> None:
    for raw in RAW:
        assert raw not in text, f"{raw!r} reached the output: {text!r}"
    assert SHOWN in text, text


def on_a_terminal(cli: Cli, *args: str) -> str:
    """What ``rolecall ARGS`` writes to a pseudo-terminal (its live, streamed display)."""
    main, tty = pty.openpty()
    fcntl.ioctl(tty, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 200, 0, 0))  # no wrapping
    proc = subprocess.Popen(
        cli.argv(*args), cwd=cli.cwd, env=cli.env(), stdin=subprocess.DEVNULL,
        stdout=tty, stderr=tty,
    )  # fmt: skip
    os.close(tty)
    out = bytearray()
    try:
        while True:
            ready, _, _ = select.select([main], [], [], 30)
            assert ready, f"no output for 30 s: {bytes(out)!r}"
            try:
                chunk = os.read(main, 65536)
            except OSError:  # EIO: the process closed the terminal
                break
            if not chunk:
                break
            out += chunk
    finally:
        os.close(main)
        assert proc.wait(timeout=30) == 0, bytes(out)
    # the terminal turns the display's newlines into CR LF (onlcr): those are its own
    return out.decode("utf-8").replace("\r\n", "\n")


def test_the_live_display_shows_control_characters(cli: Cli, world: Path) -> None:
    piped = cli.run("run", str(world))
    assert piped.returncode == 0, piped.stderr
    assert_shown(piped.stdout)
    assert "plain\ttab\nsecond line" in piped.stdout  # tabs and newlines are kept
    live = on_a_terminal(cli, "run", str(world), "--quiet")
    assert_shown(live)
    assert "plain\ttab" in live


def test_sessions_show_and_the_exports_show_control_characters(
    cli: Cli, world: Path, tmp_path: Path
) -> None:
    assert cli.run("run", str(world), "--json").returncode == 0
    sid = only_session(cli.home)
    show = cli.run("sessions", "show", sid)
    assert show.returncode == 0, show.stderr
    assert_shown(show.stdout)
    assert "  plain\ttab\n  second line" in show.stdout
    assert "topic: topic ␛[31m here" in show.stdout
    memory = cli.run("memory", "show", sid, "b")  # b's memory holds a's message
    assert memory.returncode == 0, memory.stderr
    assert_shown(memory.stdout)
    listed = cli.run("sessions", "list")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "topic ␛[31m here" in listed.stdout
    md = cli.run("sessions", "export", sid, "--format", "md")
    assert md.returncode == 0, md.stderr
    for raw in RAW:
        assert raw not in md.stdout
    assert "␛\\]0;pwned␇" in md.stdout and "wiped␀" in md.stdout  # ] is escaped
    page = tmp_path / "s.html"
    html = cli.run("sessions", "export", sid, "--format", "html", "--out", str(page))
    assert html.returncode == 0, html.stderr
    text = page.read_text(encoding="utf-8")
    assert "\x1b" not in text and "␛]0;pwned␇" in text
