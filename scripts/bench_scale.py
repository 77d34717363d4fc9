"""Scale benchmarks (issue 19): batch throughput, 200 ms replies, NATS overhead, workers.

Imported by ``scripts/bench.py``; each function returns one :class:`Bench`.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

if TYPE_CHECKING:
    from rolecall.bus import Envelope

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # the loopback test servers live in tests/
    sys.path.insert(0, str(ROOT))


def scripted_raw(turns: int) -> dict[str, Any]:
    return {
        "name": "bench",
        "topic": "throughput",
        "model": "scripted",
        "settings": {"max_turns": turns},
        "roles": [
            {"id": r, "script": [f"{r} says {{n}}: a line of about twelve words for the bench"]}
            for r in ("a", "b", "c")
        ],
        "flow": {
            "steps": [
                {"id": "s1", "speaker": "a"},
                {"id": "s2", "speaker": "b"},
                {"id": "s3", "speaker": "c", "next": "s1"},
            ]
        },
    }


async def run_batch(
    data: Path, raw: dict[str, Any], runs: int, concurrency: int, models: Any = None
) -> tuple[float, int]:
    """(wall seconds, agent turns) of one in-process batch of ``runs`` runs."""
    from rolecall.batch.plan import build_plan
    from rolecall.batch.runner import BatchContext, BatchRunner
    from rolecall.batch.tables import BatchTables
    from rolecall.llm.registry import ModelRegistry
    from rolecall.memory import MemoryFiles
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world

    library = RoleLibrary()
    base = build_world(raw, source="bench", library=library).world
    plan = build_plan(raw, [], runs, base=base, source="bench", library=library)
    name = f"b{time.monotonic_ns()}"
    async with SqliteStore(data / "rolecall.db") as store:
        tables = BatchTables(store)
        await tables.create(name, {})
        ctx = BatchContext(
            store=store, memory=MemoryFiles(data / "memory"), models=models or ModelRegistry()
        )
        runner = BatchRunner(name, plan, ctx, tables, concurrency=concurrency)
        started = time.perf_counter()
        results = await runner.run(plan.runs, {})
        wall = time.perf_counter() - started
    return wall, sum(r.turns for r in results)


def bench_batch_throughput(quick: bool, bench_cls: Any) -> Any:
    b = bench_cls(
        "batch_throughput",
        "rolecall batch in one process: turns per second with the scripted model at "
        "--concurrency 1, 8 and 64, and 100 concurrent sessions whose every reply takes "
        "200 ms from the loopback OpenAI-compatible server (through litellm)",
    )
    runs, turns = (16, 6) if quick else (64, 12)
    for k in (1, 8, 64):
        with tempfile.TemporaryDirectory() as tmp:
            wall, done = anyio.run(run_batch, Path(tmp), scripted_raw(turns), runs, k)
        b.add(f"scripted_k{k}_turns_per_s", done / wall, "turns/s")
    b.target("scripted_k8_turns_per_s", 100.0, "a useful floor for scripted turns", op=">=")

    sessions = 20 if quick else 100
    replies = 20  # per session: the steady state weighs more than the start
    provider = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "bench_provider.py"), "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert provider.stdout is not None
    assert provider.stdin is not None
    base_url = provider.stdout.readline().strip()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    ideal = sessions / 0.2
    try:
        for client in ("http", "litellm"):
            raw = {
                "name": "slow",
                "topic": "t",
                "model": "openai/bench-model",
                "settings": {"api_base": base_url, "retries": 0, "timeout": 30, "client": client},
                "roles": [{"id": "a"}, {"id": "b"}],
                "flow": {
                    "steps": [{"id": f"s{i}", "speaker": "ab"[i % 2]} for i in range(replies)]
                },
            }
            with tempfile.TemporaryDirectory() as tmp:
                # warm up (litellm's import, the client) so the figure is the batch
                anyio.run(run_batch, Path(tmp) / "warm", raw, 1, 1)
                cpu0 = time.process_time()
                wall, done = anyio.run(run_batch, Path(tmp), raw, sessions, sessions)
                cpu = time.process_time() - cpu0
            suffix = "" if client == "http" else "_litellm"
            b.add(f"slow_replies_per_s{suffix}", done / wall, "replies/s")
            b.add(f"slow_fraction_of_ideal{suffix}", done / wall / ideal, "ratio")
            b.add(f"slow_cpu_ms_per_reply{suffix}", cpu / max(done, 1) * 1000, "ms")
            b.check(
                f"slow_every_reply{suffix}",
                done == sessions * replies,
                f"{done} of {sessions * replies} replies",
            )
    finally:
        provider.stdin.close()
        provider.wait(timeout=30)
    b.add("slow_ideal_replies_per_s", ideal, "replies/s")
    b.target(
        "slow_fraction_of_ideal",
        0.8,
        "issue 19: at least 80% of ideal (settings.client: http)",
        op=">=",
    )
    b.method = {
        "scripted": f"{runs} runs of {turns} turns, SQLite store and memory files attached",
        "slow": f"{sessions} sessions of {replies} replies each, all at once, every reply "
        "held 200 ms by the loopback server (scripts/bench_provider.py, a process of its "
        "own); slow_*: through the lean client (settings.client: http), slow_*_litellm: "
        "through litellm; cpu: this process's CPU over the batch",
    }
    return b


class _AsksSomeone:
    """The scripted model, counted as a provider (``repeatable`` false): on NATS each of
    its requests waits until the stream holds every turn before it, as a real
    provider's does."""

    name = "scripted"
    repeatable = False

    def __init__(self) -> None:
        from rolecall.llm.scripted import ScriptedModel

        self.stream = ScriptedModel().stream


async def _nats_session(
    url: str | None, turns: int, data: Path, provider: bool = False, leased: bool = False
) -> tuple[float, float]:
    """One session of ``turns`` scripted turns, in process or on NATS: (seconds from its
    start until every event is stored, the median time between two of its messages).
    ``provider``: the scripted model counts as a provider (see :class:`_AsksSomeone`).
    ``leased``: the session's lease claimed first, as a worker does (a renewal per batch)."""
    from rolecall.api.entry import open_live
    from rolecall.api.opening import HandlerSink, Opening
    from rolecall.api.tuning import tune_gc
    from rolecall.llm.registry import ModelRegistry
    from rolecall.nats.transport import open_transport
    from rolecall.storage.sqlite import SqliteStore
    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world

    world = build_world(scripted_raw(turns), source="bench", library=RoleLibrary()).world
    stamps: list[float] = []
    models = ModelRegistry()
    if provider:
        models.register("scripted", _AsksSomeone())

    def gaps() -> float:
        return statistics.median(b - a for a, b in itertools.pairwise(stamps))

    clock = HandlerSink(lambda _: stamps.append(time.perf_counter()), "messages")
    async with contextlib.AsyncExitStack() as stack:
        store = await stack.enter_async_context(SqliteStore(data / "rolecall.db"))
        transport = None if url is None else await stack.enter_async_context(open_transport(url))
        sid = f"bench-{time.monotonic_ns()}" if transport is not None else None
        bus = None
        if transport is not None and sid is not None and leased:
            epoch = f"{time.monotonic_ns() % 0xFFFFFF:06x}"  # a worker's run of the session
            await transport.publisher.claim(sid, epoch, 0)
            from rolecall.cluster.jobs import ACK_WAIT_S

            transport.publisher.fence_s = ACK_WAIT_S / 4  # as a worker's (cluster/worker.py)

            def bus(session_id: str, first_seq: int) -> Any:
                assert transport is not None
                return transport.bus(session_id, first_seq, epoch=epoch)

        opening = Opening(
            store=store,
            models=models,
            session_id=sid,
            sinks=[clock],
            transport=transport,
            bus=bus,
        )
        session = await stack.enter_async_context(open_live(world, opening))
        tune_gc()  # as the CLI does once a session is set up
        started = time.perf_counter()
        await session.run()
        if transport is not None:
            await transport.publisher.flush()
        return time.perf_counter() - started, gaps()


async def _turn_lines(turns: int) -> list[list[bytes]]:
    """The JSON lines of ``turns`` in-process scripted turns, one list per turn (a turn
    ends with its step record), as the NATS transport publishes them."""
    from rolecall.api.entry import open_live
    from rolecall.api.opening import HandlerSink, Opening
    from rolecall.world.library import RoleLibrary
    from rolecall.world.loader import build_world

    world = build_world(scripted_raw(turns), source="bench", library=RoleLibrary()).world
    published: list[Envelope] = []
    opening = Opening(sinks=[HandlerSink(published.append, name="bench")])
    async with open_live(world, opening) as session:
        await session.run()
    out: list[list[bytes]] = [[]]
    for envelope in published:
        out[-1].append(envelope.to_json().encode())
        if envelope.topic == "system" and envelope.type == "step":
            out.append([])
    return [lines for lines in out if lines]


async def _jetstream_floor(url: str, turns: list[list[bytes]]) -> float:
    """Seconds for nats-py alone to publish ``turns`` as the transport does, without
    rolecall: each turn's messages with a message id, all but the last plainly, the last
    with JetStream's acknowledgement, waited for before the next turn."""
    import nats
    from nats.js.api import StorageType, StreamConfig

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await js.add_stream(
            StreamConfig(
                name="BENCH_FLOOR",
                subjects=["benchfloor.>"],
                storage=StorageType.FILE,
                duplicate_window=120.0,
            )
        )
        run = time.monotonic_ns()
        started = time.perf_counter()
        for t, lines in enumerate(turns):
            *body, last = lines
            for i, line in enumerate(body):
                await nc.publish(
                    "benchfloor.s.sse.chunk", line, headers={"Nats-Msg-Id": f"{run}:{t}:{i}"}
                )
            ack = await js.publish_async(
                "benchfloor.s.system.step", last, headers={"Nats-Msg-Id": f"{run}:{t}:last"}
            )
            await ack
        return time.perf_counter() - started
    finally:
        await nc.close()


def _nats_server(storage: Path) -> Any:
    from tests.nats_server import NatsServer

    return NatsServer(storage).start()


def bench_nats(quick: bool, bench_cls: Any) -> Any:
    b = bench_cls(
        "nats",
        "the NATS JetStream transport: per-turn cost over the in-process bus (every event "
        "published with JetStream acknowledgement, a turn's events batched), and batch "
        "throughput with 1, 2 and 4 local worker processes",
    )
    turns = 60 if quick else 300
    with tempfile.TemporaryDirectory() as tmp:
        server = _nats_server(Path(tmp) / "nats")
        try:
            for prefix, provider, leased in (
                ("", False, False),
                ("provider_", True, False),
                ("leased_", True, True),
            ):
                locals_, remotes = [], []
                for i in range(3):  # alternating, so that both see the machine's same moments
                    where = Path(tmp) / f"{prefix}{i}"
                    locals_.append(anyio.run(_nats_session, None, turns, where / "l", provider))
                    remotes.append(
                        anyio.run(_nats_session, server.url, turns, where / "n", provider, leased)
                    )
                local, remote = min(t for t, _ in locals_), min(t for t, _ in remotes)
                b.add(f"{prefix}inproc_ms_per_turn", local / turns * 1000, "ms")
                b.add(f"{prefix}nats_ms_per_turn", remote / turns * 1000, "ms")
                b.add(f"{prefix}overhead_ms_per_turn", (remote - local) / turns * 1000, "ms")
                pairs = zip(remotes, locals_, strict=True)
                gap = statistics.median(r - loc for (_, r), (_, loc) in pairs)
                b.add(f"{prefix}overhead_median_ms_per_turn", gap * 1000, "ms")
            b.target("overhead_ms_per_turn", 0.5, "issue 19: at most 0.5 ms per turn extra")
            lines = anyio.run(_turn_lines, turns)
            floor = min(anyio.run(_jetstream_floor, server.url, lines) for _ in range(3))
            b.add("jetstream_floor_ms_per_turn", floor / len(lines) * 1000, "ms")
            counts = (1, 2) if quick else (1, 2, 4)
            runs, run_turns = (8, 6) if quick else (32, 12)
            for n in counts:
                b.add(
                    f"workers_{n}_turns_per_s",
                    _workers_throughput(server.url, Path(tmp) / f"w{n}", n, runs, run_turns),
                    "turns/s",
                )
        finally:
            server.stop()
    b.method = {
        "overhead": f"one session of {turns} scripted turns, best of 3, SQLite store attached; "
        "the scripted model generates in process, so its turns do not wait for the stream's "
        "acknowledgements (they follow, pipelined; the time counts until the last is in)",
        "provider_overhead": "the same with the scripted model counted as a provider "
        "(repeatable false): each request waits until the stream holds every turn before "
        "it, as a real provider's request does (no target: a provider's reply takes far "
        "longer than this wait)",
        "leased_overhead": "the provider case with the session's lease claimed first, as a "
        "worker runs it: each batch of events carries a renewal of the lease that JetStream "
        "checks (expected last subject sequence) and answers with the batch's own "
        "acknowledgement (the fence against a worker that lost its job; docs/nats.md)",
        "overhead_median": "the same 3 pairs of sessions (run alternately): the median over "
        "the pairs of the difference between their median times from one message to the "
        "next (less moved by this machine's pauses than the totals)",
        "jetstream_floor": "nats-py alone publishing the same turns' JSON lines (the lines of "
        "an in-process run, a turn ending with its step record) as the transport does: each "
        "with a message id, the turn's last one acknowledged and waited for; best of 3. "
        "What one message per event and a turn committed before the next cost on this "
        "machine without rolecall",
        "workers": "each worker a `rolecall worker` process (its own data dir, --concurrency 8); "
        "turns/s from submitting `batch --nats` to its last result",
    }
    return b


def _workers_throughput(url: str, folder: Path, workers: int, runs: int, turns: int) -> float:
    import yaml

    folder.mkdir(parents=True)
    world = folder / "world.yaml"
    world.write_text(yaml.safe_dump(scripted_raw(turns)), encoding="utf-8")
    env = {**os.environ, "ROLECALL_HOME": str(folder / "submit"), "NO_COLOR": "1"}
    exe = [sys.executable, "-m", "rolecall.cli.main"]
    procs = []
    for i in range(workers):
        wenv = {**env, "ROLECALL_HOME": str(folder / f"w{i}")}
        p = subprocess.Popen(
            [*exe, "worker", "--nats", url, "-q"],
            env=wenv,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert p.stderr is not None
        p.stderr.readline()  # ready:
        procs.append(p)
    try:
        started = time.perf_counter()
        done = subprocess.run(
            [*exe, "batch", str(world), "--runs", str(runs), "--nats", url, "-q",
             "--name", f"w{workers}-{time.monotonic_ns()}"],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        wall = time.perf_counter() - started
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.communicate(timeout=30)
    if done.returncode != 0:
        raise RuntimeError(f"batch --nats failed: {done.stderr[-500:]}")
    return runs * turns / wall


# ----------------------------------------------------------------------- many sessions
def _cpu_s(pid: int) -> float:
    """A running process's user + system CPU seconds so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _queued_s(pid: int) -> float:
    """Seconds a running process's threads have waited so far, runnable, for a CPU
    (the run queue; /proc/PID/task/*/schedstat); 0.0 where the kernel does not say."""
    total = 0
    for stat in Path(f"/proc/{pid}/task").glob("*/schedstat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(stat.read_text().split()[1])
    return total / 1e9


def _machine_busy() -> tuple[float, float]:
    """(busy CPU seconds, elapsed CPU seconds) of the whole machine so far (/proc/stat)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    return (sum(fields) - fields[3] - fields[4]) / tick, sum(fields) / tick


def _slow_raw(base_url: str, replies: int) -> dict[str, Any]:
    """A session of ``replies`` replies from the loopback provider (settings.client: http)."""
    return {
        "name": "slow",
        "topic": "t",
        "model": "openai/bench-model",
        "settings": {"api_base": base_url, "retries": 0, "timeout": 60, "client": "http"},
        "roles": [{"id": "a"}, {"id": "b"}],
        "flow": {"steps": [{"id": f"s{i}", "speaker": "ab"[i % 2]} for i in range(replies)]},
    }


def _in_process(folder: Path, raw: dict[str, Any], sessions: int) -> tuple[float, int, float]:
    """(wall s, replies, this process's CPU s) of ``sessions`` sessions at once in one process."""
    cpu0 = time.process_time()
    wall, done = anyio.run(run_batch, folder, raw, sessions, sessions)
    return wall, done, time.process_time() - cpu0


def _on_workers(
    url: str, nats_pid: int, folder: Path, raw: dict[str, Any], sessions: int, workers: int
) -> tuple[float, int, dict[str, float], dict[str, float]]:
    """(wall s, replies, CPU s by process, run-queue wait s by process) of ``sessions``
    sessions submitted with ``batch --nats`` to ``workers`` worker processes (each taking
    sessions/workers at once)."""
    import json

    import yaml

    folder.mkdir(parents=True)
    world = folder / "world.yaml"
    world.write_text(yaml.safe_dump(raw), encoding="utf-8")
    env = {**os.environ, "ROLECALL_HOME": str(folder / "submit"), "NO_COLOR": "1"}
    exe = [sys.executable, "-m", "rolecall.cli.main"]
    each = -(-sessions // workers)
    procs = []
    for i in range(workers):
        p = subprocess.Popen(
            [*exe, "worker", "--nats", url, "-q", "--concurrency", str(each)],
            env={**env, "ROLECALL_HOME": str(folder / f"w{i}")},
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert p.stderr is not None
        p.stderr.readline()  # ready:
        procs.append(p)
    out = folder / "results.jsonl"
    pids = {f"worker{i}": p.pid for i, p in enumerate(procs)} | {"nats-server": nats_pid}
    try:
        before = {k: _cpu_s(pid) for k, pid in pids.items()}
        waited = {k: _queued_s(pid) for k, pid in pids.items()}
        started = time.perf_counter()
        submit = subprocess.Popen(
            [*exe, "batch", str(world), "--runs", str(sessions), "--nats", url, "-q",
             "--out", str(out), "--name", f"s{sessions}-{time.monotonic_ns()}"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert submit.stderr is not None
        error = submit.stderr.read()
        _, status, usage = os.wait4(submit.pid, 0)
        wall = time.perf_counter() - started
        submit.returncode = os.waitstatus_to_exitcode(status)
        cpu = {k: _cpu_s(pid) - before[k] for k, pid in pids.items()}
        cpu["batch"] = usage.ru_utime + usage.ru_stime
        queued = {k: _queued_s(pid) - waited[k] for k, pid in pids.items()}
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            p.communicate(timeout=60)
    if submit.returncode != 0:
        raise RuntimeError(f"batch --nats exited {submit.returncode}: {error[-500:]}")
    rows = [json.loads(line) for line in out.read_text("utf-8").splitlines() if line.strip()]
    queued["sessions_span_s"] = _sessions_span([folder / f"w{i}" for i in range(workers)])
    return wall, sum(int(row.get("turns") or 0) for row in rows), cpu, queued


def _sessions_span(homes: list[Path]) -> float:
    """Seconds from the first session's start to the last one's last event, read from the
    workers' stores: the batch's time without the ``batch`` command's start-up and
    submission, and without the workers' exit."""
    import sqlite3
    from datetime import datetime

    first: list[datetime] = []
    last: list[datetime] = []
    for home in homes:
        with contextlib.closing(sqlite3.connect(home / "rolecall.db")) as db:
            row = db.execute("SELECT MIN(created_at), MAX(updated_at) FROM sessions").fetchone()
        if row[0] is not None:
            first.append(datetime.fromisoformat(row[0]))
            last.append(datetime.fromisoformat(row[1]))
    return (max(last) - min(first)).total_seconds() if first else 0.0


SIZES = (100, 200, 400)
WHERE = ("inproc", "nats2")


def bench_sessions(
    quick: bool,
    bench_cls: Any,
    *,
    sizes: tuple[int, ...] | None = None,
    where: tuple[str, ...] = WHERE,
    repeat: int = 1,
) -> Any:
    """``sizes`` (default 100, 200, 400; quick: 20, 40) sessions at once, in one process
    and/or on 2 workers (``where``), each ``repeat`` times: the figures are the best
    run's (the most replies a second), every run is in ``details``."""
    b = bench_cls(
        "sessions",
        "many sessions on this machine (issue 39): replies/s and the fraction of ideal for "
        "100, 200 and 400 sessions at once whose every reply takes 200 ms from the loopback "
        "provider (settings.client: http), in one process and on 2 NATS worker processes, "
        "with the CPU a reply across every process",
    )
    sizes = sizes or ((20, 40) if quick else SIZES)
    replies = 5 if quick else 20  # a session: 4 s at the ideal
    hold = 0.2
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench")
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    provider = subprocess.Popen(
        [sys.executable, str(ROOT / "scripts" / "bench_provider.py"), str(hold)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert provider.stdout is not None
    assert provider.stdin is not None
    raw = _slow_raw(provider.stdout.readline().strip(), replies)
    details: dict[str, Any] = {"load_average": {}, "runs": []}
    best: dict[tuple[int, str], dict[str, Any]] = {}

    def keep(n: int, part: str, run: dict[str, Any]) -> None:
        details["runs"].append({"sessions": n, "where": part, **run})
        if (n, part) not in best or run["replies_per_s"] > best[n, part]["replies_per_s"]:
            best[n, part] = run

    try:
        with tempfile.TemporaryDirectory() as tmp:
            anyio.run(run_batch, Path(tmp) / "warm", raw, 1, 1)  # the client's first import
            server = _nats_server(Path(tmp) / "nats") if "nats2" in where else None
            try:
                for n, k in itertools.product(sizes, range(repeat)):
                    details["load_average"].setdefault(str(n), []).append(
                        [round(x, 2) for x in os.getloadavg()]
                    )
                    for part in where:
                        folder = Path(tmp) / f"{part}{n}-{k}"
                        p0, m0 = _cpu_s(provider.pid), _machine_busy()
                        if part == "inproc":
                            wall, done, cpu = _in_process(folder, raw, n)
                            by, queued = {"this": cpu}, {}
                        else:
                            assert server is not None
                            assert server.process is not None
                            wall, done, by, queued = _on_workers(
                                server.url, server.process.pid, folder, raw, n, 2
                            )
                            span = queued.pop("sessions_span_s")
                        m1 = _machine_busy()
                        keep(n, part, {
                            "replies": done,
                            "wall_s": round(wall, 3),
                            "sessions_span_s": round(wall if part == "inproc" else span, 3),
                            "replies_per_s": round(done / wall, 2),
                            "cpu_s": {k: round(v, 3) for k, v in by.items()},
                            "run_queue_wait_s": {k: round(v, 3) for k, v in queued.items()},
                            "provider_cpu_s": round(_cpu_s(provider.pid) - p0, 3),
                            "machine_busy_cpus": round(
                                (m1[0] - m0[0]) / max(m1[1] - m0[1], 1e-9) * (os.cpu_count() or 1),
                                2,
                            ),
                        })  # fmt: skip
            finally:
                if server is not None:
                    server.stop()
    finally:
        provider.stdin.close()
        provider.wait(timeout=30)
    for (n, part), run in sorted(best.items()):
        ideal, done = n / hold, run["replies"]
        b.add(f"s{n}_{part}_replies_per_s", run["replies_per_s"], "replies/s")
        b.add(f"s{n}_{part}_fraction_of_ideal", run["replies_per_s"] / ideal, "ratio")
        if part == "nats2":  # what the in-process figure measures: the sessions' own time
            span = max(run["sessions_span_s"], 1e-9)
            b.add(f"s{n}_nats2_sessions_fraction_of_ideal", done / span / ideal, "ratio")
        cpu = sum(run["cpu_s"].values())
        b.add(f"s{n}_{part}_cpu_ms_per_reply", cpu / max(done, 1) * 1000, "ms")
        b.check(f"s{n}_{part}_every_reply", done == n * replies, f"{done} replies")
        # kept under their former names too: earlier reports compare with these
        details[f"s{n}_{'inproc' if part == 'inproc' else 'nats'}_provider_cpu_s"] = run[
            "provider_cpu_s"
        ]
        if part == "nats2":
            details[f"s{n}_nats_cpu_s"] = run["cpu_s"]
            workers = sum(v for k, v in run["cpu_s"].items() if k.startswith("worker"))
            b.add(f"s{n}_nats2_worker_replies_per_cpu_s", done / max(workers, 1e-9), "replies/s")
    # issue 50, decision 6: the "200 sessions on 2 workers at >= 75% of ideal" target is
    # retired (the machine's two CPUs also run the provider); what a worker's CPU gives is
    # reported instead: replies per CPU-second of a worker (sN_nats2_worker_replies_per_cpu_s)
    b.details = details
    b.method = {
        "sessions": f"{', '.join(map(str, sizes))} sessions at once, each of {replies} replies "
        f"(two roles, a flow of {replies} steps), every reply held {hold * 1000:.0f} ms by the "
        "loopback provider (scripts/bench_provider.py, a process of its own) and streamed "
        "through settings.client: http; ideal = sessions / 0.2 replies/s",
        "inproc": "one `rolecall batch` in this process (the BatchRunner, --concurrency = "
        "sessions, SQLite store and memory files); CPU: this process's",
        "nats2": "a real nats-server -js, 2 `rolecall worker` processes (--concurrency "
        "sessions/2 each, their own data dirs) started before the clock, then `rolecall batch "
        "WORLD --runs N --nats URL --out FILE` from its spawn to its exit (its start-up "
        "included); replies counted from the results file; CPU: the workers' and "
        "nats-server's during the batch (/proc/PID/stat) plus the whole batch command's "
        "(wait4, its start-up included)",
        "nats2_sessions": "sN_nats2_sessions_fraction_of_ideal: the same replies over the "
        "sessions' own time (details.runs[].sessions_span_s: from the first session's start "
        "to the last one's last event, read from the workers' stores), without the batch "
        "command's start-up and submission: what the in-process figure measures",
        "provider": "the loopback provider's own CPU is in details (*_provider_cpu_s), not in "
        "the figures: it stands for the model",
        "load": "details.load_average: the machine's 1/5/15-minute load before each size "
        "(and repeat)",
        "runs": f"each size and part run {repeat} time(s), the figures from the run with the "
        "most replies a second; details.runs: every run, with each process's CPU, the time "
        "its threads waited runnable for a CPU (run_queue_wait_s, /proc/PID/task/*/schedstat: "
        "the machine too busy to run it) and how many of the machine's CPUs were busy, by "
        "any process (machine_busy_cpus, /proc/stat)",
    }
    return b
