"""Knowledge as a user meets it through `rolecall`: citations name the lines `grep -n`
names (form feeds and Unicode line separators inside a line shift nothing), a turn ranks
by the question it answers, no passage is listed with score 0.000, a file over the size
limit is refused by name, and an unchanged file is not even opened (counted with
inotify, not timed)."""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import re
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.test_run_cli import rolecall

# a first line holding every character str.splitlines() takes for a line end but grep
# -n, sed -n and editors do not: FF, VT, FS, GS, RS, NEL, LS, PS, and a lone CR
ODD_LINE = (
    "Keep the frame dry\x0c over the winter;\x0b wax\x1c it,\x1d polish\x1e it,"
    "\x85 cover\u2028 the\u2029 saddle\r and the bars."
)
GUIDE = (
    "# Winter storage\n"
    "\n"
    f"{ODD_LINE}\n"
    "Store it indoors, off the floor.\r\n"  # a Windows line end is one line end
    "\n"
    "# Chain care\n"
    "\n"
    "Lubricate the derailleur links every 300 km.\n"
    "Wipe off the excess afterwards.\n"
)


def world(folder: Path, guide: str = GUIDE, topic: str = "looking after a bicycle") -> Path:
    (folder / "docs").mkdir(exist_ok=True)
    (folder / "docs" / "guide.md").write_bytes(guide.encode())
    (folder / "world.yaml").write_text(
        f"name: shop\ntopic: {topic}\n"
        "knowledge:\n  guide:\n    paths: [docs/]\n"
        "roles:\n  - id: mechanic\n    knowledge: [guide]\n    model: offline\n"
    )
    return folder


def grep_n(pattern: str, path: Path) -> int:
    """The line `grep -n` gives for the one line matching ``pattern``."""
    found = subprocess.run(
        ["grep", "-n", "-a", pattern, str(path)], capture_output=True, text=True, check=True
    )
    (line,) = found.stdout.splitlines()
    return int(line.split(":")[0])


def test_citations_name_the_lines_grep_names(tmp_path: Path, data_dir: Path) -> None:
    folder = world(tmp_path)
    doc = folder / "docs" / "guide.md"
    found = rolecall("knowledge", "search", str(folder), "derailleur links", "--json")
    assert found.returncode == 0, found.stderr
    hit = json.loads(found.stdout)["passages"][0]
    assert hit["heading"] == "Chain care"
    assert (
        (hit["line_start"], hit["line_end"])
        == (
            grep_n("^# Chain care", doc),
            grep_n("excess afterwards", doc),
        )
        == (6, 9)
    )
    winter = json.loads(
        rolecall("knowledge", "search", str(folder), "polish saddle", "--json").stdout
    )["passages"][0]
    assert (winter["line_start"], winter["line_end"]) == (1, grep_n("off the floor", doc))
    assert winter["text"].split("\n")[2] == ODD_LINE  # the line whole, as in the file

    # the same numbers under a message that cites, in a run of the offline model
    (folder / "world.yaml").write_text(
        (folder / "world.yaml").read_text()
        + "  - id: rider\n    model: scripted\n    script: ['@mechanic derailleur links?']\n"
        "flow:\n  steps:\n    - id: ask\n      speaker: rider\n"
        "    - id: answer\n      speaker: mechanic\n"
    )
    run = rolecall("run", str(folder), env={"NO_COLOR": "1"})
    assert run.returncode == 0, run.stderr
    assert "  [k1] docs/guide.md:6-9\n" in run.stdout


def test_a_classic_mac_file_counts_its_carriage_returns(tmp_path: Path, data_dir: Path) -> None:
    folder = world(tmp_path, "# Tyres\r\rPump the tyres weekly.\r\r# Brakes\r\rCheck the pads.\r")
    found = rolecall("knowledge", "search", str(folder), "brake pads", "--json")
    hit = json.loads(found.stdout)["passages"][0]
    assert (hit["line_start"], hit["line_end"]) == (5, 7)  # as an editor numbers them


BIKE = """# Winter storage

Before the cold winter months, put the bicycle into dry storage. Keeping a bicycle
through the winter months in a cold, damp shed rusts it: storage indoors is best.

# Chain care

Oil the chain every few weeks, and after every ride in the rain.

# Tyres

Check the bicycle tyres weekly and pump them to the pressure on the sidewall.

# Brakes

Check that the bicycle brakes bite before every ride.
"""


def test_a_turn_ranks_by_the_question_as_knowledge_search_does(
    tmp_path: Path, data_dir: Path
) -> None:
    # the world's topic is all over the winter passage
    folder = world(tmp_path, BIKE, topic="keeping a bicycle through the cold winter months")
    (folder / "world.yaml").write_text(
        (folder / "world.yaml").read_text() + "  - id: rider\n    model: scripted\n"
        "    script: ['@mechanic how often should I oil the chain?']\n"
        "flow:\n  steps:\n    - id: ask\n      speaker: rider\n"
        "    - id: answer\n      speaker: mechanic\n"
    )
    searched = rolecall(
        "knowledge",
        "search",
        str(folder),
        "how often should I oil the chain?",
        "--role",
        "mechanic",
    )
    assert searched.returncode == 0, searched.stderr
    first = searched.stdout.splitlines()[0]
    assert first.startswith("[k1] docs/guide.md:6-8 (Chain care) · score ")
    run = rolecall("run", str(folder), "--json")
    assert run.returncode == 0, run.stderr
    events = [json.loads(line) for line in run.stdout.splitlines()]
    (knowledge,) = [e for e in events if e.get("type") == "knowledge"]
    cited = knowledge["passages"][0]
    assert (cited["path"], cited["line_start"], cited["line_end"]) == ("docs/guide.md", 6, 8)
    assert knowledge["query"] == "@mechanic how often should I oil the chain?"


def test_no_passage_is_listed_with_score_zero(tmp_path: Path, data_dir: Path) -> None:
    folder = world(tmp_path, BIKE)
    # "bicycle" is in three passages of four: BM25 weighs it ~0, so only the chain
    # passage (which holds "chain") is worth listing
    found = rolecall("knowledge", "search", str(folder), "bicycle chain", "--top-k", "4")
    assert found.returncode == 0, found.stderr
    scores = re.findall(r"· score (\d+\.\d+)", found.stdout)
    assert scores and all(float(s) > 0 for s in scores), found.stdout
    assert found.stdout.startswith("[k1] docs/guide.md:6-8 (Chain care)")
    assert "[k2]" not in found.stdout


def test_a_file_over_the_size_limit_is_refused_by_name(tmp_path: Path, data_dir: Path) -> None:
    folder = world(tmp_path)
    big = folder / "docs" / "manual.txt"
    with big.open("wb") as out:  # 21 MB, sparse: refused from its size, never read
        out.truncate(21_000_000)
    result = rolecall("knowledge", "index", str(folder))
    assert result.returncode == 2
    assert (
        f"{big}: 21.0 MB (21,000,000 bytes), larger than the 20 MB a file of knowledge.guide "
        "may have: split it, or raise knowledge.guide.max_file_mb"
    ) in result.stderr
    assert "Traceback" not in result.stderr
    chat = rolecall("chat", str(folder), stdin="hello\n")  # the same before a session
    assert chat.returncode == 2 and f"{big}: 21.0 MB" in chat.stderr

    # a collection may allow more, or less
    text = (folder / "world.yaml").read_text()
    big.unlink()
    (folder / "world.yaml").write_text(
        text.replace("[docs/]\n", "[docs/]\n    max_file_mb: 0.0002\n")
    )
    small = rolecall("knowledge", "index", str(folder))
    assert small.returncode == 2
    assert "guide.md: 0.0 MB (" in small.stderr and "than the 0.0002 MB a file" in small.stderr
    (folder / "world.yaml").write_text(text.replace("[docs/]\n", "[docs/]\n    max_file_mb: 1\n"))
    assert rolecall("knowledge", "index", str(folder)).returncode == 0


# ------------------------------------------------------------------ counting opens
IN_OPEN = 0x20
IN_NONBLOCK = os.O_NONBLOCK


class Opens:
    """Which files of a folder were opened (inotify IN_OPEN), by name."""

    def __init__(self, folder: Path) -> None:
        libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self.fd = libc.inotify_init1(IN_NONBLOCK)
        assert self.fd >= 0, os.strerror(ctypes.get_errno())
        watch = libc.inotify_add_watch(self.fd, str(folder).encode(), IN_OPEN)
        assert watch >= 0, os.strerror(ctypes.get_errno())

    def names(self) -> list[str]:
        out: list[str] = []
        while True:
            try:
                data = os.read(self.fd, 65536)
            except BlockingIOError:
                return out
            at = 0
            while at < len(data):
                _wd, mask, _cookie, size = struct.unpack_from("iIII", data, at)
                name = data[at + 16 : at + 16 + size].rstrip(b"\x00").decode()
                if mask & IN_OPEN and name:
                    out.append(name)
                at += 16 + size

    def close(self) -> None:
        os.close(self.fd)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="inotify is Linux's")
def test_an_unchanged_file_is_not_opened_to_be_searched(tmp_path: Path, data_dir: Path) -> None:
    folder = world(tmp_path)
    (folder / "docs" / "tyres.md").write_text("# Tyres\n\nPump the tyres weekly.\n")
    past = time.time() - 3600
    for name in ("guide.md", "tyres.md"):
        os.utime(folder / "docs" / name, (past, past))
    assert rolecall("knowledge", "index", str(folder)).returncode == 0
    opens = Opens(folder / "docs")
    try:
        searched = rolecall("knowledge", "search", str(folder), "derailleur")
        assert searched.returncode == 0, searched.stderr
        assert opens.names() == []  # a stat of each file, no read
        again = rolecall("knowledge", "index", str(folder))
        assert "indexed 0 files (0 bytes, 0 passages), 2 unchanged" in again.stdout
        assert opens.names() == []

        (folder / "docs" / "tyres.md").write_text("# Tyres\n\nPump the tubeless tyres weekly.\n")
        os.utime(folder / "docs" / "tyres.md", (past + 60, past + 60))
        assert opens.names() == ["tyres.md"]  # the test's own write
        changed = rolecall("knowledge", "search", str(folder), "tubeless")
        assert changed.stdout.startswith("[k1] docs/tyres.md:1-3 (Tyres)"), changed.stderr
        assert opens.names() == ["tyres.md"]  # the changed file only, once

        os.utime(folder / "docs" / "guide.md", (past + 120, past + 120))  # touched
        touched = rolecall("knowledge", "index", str(folder))
        assert "indexed 0 files (0 bytes, 0 passages), 2 unchanged" in touched.stdout
        assert opens.names() == ["guide.md"]  # read and hashed once: the same content
        assert rolecall("knowledge", "search", str(folder), "derailleur").returncode == 0
        assert opens.names() == []  # its new stat is kept
    finally:
        opens.close()
