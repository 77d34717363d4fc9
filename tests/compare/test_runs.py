"""The pure core of comparing runs, and the scores table (docs/compare.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rolecall.compare.runs import first_difference, grouped, render_diff, word_diff
from rolecall.session.state import TranscriptMessage
from rolecall.storage.scores import ScoreTable
from rolecall.storage.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 7, tzinfo=UTC)


def msg(mid: str, sender: str, content: str) -> TranscriptMessage:
    return TranscriptMessage(id=mid, sender=sender, kind="agent", content=content, ts=NOW)


def test_a_word_diff_keeps_removes_and_adds_words_in_order() -> None:
    ops = word_diff("the cat sat  on the mat", "the dog sat on the mat today")
    assert ops == [
        ("same", "the"),
        ("removed", "cat"),
        ("added", "dog"),
        ("same", "sat on the mat"),
        ("added", "today"),
    ]
    assert render_diff(ops) == "the [-cat-] {+dog+} sat on the mat {+today+}"


def test_the_first_difference_names_what_differs() -> None:
    a = [msg("m1", "pro", "cars out"), msg("m2", "con", "no")]
    assert first_difference("a", a, "b", list(a)) is None
    by_sender = first_difference("a", a, "b", [a[0], msg("m2", "moderator", "no")])
    assert by_sender is not None and (by_sender.index, by_sender.what) == (1, "sender")
    by_text = first_difference("a", a, "b", [msg("m1", "pro", "cars in")])
    assert by_text is not None and by_text.what == "content"
    assert by_text.record()["word_diff_text"] == "cars [-out-] {+in+}"
    shorter = first_difference("a", a, "b", a[:1])
    assert shorter is not None and (shorter.index, shorter.what) == (1, "length")
    assert shorter.b.message_id is None and shorter.a.message_id == "m2"


async def test_scorings_are_numbered_per_session_and_go_with_it(tmp_path: Path) -> None:
    from tests.cli.test_run_cli import rolecall

    data = tmp_path / "data"
    ran = rolecall("run", "classroom", "--max-turns", "1", "--data-dir", str(data), "-q")
    assert ran.returncode == 0, ran.stderr
    async with SqliteStore.in_data_dir(data) as store:
        (row,) = await store.list_sessions()
        table = ScoreTable(store)
        for value in (3.0, 4.5):
            await table.add(
                row.id,
                judge="j",
                model="offline",
                scored_at=NOW.isoformat(),
                scores={"score": value},
                comment="",
            )
        found = await table.of([row.id, "20990101-000000-abcdef"])
        assert [(s.number, s.scores) for s in found[row.id]] == [
            (1, {"score": 3.0}),
            (2, {"score": 4.5}),
        ]
        assert await store.delete(row.id) == 1
        assert await table.of([row.id]) == {}


def test_batch_runs_are_grouped_by_their_values() -> None:
    from rolecall.compare.runs import RunFigures

    def run(sid: str, model: str) -> RunFigures:
        return RunFigures(
            sid,
            "w",
            (model,),
            1,
            1,
            1,
            0.0,
            0.0,
            "finished",
            "flow_end",
            values=(("model", model),),
        )

    groups = grouped([run("a", "x"), run("b", "y"), run("c", "x")])
    assert [(v, [r.session_id for r in rs]) for v, rs in groups] == [
        ({"model": "x"}, ["a", "c"]),
        ({"model": "y"}, ["b"]),
    ]
