"""Measure rolecall's own overhead and print one JSON document on stdout.

Usage (from the repository root)::

    .venv/bin/python scripts/bench.py [--quick] [--only NAME ...] [--out FILE]

Benchmarks (see docs/performance.md for what every figure means):

* ``turn_overhead``: per-turn cost of a scripted flow with a JSON sink on the bus;
* ``chunk_overhead``: per streamed chunk cost to the JSON sink;
* ``startup``: ``rolecall --help``, ``import rolecall.cli.main``, time to the first
  offline message, and that litellm is not imported by an offline run;
* ``next_step_cost``: deciding the next flow step with 10 vs 10,000 messages;
* ``routing``: ``route()`` on a 100 KB message holding 1,000 mentions.

Only the JSON document goes to stdout; progress goes to stderr. Every target is
reported with ``"met": true/false``; missing a target never changes the exit code
(it is 1 only when a benchmark could not run). ``--quick`` uses small sizes and few
repeats: its ``met`` figures are indicative only.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import yaml

import rolecall
from rolecall.cli import logs
from rolecall.cli.display import JsonSink
from rolecall.flows.conditions import ConditionContext
from rolecall.flows.engine import FlowEngine
from rolecall.routing import find_mentions, route
from rolecall.runtime import Session
from rolecall.session.state import FlowPointer, Message, Transcript
from rolecall.world.loader import parse_world
from rolecall.world.models import World

ROOT = Path(__file__).resolve().parent.parent
CHILD_TIMEOUT = 60.0  # seconds; a child process that takes longer is a failure
ROLES = ("alice", "bob", "carol")
# Each script line is 12 words: the scripted model streams it as 12 chunks.
SCRIPT_LINES = (
    "I think the evidence points one way, but @{target} may disagree here.",
    "Turn {n} of {speaker}: let us weigh the cost against the benefit now.",
    "That is a fair point; still, the numbers need a second careful look.",
)
FILLER = "the quick brown fox jumps over the lazy dog while the panel keeps talking "


# ----------------------------------------------------------------------------- results
@dataclass
class Bench:
    """One benchmark's report: numeric figures with units, targets, checks, method."""

    name: str
    description: str
    figures: dict[str, float] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    targets: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, dict[str, Any]] = field(default_factory=dict)
    method: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None

    def add(self, key: str, value: float, unit: str) -> float:
        self.figures[key] = round(value, 6) if isinstance(value, float) else value
        self.units[key] = unit
        return value

    def target(self, key: str, limit: float, meaning: str) -> None:
        """A ``figure <= limit`` target on a figure already added."""
        value = self.figures[key]
        self.targets.append(
            {
                "figure": key,
                "op": "<=",
                "limit": limit,
                "unit": self.units[key],
                "value": value,
                "met": bool(value <= limit),
                "meaning": meaning,
            }
        )

    def check(self, key: str, ok: bool, detail: str) -> None:
        self.checks[key] = {"met": bool(ok), "detail": detail}

    @property
    def met(self) -> bool:
        return (
            self.error is None
            and all(t["met"] for t in self.targets)
            and all(c["met"] for c in self.checks.values())
        )

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "description": self.description,
            "met": self.met,
            "figures": self.figures,
            "units": self.units,
            "targets": self.targets,
            "checks": self.checks,
            "method": self.method,
        }
        if self.details:
            out["details"] = self.details
        if self.error is not None:
            out["error"] = self.error
        return out


def progress(message: str) -> None:
    print(f"[bench] {message}", file=sys.stderr, flush=True)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else 0.0


def percentile(values: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (``pct`` in 0..100)."""
    if not values:
        return 0.0
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


class CpuMeter:
    """How busy the machine was elsewhere while a benchmark ran (Linux /proc/stat).

    ``other_busy_cpus``: CPUs' worth of time spent by other processes (the machine's
    busy time minus this process and its children); ``steal_cpus``: time the hypervisor
    gave to other guests. Both are averages over the wall time; with 2 CPUs, a value
    near 1 means another job had a whole CPU, and wall-clock figures suffer.
    """

    def __init__(self) -> None:
        self.start = self._read()

    @staticmethod
    def _read() -> tuple[float, float, float, float] | None:
        try:
            with open("/proc/stat", encoding="ascii") as stat:
                fields = [int(x) for x in stat.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        hz = float(os.sysconf("SC_CLK_TCK"))
        user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
        times = os.times()
        own = times.user + times.system + times.children_user + times.children_system
        busy = (user + nice + system + irq + softirq) / hz
        return time.monotonic(), busy, steal / hz, own

    def figures(self) -> dict[str, float]:
        end = self._read()
        if self.start is None or end is None or end[0] <= self.start[0]:
            return {}
        wall = end[0] - self.start[0]
        other = (end[1] - self.start[1]) - (end[3] - self.start[3])
        return {
            "other_busy_cpus": round(max(0.0, other) / wall, 2),
            "steal_cpus": round((end[2] - self.start[2]) / wall, 2),
        }


def ms(seconds: float) -> float:
    return seconds * 1e3


def us(seconds: float) -> float:
    return seconds * 1e6


# ------------------------------------------------------------------------------ worlds
def world_of(data: dict[str, Any]) -> World:
    return parse_world(yaml.safe_dump(data, sort_keys=False), source="bench").world


def turn_world(max_turns: int) -> World:
    """3 scripted roles (12-word lines), 3 steps, a loop back to the first, max_turns N."""
    roles = [
        {
            "id": rid,
            "script": [line.replace("{target}", ROLES[(i + 1) % 3]) for line in SCRIPT_LINES],
        }
        for i, rid in enumerate(ROLES)
    ]
    steps: list[dict[str, Any]] = [
        {"id": "open", "speaker": "alice", "instruction": "Open the point."},
        {"id": "answer", "speaker": "bob", "reply_to": {"role": "alice"}},
        {
            "id": "weigh",
            "speaker": "carol",
            "reply_to": "previous",
            "loop": {"to": "open", "max": 10000},
        },
    ]
    return world_of(
        {
            "name": "bench-turns",
            "topic": "benchmarking the runtime",
            "model": "scripted",
            "settings": {"max_turns": max_turns},
            "roles": roles,
            "flow": {"steps": steps},
        }
    )


def chunk_world(words: int) -> World:
    """One scripted role whose single turn is ``words`` words (one chunk per word)."""
    base = FILLER.split()
    text = " ".join(base[i % len(base)] for i in range(words))
    return world_of(
        {
            "name": "bench-chunks",
            "topic": "benchmarking the stream",
            "model": "scripted",
            "settings": {"max_turns": 1},
            "roles": [{"id": "alice", "script": [text]}],
            "flow": {"steps": [{"id": "speak", "speaker": "alice", "reply_to": "none"}]},
        }
    )


def decision_world() -> World:
    """Global stops ``{contains: X}`` and a loop with ``until``, as the engine sees them."""
    return world_of(
        {
            "name": "bench-decide",
            "model": "scripted",
            "roles": [{"id": rid, "script": ["x"]} for rid in ROLES],
            "flow": {
                "steps": [
                    {"id": "open", "speaker": "alice"},
                    {"id": "answer", "speaker": "bob"},
                    {
                        "id": "weigh",
                        "speaker": "carol",
                        "loop": {
                            "to": "open",
                            "max": 10000,
                            "until": {"contains": "AGREED", "role": "bob"},
                        },
                    },
                ],
                "stop": [
                    {"contains": "FINAL ANSWER", "name": "final_answer"},
                    {"contains": "I CONCEDE", "role": "carol"},
                ],
            },
        }
    )


# ------------------------------------------------------------------------ turn overhead
@dataclass
class TurnRun:
    turns: int
    wall: float
    cpu: float
    durations: list[float]
    events: int

    @property
    def median(self) -> float:
        return median(self.durations)


async def _timed_run(session: Session) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await session.run()
    return time.perf_counter() - wall0, time.process_time() - cpu0


def run_turns(turns: int, *, sink: bool = True) -> TurnRun:
    """One session of ``turns`` scripted turns, JSON sink to /dev/null, clocked per message."""
    session = Session(turn_world(turns))
    stamps: list[float] = []
    with open(os.devnull, "w", encoding="utf-8") as out:
        if sink:
            JsonSink(out).attach(session.bus)
        session.bus.subscribe(
            lambda _e: stamps.append(time.perf_counter()), "messages", name="bench-clock"
        )
        gc.collect()
        wall, cpu = anyio.run(_timed_run, session)
    done = session.state.transcript.agent_turns
    if done != turns or session.state.stop_reason != "max_turns":
        raise RuntimeError(
            f"expected {turns} turns to max_turns, got {done} ({session.state.stop_reason})"
        )
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    return TurnRun(turns, wall, cpu, durations, session.bus.last_seq)


def bench_turn_overhead(quick: bool) -> Bench:
    b = Bench(
        "turn_overhead",
        "per-turn runtime overhead: scripted model, 3 roles, 3-step looping flow, "
        "JSON sink on the bus writing to /dev/null",
    )
    plan = [(50, 3), (100, 3), (200, 3)] if quick else [(200, 5), (1000, 5), (10000, 3)]
    _, mid, large = (n for n, _ in plan)
    medians: dict[int, float] = {}
    for turns, repeats in plan:
        runs = []
        for r in range(repeats):
            run = run_turns(turns)
            progress(
                f"turn_overhead N={turns} run {r + 1}/{repeats}: {ms(run.median):.3f} ms median"
            )
            runs.append(run)
        best = min(runs, key=lambda x: x.median)
        medians[turns] = best.median
        p = f"n{turns}_"
        b.add(p + "total_s", best.wall, "s")
        b.add(p + "mean_ms_per_turn", ms(best.wall / turns), "ms")
        b.add(p + "median_ms_per_turn", ms(best.median), "ms")
        b.add(p + "p95_ms_per_turn", ms(percentile(best.durations, 95)), "ms")
        b.add(p + "cpu_mean_ms_per_turn", ms(best.cpu / turns), "ms")
        b.add(p + "events_per_turn", best.events / turns, "events")
        b.details[f"n{turns}_medians_ms_all_runs"] = [round(ms(x.median), 4) for x in runs]
    b.add("ratio_10k_to_1k", medians[large] / medians[mid], "ratio")
    bare = min((run_turns(mid, sink=False) for _ in range(plan[1][1])), key=lambda x: x.median)
    progress(f"turn_overhead N={mid} without the JSON sink: {ms(bare.median):.3f} ms median")
    b.add(f"n{mid}_median_ms_per_turn_no_sink", ms(bare.median), "ms")
    for turns, _ in plan:
        b.target(f"n{turns}_median_ms_per_turn", 0.5, f"median per-turn overhead at N={turns}")
    b.target(
        "ratio_10k_to_1k", 1.2, f"median at N={large} / median at N={mid}: no growth with history"
    )
    b.method = {
        "sizes": [n for n, _ in plan],
        "repeats": {str(n): r for n, r in plan},
        "aggregation": "each run: median of per-turn durations; figures are from the run with "
        "the best (lowest) median among the repeats",
        "per_turn_duration": "time.perf_counter() between consecutive messages/message events "
        "(bus subscriber after the JSON sink); N turns give N-1 durations",
        "mean": "total wall seconds of session.run() / N (includes open and finish)",
        "cpu": "time.process_time() of session.run() / N: less sensitive to other processes "
        "than wall time (not immune: the CPUs' caches are shared)",
        "sink": "rolecall.cli.display.JsonSink on open(os.devnull, 'w'), flushing every event "
        "as the CLI does",
        "world": "3 scripted roles, 3 lines of 12-13 words each (one chunk a word), steps "
        "open -> answer -> weigh with loop {to: open, max: 10000}, settings.max_turns = N, "
        "memory_window 12",
        "ratio_sizes": f"ratio_10k_to_1k = median at N={large} / median at N={mid}",
        "no_sink": f"n{mid}_median_ms_per_turn_no_sink: the same at N={mid} with no JSON sink "
        "(best of the same number of repeats; no target): the sink's share of the turn",
    }
    return b


# ----------------------------------------------------------------------- chunk overhead
@dataclass
class ChunkRun:
    chunks: int
    turn: float  # wall seconds of session.step()
    cpu: float  # process CPU seconds of session.step()
    stream: float = 0.0  # sse/start -> sse/end (clocked runs only)
    intervals: list[float] = field(default_factory=list)  # between consecutive sse/chunk events


async def _timed_step(session: Session) -> tuple[float, float]:
    cpu0, wall0 = time.process_time(), time.perf_counter()
    await session.step()
    return time.perf_counter() - wall0, time.process_time() - cpu0


def run_chunks(words: int, *, clocked: bool = False) -> ChunkRun:
    """One scripted turn of ``words`` chunks, JSON sink to /dev/null.

    ``clocked`` adds a bus subscriber that timestamps every ``sse`` event (its own cost
    then counts in the turn, so the turn figures come from unclocked runs).
    """
    session = Session(chunk_world(words))
    marks: dict[str, float] = {}
    stamps: list[float] = []

    def clock(envelope: Any) -> None:
        now = time.perf_counter()
        if envelope.event.type == "chunk":
            stamps.append(now)
        else:
            marks[envelope.event.type] = now

    with open(os.devnull, "w", encoding="utf-8") as sink:
        JsonSink(sink).attach(session.bus)
        if clocked:
            session.bus.subscribe(clock, "sse", name="bench-clock")
        session.open()
        gc.collect()
        turn, cpu = anyio.run(_timed_step, session)
    said = session.state.transcript.latest()
    if said is None or len(said.content.split()) != words:
        raise RuntimeError(f"expected one message of {words} words")
    if not clocked:
        return ChunkRun(words, turn, cpu)
    if len(stamps) != words or "end" not in marks:
        raise RuntimeError(f"expected {words} chunks and an sse/end, got {len(stamps)}")
    intervals = [b - a for a, b in itertools.pairwise(stamps)]
    return ChunkRun(words, turn, cpu, marks["end"] - marks["start"], intervals)


def bench_chunk_overhead(quick: bool) -> Bench:
    b = Bench(
        "chunk_overhead",
        "per streamed chunk overhead to the JSON sink: one scripted turn of many words",
    )
    words, repeats, clocked_repeats = (2000, 3, 1) if quick else (20000, 9, 3)
    runs: list[ChunkRun] = []
    for r in range(repeats):
        runs.append(run_chunks(words))
        per = us(runs[-1].turn / words)
        progress(f"chunk_overhead {words} words run {r + 1}/{repeats}: {per:.2f} µs/chunk")
    clocked = [run_chunks(words, clocked=True) for _ in range(clocked_repeats)]
    best = min(runs, key=lambda x: x.turn)
    best_clocked = min(clocked, key=lambda x: x.stream)
    b.add("chunks", words, "chunks")
    b.add("turn_s", best.turn, "s")
    b.add("us_per_chunk", us(best.turn / words), "µs")
    b.add("us_per_chunk_median_of_runs", us(median([x.turn for x in runs]) / words), "µs")
    b.add("cpu_us_per_chunk", us(min(x.cpu for x in runs) / words), "µs")
    b.add("stream_us_per_chunk", us(best_clocked.stream / words), "µs")
    b.add("median_chunk_interval_us", us(min(median(x.intervals) for x in clocked)), "µs")
    b.target("us_per_chunk", 20.0, "whole turn time / chunks (best of the repeats)")
    b.details["us_per_chunk_all_runs"] = [round(us(x.turn / words), 3) for x in runs]
    b.method = {
        "words": words,
        "repeats": repeats,
        "aggregation": "us_per_chunk and turn_s come from the run with the shortest turn (the "
        "least disturbed by other load), cpu_us_per_chunk from the lowest CPU time; "
        "us_per_chunk_median_of_runs is the median over all runs",
        "us_per_chunk": "wall time of session.step() for the one turn / chunks (includes the "
        "fixed per-turn costs: prompt, the final message event of the whole text, step event)",
        "clocked_runs": f"{clocked_repeats} more runs with a subscriber timestamping every sse "
        "event (not used for the turn figures, as the subscriber costs time itself): "
        "stream_us_per_chunk = sse/start to sse/end / chunks (best run), "
        "median_chunk_interval_us = median time between consecutive sse/chunk events (best run), "
        "the steady-state cost of one chunk",
        "sink": "JsonSink on /dev/null, flushing every event",
    }
    return b


# ------------------------------------------------------------------------------ startup
def rolecall_exe() -> list[str]:
    exe = Path(sys.executable).parent / "rolecall"
    if exe.exists():
        return [str(exe)]
    return [sys.executable, "-m", "rolecall.cli.main"]


def child_env(home: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ROLECALL_MODEL", None)  # an override would send offline roles to litellm
    env["ROLECALL_HOME"] = home
    env["NO_COLOR"] = "1"
    return env


def time_command(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(
        cmd,
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        timeout=CHILD_TIMEOUT,
    )
    return time.perf_counter() - t0


def is_message_line(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:
        return False
    if not isinstance(record, dict):
        return False
    return bool(record.get("topic") == "messages" and record.get("type") == "message")


def time_first_message(env: dict[str, str]) -> float:
    """Seconds from spawning ``rolecall run worlds/classroom --json --max-turns 1`` to the
    first ``messages/message`` line on its stdout."""
    cmd = [*rolecall_exe(), "run", "worlds/classroom", "--json", "--max-turns", "1"]
    t0 = time.perf_counter()
    with subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    ) as proc:
        assert proc.stdout is not None
        first: float | None = None
        watchdog = threading.Timer(CHILD_TIMEOUT, proc.kill)  # a hung child fails the run
        watchdog.start()
        try:
            for line in proc.stdout:
                if first is None and is_message_line(line):
                    first = time.perf_counter() - t0
            code = proc.wait()
        finally:
            watchdog.cancel()
    if first is None or code != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {code}, first message seen: {first is not None}")
    return first


LITELLM_PROBE = """\
import sys
from rolecall.cli.main import main
code = main(["run", "worlds/classroom", "--json", "--max-turns", "1"])
sys.stdout.flush()
print(f"BENCH-PROBE exit={code} litellm_imported={'litellm' in sys.modules}")
"""


def probe_litellm(env: dict[str, str]) -> tuple[bool, int]:
    """Run an offline ``rolecall run`` in-process in a child: (litellm imported?, exit code)."""
    out = subprocess.run(
        [sys.executable, "-c", LITELLM_PROBE],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=CHILD_TIMEOUT,
    ).stdout
    last = [ln for ln in out.splitlines() if ln.startswith("BENCH-PROBE ")][-1]
    fields = dict(part.split("=", 1) for part in last.split()[1:])
    return fields["litellm_imported"] == "True", int(fields["exit"])


def repeat(fn: Callable[[], float], times: int, label: str) -> list[float]:
    values = []
    for i in range(times):
        values.append(fn())
        progress(f"startup {label} run {i + 1}/{times}: {values[-1]:.3f} s")
    return values


def bench_startup(quick: bool) -> Bench:
    b = Bench("startup", "process start-up: CLI help, package import, first offline message")
    n_fast, n_first = (3, 1) if quick else (7, 3)
    with tempfile.TemporaryDirectory(prefix="rolecall-bench-") as home:
        env = child_env(home)
        exe = rolecall_exe()
        help_s = repeat(lambda: time_command([*exe, "--help"], env), n_fast, "--help")
        import_s = repeat(
            lambda: time_command([sys.executable, "-c", "import rolecall.cli.main"], env),
            n_fast,
            "import",
        )
        bare_s = repeat(lambda: time_command([sys.executable, "-c", "pass"], env), n_fast, "python")
        first_s = repeat(lambda: time_first_message(env), n_first, "first message")
        imported, code = probe_litellm(env)
    b.add("help_s", median(help_s), "s")
    b.add("import_cli_main_s", median(import_s), "s")
    b.add("python_bare_s", median(bare_s), "s")
    b.add("first_message_s", median(first_s), "s")
    b.target("help_s", 0.25, "`rolecall --help` wall time (median)")
    b.check(
        "litellm_not_imported",
        not imported and code == 0,
        f"offline `rolecall run worlds/classroom --json --max-turns 1` via main() exited {code}; "
        f"'litellm' in sys.modules: {imported}",
    )
    b.details = {
        "help_s_all": [round(x, 4) for x in help_s],
        "import_cli_main_s_all": [round(x, 4) for x in import_s],
        "python_bare_s_all": [round(x, 4) for x in bare_s],
        "first_message_s_all": [round(x, 4) for x in first_s],
    }
    b.method = {
        "help_s": f"subprocess [{exe[-1]}, --help], median of {n_fast}",
        "import_cli_main_s": f"subprocess python -c 'import rolecall.cli.main', median of {n_fast}",
        "python_bare_s": f"subprocess python -c pass (interpreter floor), median of {n_fast}",
        "first_message_s": "spawn of `rolecall run worlds/classroom --json --max-turns 1` to the "
        f"first messages/message line on its stdout, median of {n_first} (no target yet)",
        "litellm_not_imported": "python -c running rolecall.cli.main.main([...]) then printing "
        "'litellm' in sys.modules",
        "env": "ROLECALL_MODEL unset, ROLECALL_HOME a temporary folder, NO_COLOR=1, "
        "cwd = repo root",
    }
    return b


# ----------------------------------------------------------------------- next-step cost
def transcript_of(size: int) -> Transcript:
    transcript = Transcript()
    ts = datetime.now(UTC)
    for i in range(size):
        sender = ROLES[i % 3]
        transcript.add(
            Message(
                id=f"m{i + 1}",
                sender=sender,
                kind="agent",
                content=f"{sender} says: " + " ".join(FILLER.split()[:10]) + f" {i}",
                step_id=("open", "answer", "weigh")[i % 3],
                turn=i + 1,
                ts=ts,
            )
        )
    return transcript


def time_decisions(engine: FlowEngine, ctx: ConditionContext, calls: int) -> float:
    """Seconds per ``after_step`` decision, over ``calls`` calls."""
    pointer = FlowPointer(
        current="weigh", exec_counts={"open": 5, "answer": 5, "weigh": 5}, started=True
    )
    after = engine.after_step
    t0 = time.perf_counter()
    for _ in range(calls):
        after("weigh", pointer, ctx)
    return (time.perf_counter() - t0) / calls


def bench_next_step_cost(quick: bool) -> Bench:
    b = Bench(
        "next_step_cost",
        "FlowEngine.after_step with 2 global {contains} stops and a loop with until, "
        "transcript of 10 vs 10,000 messages",
    )
    calls, rounds = (2000, 5) if quick else (20000, 9)
    world = decision_world()
    assert world.flow is not None
    engine = FlowEngine(world.flow)
    contexts = {size: ConditionContext(transcript_of(size), set()) for size in (10, 10000)}
    outcome = engine.after_step("weigh", FlowPointer(exec_counts={"weigh": 5}), contexts[10])
    if outcome.result != "loop_continue" or len(outcome.evaluations) != 3:
        raise RuntimeError(f"unexpected decision {outcome}")
    samples: dict[int, list[float]] = {10: [], 10000: []}
    for _ in range(rounds):  # interleaved so drift hits both sizes alike
        for size, ctx in contexts.items():
            samples[size].append(time_decisions(engine, ctx, calls))
    small, large = min(samples[10]), min(samples[10000])
    progress(f"next_step_cost: {us(small):.2f} µs at 10, {us(large):.2f} µs at 10,000")
    b.add("us_per_decision_10", us(small), "µs")
    b.add("us_per_decision_10000", us(large), "µs")
    b.add("ratio_10000_to_10", large / small, "ratio")
    b.add("us_per_decision_10_median_of_rounds", us(median(samples[10])), "µs")
    b.add("us_per_decision_10000_median_of_rounds", us(median(samples[10000])), "µs")
    b.target("ratio_10000_to_10", 1.5, "no scan of the history when deciding")
    b.details = {
        f"us_per_decision_{k}_all": [round(us(x), 3) for x in v] for k, v in samples.items()
    }
    b.method = {
        "calls_per_round": calls,
        "rounds": rounds,
        "aggregation": "each round times `calls` decisions at each size, sizes interleaved; "
        "us_per_decision_* and the ratio use the best round (least disturbed by other load), "
        "*_median_of_rounds the median round",
        "decision": "after_step('weigh') -> loop_continue, evaluating 2 stop conditions and 1 "
        "until (3 evaluations, none holds)",
    }
    return b


# ------------------------------------------------------------------------------ routing
def mention_text(size: int, mentions: int, *, valid: bool) -> str:
    """About ``size`` characters holding ``mentions`` evenly spread ``@`` names.

    ``valid=False``: every ``@`` is an e-mail-like non-mention (``x@bob``), and one valid
    mention ends the text, so the first-mention search scans all of it.
    """
    per = size // mentions
    parts = []
    for i in range(mentions):
        name = ROLES[i % 3]
        at = f" @{name} " if valid else f"mail{i}@{name}.org "
        filler = (FILLER * (per // len(FILLER) + 1))[: max(0, per - len(at))]
        parts.append(filler + at if valid else at + filler)
    text = "".join(parts)
    return text if valid else text + " @carol"


def time_calls(fn: Callable[[], object], calls: int) -> list[float]:
    out = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def bench_routing(quick: bool) -> Bench:
    b = Bench("routing", "route('human', text, role_ids) on a 100 KB message with 1,000 mentions")
    calls = 50 if quick else 300
    spread = mention_text(100_000, 1000, valid=True)
    scan = mention_text(100_000, 1000, valid=False)
    if len(find_mentions(spread)) != 1000 or find_mentions(scan) != ["carol"]:
        raise RuntimeError("mention texts are not what the benchmark expects")
    roles = list(ROLES)
    first = route("human", spread, roles)
    worst = route("human", scan, roles)
    if first.answerers != ("alice",) or worst.answerers != ("carol",):
        raise RuntimeError(f"unexpected routes {first} / {worst}")
    route_spread = time_calls(lambda: route("human", spread, roles), calls)
    route_scan = time_calls(lambda: route("human", scan, roles), calls)
    find_all = time_calls(lambda: find_mentions(spread), max(10, calls // 10))
    progress(
        f"routing: {us(median(route_spread)):.1f} µs, full scan {us(median(route_scan)):.1f} µs"
    )
    b.add("text_chars", len(spread), "characters")
    b.add("route_median_ms", ms(median(route_spread)), "ms")
    b.add("route_full_scan_median_ms", ms(median(route_scan)), "ms")
    b.add("find_mentions_median_ms", ms(median(find_all)), "ms")
    b.target("route_median_ms", 1.0, "route() on 100 KB, 1,000 valid mentions")
    b.target(
        "route_full_scan_median_ms",
        1.0,
        "route() on 100 KB whose 1,000 '@' are e-mail-like non-mentions and whose only "
        "mention is last (the search must scan everything)",
    )
    b.method = {
        "calls": calls,
        "aggregation": "median of per-call perf_counter durations",
        "route_median_ms": "1,000 valid mentions (alice, bob, carol), one every ~100 characters; "
        "the first is ~100 characters in",
        "route_full_scan_median_ms": "1,000 'mailN@name.org' non-mentions, then '@carol' "
        "at the end",
        "find_mentions_median_ms": "find_mentions() on the 1,000-mention text (Session._message "
        "runs it on every message); no target",
    }
    return b


# ---------------------------------------------------------------------------- the run
BENCHMARKS: dict[str, Callable[[bool], Bench]] = {
    "turn_overhead": bench_turn_overhead,
    "chunk_overhead": bench_chunk_overhead,
    "startup": bench_startup,
    "next_step_cost": bench_next_step_cost,
    "routing": bench_routing,
}


def git(*args: str) -> str | None:
    """Output of a read-only git command, or None when git is not usable here."""
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=10
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip()


def source_state() -> dict[str, Any]:
    """Which code was measured: the commit and whether src/ had uncommitted changes."""
    changed = git("status", "--porcelain", "--", "src")
    return {
        "commit": git("rev-parse", "--short", "HEAD") or None,
        "src_uncommitted_changes": None if changed is None else bool(changed),
    }


def machine() -> dict[str, Any]:
    affinity = getattr(os, "sched_getaffinity", None)
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "usable_cpus": len(affinity(0)) if affinity else os.cpu_count(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def run_one(name: str, quick: bool) -> Bench:
    progress(f"{name} ...")
    t0 = time.perf_counter()
    meter = CpuMeter()
    try:
        bench = BENCHMARKS[name](quick)
    except Exception as exc:  # one broken benchmark still leaves a report
        bench = Bench(name, "failed to run")
        bench.error = f"{type(exc).__name__}: {exc}"
        progress(f"{name} FAILED: {bench.error}")
    bench.method["seconds"] = round(time.perf_counter() - t0, 2)
    bench.method["contention"] = meter.figures()
    gc.collect()
    return bench


def report(
    benches: list[Bench], quick: bool, seconds: float, started: datetime, host: dict[str, Any]
) -> dict[str, Any]:
    return {
        "tool": "scripts/bench.py",
        "rolecall_version": rolecall.__version__,
        "source": source_state(),
        "date": started.isoformat(timespec="seconds"),
        "quick": quick,
        "note": "quick run: small sizes, few repeats; 'met' is indicative only"
        if quick
        else "full run; timings are wall clock unless named cpu_",
        "machine": host,
        "benchmarks": {b.name: b.as_json() for b in benches},
        "summary": {
            "met": [b.name for b in benches if b.met],
            "missed": [b.name for b in benches if not b.met and b.error is None],
            "errors": [b.name for b in benches if b.error is not None],
        },
        "seconds": round(seconds, 2),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="small sizes, few repeats (~15 s)")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=list(BENCHMARKS),
        metavar="NAME",
        help=f"run only these: {', '.join(BENCHMARKS)}",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON document to this file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logs.configure(-1)  # as the CLI with -q: only errors, and on stderr
    started = datetime.now(UTC)
    host = machine()
    t0 = time.perf_counter()
    meter = CpuMeter()
    names = [n for n in BENCHMARKS if not args.only or n in args.only]
    benches = [run_one(name, args.quick) for name in names]
    doc = report(benches, args.quick, time.perf_counter() - t0, started, host)
    contention = meter.figures()
    doc["machine"]["contention_during_run"] = contention
    if contention.get("other_busy_cpus", 0.0) >= 0.5:
        doc["warning"] = (
            f"other processes kept {contention['other_busy_cpus']} CPUs busy during the run: "
            "wall-clock figures are inflated; compare the cpu_* and median figures, or rerun "
            "on a quiet machine"
        )
    text = json.dumps(doc, indent=2, ensure_ascii=False)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(text)
    summary = doc["summary"]
    progress(f"done in {doc['seconds']} s; met: {summary['met']}, missed: {summary['missed']}")
    return 1 if doc["summary"]["errors"] else 0


if __name__ == "__main__":
    sys.exit(main())
