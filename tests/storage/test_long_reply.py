"""A long streamed reply is stored as about its text (issue 13): one generation's chunks
are one compact row, and the `events` view (and the web view's event API) still gives
every chunk exactly as `--json` printed it."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path

from tests.cli.test_run_cli import rolecall

WORDS = 50_000


def _world(folder: Path, text: str) -> Path:
    world = folder / "long"
    world.mkdir(parents=True)
    (world / "world.yaml").write_text(
        json.dumps(
            {
                "name": "long",
                "topic": "t",
                "model": "scripted",
                # the text cycles through 97 words: reply hygiene would end it as a
                # repetition (real-models.md); this is about storing a long reply
                "settings": {"reply_hygiene": "off"},
                "roles": [
                    # a reply past the default cap of 1024 tokens (real-models.md)
                    {"id": "a", "script": [text], "max_reply_tokens": 1_000_000},
                    {"id": "b", "script": ["short one"]},
                ],
                "flow": {"steps": [{"id": "s1", "speaker": "a"}, {"id": "s2", "speaker": "b"}]},
            }
        ),
        encoding="utf-8",
    )
    return world


def test_a_long_reply_costs_about_its_text_and_every_chunk_reads_back(tmp_path: Path) -> None:
    text = " ".join(f"w{i % 97}" for i in range(WORDS))
    data = tmp_path / "data"
    done = rolecall("run", str(_world(tmp_path, text)), "--json", "--data-dir", str(data))
    assert done.returncode == 0, done.stderr
    printed = [json.loads(line) for line in done.stdout.splitlines()]
    size = (data / "rolecall.db").stat().st_size
    # every chunk an event object would be about 45 times the text; now about 15
    assert size < 20 * len(text.encode()), f"{size} bytes for {len(text)} of text"
    with closing(sqlite3.connect(data / "rolecall.db")) as db:
        stored = [json.loads(r) for (r,) in db.execute("SELECT record FROM events ORDER BY seq")]
    assert stored == printed  # the view gives back every event, chunks included, exactly
    deltas = [e["delta"] for e in stored if e["type"] == "chunk" and e["message_id"] == "m1"]
    assert len(deltas) == WORDS and "".join(deltas) == text
    shown = rolecall("sessions", "export", "last", "--format", "json", "--data-dir", str(data))
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [m["content"] for m in doc["messages"]] == [text, "short one"]
