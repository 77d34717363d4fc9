"""``rolecall batch`` end to end: real processes, the loopback OpenAI-compatible server.

A failing run is recorded and never stops the others; ``--resume`` finishes the batch
from the last stored turn of each unfinished run, regenerating nothing (counted at the
server); ``--json`` streams every run's events then one summary line; bad ``--vary``
input is a usage error before anything runs.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from tests.faults import Cli
from tests.llm.openai_server import Behaviour, OpenAITestServer, Reply, Status

TOPICS = ("alpha", "beta", "gamma")


def topic_of(body: dict[str, Any]) -> str:
    text = json.dumps(body.get("messages"))
    found = [t for t in TOPICS if f"topic {t}" in text]
    assert len(found) == 1, f"a request naming no single topic: {text[:300]}"
    return found[0]


class ByTopic:
    """The server's behaviour queue, choosing by the topic of the run a request is for."""

    def __init__(self, records: list[Any], faults: dict[str, list[Behaviour]]) -> None:
        self._records = records
        self.faults = faults

    def __bool__(self) -> bool:
        return True

    def popleft(self) -> Behaviour:
        topic = topic_of(self._records[-1].body)
        queued = self.faults.get(topic)
        return queued.pop(0) if queued else Reply(f"On {topic}, a fine reply.")

    def clear(self) -> None:
        self.faults.clear()


@pytest.fixture
def server() -> Iterator[OpenAITestServer]:
    with OpenAITestServer() as srv:
        yield srv


def provider_world(folder: Path, server: OpenAITestServer) -> Path:
    """A world of the loopback provider. Its roles use rolecall's lean HTTP client: what
    is checked here is the batch, and each process importing litellm would add about ten
    seconds (litellm's own path is tests/faults/test_provider_faults.py)."""
    world = folder / "panel"
    world.mkdir()
    (world / "world.yaml").write_text(
        f"""\
name: panel
topic: topic alpha
model: openai/test-model
settings: {{retries: 0, timeout: 5, client: http, api_base: "{server.base_url}", api_key_env: BATCH_KEY}}
roles: [{{id: asker}}, {{id: answerer}}]
flow:
  steps: [{{id: ask, speaker: asker}}, {{id: answer, speaker: answerer}}]
""",
        encoding="utf-8",
    )
    return world


def scripted_world(folder: Path) -> Path:
    world = folder / "duo"
    world.mkdir()
    (world / "world.yaml").write_text(
        """\
name: duo
topic: t
model: scripted
roles: [{id: a, script: ["a says {n}"]}, {id: b, script: ["b says {n}"]}]
flow:
  steps: [{id: one, speaker: a}, {id: two, speaker: b}, {id: three, speaker: a}]
""",
        encoding="utf-8",
    )
    return world


def rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines()]


def batch_sessions(home: Path, name: str) -> dict[int, tuple[str, str]]:
    with closing(sqlite3.connect(home / "rolecall.db")) as db:
        found = db.execute(
            "SELECT r.run, s.id, s.state FROM batch_runs r JOIN sessions s ON s.id = r.session_id "
            "WHERE r.batch = ?",
            (name,),
        ).fetchall()
    return {run: (sid, state) for run, sid, state in found}


def test_a_failed_run_is_recorded_the_others_finish_and_resume_regenerates_nothing(
    cli: Cli, server: OpenAITestServer, tmp_path: Path
) -> None:
    state = server._server.state
    state.behaviours = ByTopic(state.requests, {"beta": [Status(500, "beta is down")]})  # type: ignore[assignment]
    world = provider_world(tmp_path, server)
    out = tmp_path / "results.jsonl"
    vary = "topic=topic alpha,topic beta,topic gamma"
    first = cli.run(
        "batch", str(world), "--vary", vary, "--name", "sweep", "--out", str(out),
        "--concurrency", "2", BATCH_KEY="sk-test",
    )  # fmt: skip
    assert first.returncode == 1, first.stderr
    assert "1 of 3 runs failed (runs 2)" in first.stderr
    assert "`rolecall batch --resume sweep`" in first.stderr
    assert "batch sweep: 2/3 runs finished, 1 failed (runs 2)" in first.stdout
    got = rows(out)
    assert [(r["run"], r["topic"], r["stop_reason"]) for r in got] == [
        (1, "topic alpha", "flow_end"),
        (2, "topic beta", None),
        (3, "topic gamma", "flow_end"),
    ]
    assert "beta is down" in got[1]["error"] and got[0]["error"] is None
    assert (got[0]["turns"], got[0]["input_tokens"], got[0]["output_tokens"]) == (2, 22, 14)
    assert got[1]["turns"] == 0 and got[1]["session_id"]
    assert Counter(topic_of(r.body) for r in server.requests) == {"alpha": 2, "beta": 1, "gamma": 2}
    sessions = batch_sessions(cli.home, "sweep")
    assert {run: st for run, (_, st) in sessions.items()} == {
        1: "finished",
        2: "paused",
        3: "finished",
    }
    listed = cli.run("sessions", "list", "--batch", "sweep")
    assert listed.returncode == 0, listed.stderr
    assert sorted(line.split()[0] for line in listed.stdout.splitlines()[1:]) == sorted(
        sid for sid, _ in sessions.values()
    )

    again = cli.run("batch", "--resume", "sweep", "--out", str(out), BATCH_KEY="sk-test")
    assert again.returncode == 0, again.stderr
    assert "resuming 1 of 3 runs" in again.stderr
    # the failed run went on from its last stored turn; the finished ones were not touched
    assert Counter(topic_of(r.body) for r in server.requests) == {"alpha": 2, "beta": 3, "gamma": 2}
    final = rows(out)
    assert [(r["run"], r["stop_reason"], r["error"]) for r in final] == [
        (1, "flow_end", None),
        (2, "flow_end", None),
        (3, "flow_end", None),
    ]
    assert final[1]["session_id"] == got[1]["session_id"]  # the same session, continued
    assert batch_sessions(cli.home, "sweep") == {
        run: (sid, "finished") for run, (sid, _) in sessions.items()
    }


def test_json_streams_every_run_then_one_summary_line(cli: Cli, tmp_path: Path) -> None:
    world = scripted_world(tmp_path)
    done = cli.run(
        "batch", str(world), "--vary", "topic=x,y", "--runs", "2", "--concurrency", "3", "--json"
    )
    assert done.returncode == 0, done.stderr
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    summary = lines[-1]
    assert (summary["topic"], summary["type"]) == ("world", "batch")
    assert (summary["runs"], summary["finished"], summary["failed"]) == (4, 4, 0)
    assert summary["stop_reasons"] == {"flow_end": 4}
    events = lines[:-1]
    by_session: dict[str, list[dict[str, Any]]] = {}
    for event in events:
        by_session.setdefault(event["session_id"], []).append(event)
    assert len(by_session) == 4
    for evs in by_session.values():
        assert [e["seq"] for e in evs] == list(range(1, len(evs) + 1))
        assert [e["type"] for e in evs if e["topic"] == "world"][-1] == "stop"
        said = [e["content"] for e in evs if e["type"] == "message"]
        assert said == ["a says 1", "b says 1", "a says 2"]


def test_bad_vary_is_a_usage_error_before_anything_runs(cli: Cli, tmp_path: Path) -> None:
    world = scripted_world(tmp_path)
    bad = cli.run(
        "batch", str(world), "--vary", "topic=x", "--vary", "role.c.model=m", "--vary", "speed=1"
    )
    assert bad.returncode == 2
    assert bad.stderr.splitlines() == [
        "rolecall: --vary: 2 problems",
        "  speed: unknown key (keys: topic, model, max_turns, role.ID.model, role.ID.persona, settings.NAME)",
        "  role.c.model: no role 'c' (known: a, b)",
    ]
    assert not (cli.home / "rolecall.db").exists()  # nothing ran, nothing was stored
    for args, message in [
        (["--resume", "nope"], "no batch named 'nope'"),
        (["--resume", "nope", str(world)], "leave out WORLD"),
        ([str(world), "--concurrency", "0"], "--concurrency must be at least 1"),
        ([], "batch needs a WORLD"),
    ]:
        done = cli.run("batch", *args)
        assert done.returncode == 2 and message in done.stderr, (args, done.stderr)
    twice = [cli.run("batch", str(world), "--name", "b1", "-q") for _ in range(2)]
    assert twice[0].returncode == 0 and twice[1].returncode == 2
    assert "a batch named 'b1' already exists" in twice[1].stderr


def test_an_out_that_cannot_be_written_is_a_usage_error_before_anything_runs(
    cli: Cli, tmp_path: Path
) -> None:
    """`--out DIR` used to run every run, then end in an IsADirectoryError traceback with
    no results written."""
    world = scripted_world(tmp_path)
    (tmp_path / "results").mkdir()
    (tmp_path / "plain").write_text("", encoding="utf-8")
    for out, message in [
        ("results", "rolecall: --out results is a directory; give the path of a file"),
        ("plain/x.jsonl", "rolecall: --out plain/x.jsonl: plain is not a directory"),
    ]:
        done = cli.run("batch", str(world), "--out", out)
        assert done.returncode == 2, done.stderr
        assert done.stderr == message + "\n"
        assert not (cli.home / "rolecall.db").exists()  # nothing ran, nothing was stored
    made = cli.run("batch", str(world), "--out", "new/folder/x.jsonl", "-q")
    assert made.returncode == 0, made.stderr
    assert [r["stop_reason"] for r in rows(tmp_path / "new/folder/x.jsonl")] == ["flow_end"]


def test_results_that_cannot_be_written_at_the_end_say_how_to_write_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A folder made at --out while the batch ran (or a full disk): a message, exit 1."""
    import time

    from rolecall.batch.results import RunResult
    from rolecall.cli.batch_report import finish
    from rolecall.cli.options import BatchOptions

    (tmp_path / "late").mkdir()
    args = BatchOptions(out=str(tmp_path / "late"), json=False, quiet=True)
    done = RunResult(batch="b", run=1, session_id="s", stop_reason="flow_end", turns=3)
    assert finish(args, "b", 1, [done], False, time.monotonic()) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"rolecall: cannot write the results to {tmp_path / 'late'} (")
    assert err.rstrip().endswith(
        "the runs are stored: `rolecall batch --resume b --out FILE` writes them"
    )


def test_a_flow_yaml_value_is_one_value_and_out_records_it_as_yaml(
    cli: Cli, tmp_path: Path
) -> None:
    world = scripted_world(tmp_path)
    out = tmp_path / "v.jsonl"
    done = cli.run(
        "batch", str(world), "--vary", "settings.constraints=[be brief, be kind],[x]",
        "--vary", "max_turns=1,2", "--out", str(out), "-q",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [(r["settings.constraints"], r["max_turns"], r["turns"]) for r in rows(out)] == [
        (["be brief", "be kind"], 1, 1),
        (["be brief", "be kind"], 2, 2),
        (["x"], 1, 1),
        (["x"], 2, 2),
    ]


def _wait_for_line(proc: Any, text: str, timeout: float = 40) -> str:
    """The stderr line of ``proc`` holding ``text`` (read until it comes)."""
    import time

    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
        if text in line:
            return str(line)
    raise AssertionError(f"no {text!r} on stderr: {''.join(seen)}")


@pytest.mark.timeout(120)
def test_a_second_resume_of_a_running_batch_says_another_process_runs_it(
    cli: Cli, tmp_path: Path
) -> None:
    """Two ``batch --resume`` of one batch: the second is refused at once (exit 1,
    naming the first), runs nothing and reports no failure; the first finishes it all."""
    import signal

    world = scripted_world(tmp_path)
    slow = {"ROLECALL_STREAM_DELAY": "0.25"}  # each message takes about a second
    first = cli.popen("batch", str(world), "--runs", "4", "--name", "race", **slow)
    _wait_for_line(first, "batch race: running 4 of 4 runs")
    first.send_signal(signal.SIGINT)
    _, err = Cli.rest(first, 30)
    assert first.returncode == 130, err
    winner = cli.popen("batch", "--resume", "race", "--concurrency", "1", **slow)
    _wait_for_line(winner, "batch race: resuming 4 of 4 runs")
    loser = cli.run("batch", "--resume", "race", **slow)
    assert loser.returncode == 1, loser.stderr
    assert re.search(
        rf"batch race is being run by another process \(pid {winner.pid}, .*batch.*\): "
        "that process runs its remaining runs, so nothing was run here",
        loser.stderr,
    ), loser.stderr
    assert "failed" not in loser.stderr and "Traceback" not in loser.stderr
    out, err = Cli.rest(winner, 60)
    assert winner.returncode == 0, err
    assert "batch race: 4/4 runs finished" in out
    sessions = batch_sessions(cli.home, "race")
    assert sorted(sessions) == [1, 2, 3, 4]
    assert {state for _, state in sessions.values()} == {"finished"}
    with closing(sqlite3.connect(cli.home / "rolecall.db")) as db:  # one session per run
        (count,) = db.execute("SELECT count(*) FROM sessions").fetchone()
    assert count == 4
    # once the winner has ended, the batch can be resumed again (there is nothing left)
    after = cli.run("batch", "--resume", "race")
    assert after.returncode == 0, after.stderr
    assert "resuming 0 of 4 runs" in after.stderr
