"""CPU per reply, rolecall against litellm alone and against its peers (issue 50).

``bench_cpu_per_reply`` (run by ``scripts/bench.py --peers`` or ``--only cpu_per_reply``):

* one loopback OpenAI-compatible server in a process of its own
  (``scripts/bench_latency.py serve 0 50``) streams every reply of every contender as the
  same 50 words, back to back;
* each contender runs as a child process doing a two-speaker dialogue of N+M replies,
  then of M, against that server; a run's CPU is the whole child's user+system time
  (``wait4``), and the replies are the requests the server counted during the run;
  **CPU per reply** = (CPU of the N+M run - CPU of the M run) / (their replies' difference),
  so start-up and imports cancel out;
* the contenders: rolecall (``rolecall run WORLD --json -q``, two roles in a loop,
  ``settings.client: http`` and ``settings.client: litellm``), a bare
  ``litellm.acompletion(stream=True)`` loop, AutoGen AgentChat 0.7.5 and AG2 1.2.1
  (``scripts/bench_peers.py``, each peer in its own virtualenv under the user's cache);
* the first token (decision 2): a second server (4 words a reply, 50 ms apart) and
  rolecall through litellm against the bare litellm loop printing a JSON line a chunk:
  the time from the server writing a reply's first chunk to its line reaching this
  process (``bench_latency``'s method), the first reply left out.
"""

from __future__ import annotations

import compileall
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PEERS_SCRIPT = HERE / "bench_peers.py"
WORDS = 50  # words a reply, one chunk each, for every contender
AG2_PINS = ("ag2[openai]==1.2.1",)
AG2_PROBE = (
    "import json, ag2, ag2.config.openai; "
    "from importlib.metadata import version; print(json.dumps({'ag2': version('ag2')}))"
)
INSTALL_TIMEOUT = 900.0
RUN_TIMEOUT = 900.0  # seconds for one contender's run (litellm's import alone takes seconds)
LATENCIES_S = (1, 5, 20)  # reply latencies for the sessions-per-core figures (decision 6)


def _bench_latency() -> Any:
    if str(HERE) not in sys.path:
        sys.path.insert(0, str(HERE))
    import bench_latency

    return bench_latency


def _rolecall_dir() -> Path:
    """The rolecall package the children run (``python -m rolecall.cli.main``)."""
    spec = importlib.util.find_spec("rolecall")
    assert spec is not None
    assert spec.submodule_search_locations
    return Path(next(iter(spec.submodule_search_locations)))


def peer_venv(name: str) -> Path:
    """A peer's virtualenv: ``$ROLECALL_BENCH_<NAME>_VENV``, else under the user's cache."""
    explicit = os.environ.get(f"ROLECALL_BENCH_{name.upper()}_VENV")
    if explicit:
        return Path(explicit).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "rolecall-bench" / f"{name}-venv"


def _probe(python: Path, code: str) -> dict[str, str] | None:
    if not python.exists():
        return None
    try:
        proc = subprocess.run(
            [str(python), "-I", "-c", code], capture_output=True, text=True, timeout=240,
            check=False,
        )  # fmt: skip
        versions = json.loads(proc.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None
    return versions if proc.returncode == 0 and isinstance(versions, dict) else None


def ensure_ag2(
    unavailable: type[Exception], progress: Callable[[str], None]
) -> tuple[Path, dict[str, Any]]:
    """AG2's virtualenv python, created and installed (``AG2_PINS``) when missing."""
    venv = peer_venv("ag2")
    python = venv / "bin" / "python"
    info: dict[str, Any] = {"venv": str(venv), "pins": list(AG2_PINS)}
    wanted = AG2_PINS[0].split("==")[1]
    if (_probe(python, AG2_PROBE) or {}).get("ag2") == wanted:
        info["installed"] = "already present"
        return python, info
    steps = [] if python.exists() else [[sys.executable, "-m", "venv", str(venv)]]
    steps.append(
        [str(python), "-m", "pip", "install", "--disable-pip-version-check", "-q", *AG2_PINS]
    )
    t0 = time.perf_counter()
    for cmd in steps:
        progress(f"cpu_per_reply: {' '.join(cmd)}")
        try:
            proc = subprocess.run(
                cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise unavailable(f"`{' '.join(cmd)}` failed: {exc}") from exc
        if proc.returncode != 0:
            lines = [ln for ln in proc.stderr.splitlines() if not ln.startswith("WARNING: Loc")]
            raise unavailable(
                f"`{' '.join(cmd)}` exited {proc.returncode}: " + "\n".join(lines)[-2000:]
            )
    versions = _probe(python, AG2_PROBE)
    if (versions or {}).get("ag2") != wanted:
        raise unavailable(f"AG2 installed in {venv} but not importable as pinned: {versions}")
    info["installed"] = f"now, in {time.perf_counter() - t0:.1f} s"
    return python, info


class Server:
    """``bench_latency.py serve GAP CHUNKS`` in its own process, and its request counts."""

    def __init__(self, gap: float, chunks: int) -> None:
        self.proc, self.base = _bench_latency()._server(gap, chunks)
        self.root = self.base.removesuffix("/v1")

    def reset(self) -> None:
        _bench_latency()._post(self.root + "/reset")

    def served(self) -> int:
        return len(_bench_latency()._get(self.root + "/stamps")["arrived"])

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cpu_of(argv: list[str], env: dict[str, str], errors: Path) -> float:
    """Run ``argv`` to its end, stdout discarded: its user+system CPU seconds (``wait4``)."""
    with errors.open("wb") as err:
        proc = subprocess.Popen(
            argv, env=env, cwd=HERE.parent, stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=err,
        )  # fmt: skip
    watchdog = threading.Timer(RUN_TIMEOUT, proc.kill)
    watchdog.start()
    try:
        _, status, usage = os.wait4(proc.pid, 0)
    finally:
        watchdog.cancel()
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = errors.read_text("utf-8", "replace")[-1500:]
        raise RuntimeError(f"{' '.join(argv[:5])}... exited {proc.returncode}: {tail}")
    return usage.ru_utime + usage.ru_stime


def bench_cpu_per_reply(
    quick: bool,
    bench_cls: Any,
    ensure_autogen: Callable[[], tuple[Path, dict[str, Any]]],
    unavailable: type[Exception],
    progress: Callable[[str], None],
) -> Any:
    lat = _bench_latency()
    b = bench_cls(
        "cpu_per_reply",
        "marginal CPU per 50-word streamed reply of a two-speaker dialogue against one "
        "loopback OpenAI-compatible server: rolecall (http, litellm), a bare litellm loop, "
        "AutoGen and AG2, in one run; and rolecall's first token through litellm against "
        "the bare loop's",
    )
    many, few, repeats = (12, 4, 1) if quick else (210, 10, 2)
    ft_replies = 6 if quick else 21
    pythons: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for peer, ensure in (
        ("autogen", ensure_autogen),
        ("ag2", lambda: ensure_ag2(unavailable, progress)),
    ):
        try:
            pythons[peer], b.details[f"{peer}_venv"] = ensure()
        except unavailable as exc:
            missing[peer] = str(exc)
            progress(f"cpu_per_reply: {peer} unavailable: {exc}")
    peer = [str(PEERS_SCRIPT)]
    contenders = ["http", "litellm", "bare_litellm", *pythons]
    cpu: dict[str, dict[int, list[tuple[float, int]]]] = {
        c: {many: [], few: []} for c in contenders
    }
    server = Server(0.0, WORDS)
    paced = Server(0.05, lat.CHUNKS)
    try:
        with tempfile.TemporaryDirectory(prefix="rolecall-bench-cpu-") as name:
            tmp = Path(name)
            env = lat.child_env(tmp / "home")

            def argv(who: str, base: str, n: int, tag: str) -> list[str]:
                if who in ("http", "litellm"):
                    path = tmp / f"{who}-{tag}.json"
                    path.write_text(json.dumps(lat.world(base, who, n)), encoding="utf-8")
                    return [sys.executable, "-m", "rolecall.cli.main", "run", str(path), "--json",
                            "-q", "--data-dir", str(tmp / f"data-{who}-{tag}")]  # fmt: skip
                if who == "bare_litellm":
                    return [sys.executable, "-I", *peer, "litellm", base, str(n)]
                return [str(pythons[who]), "-I", *peer, who, base, str(n)]

            # a warm-up run of each, not counted: rolecall's modules compiled to bytecode
            # (as pip installs them) and every contender's files in the page cache, so that
            # the first long run pays nothing the short runs after it do not
            compileall.compile_dir(str(_rolecall_dir()), quiet=1)
            for who in contenders:
                server.reset()
                cpu_of(argv(who, server.base, few, "warm"), env, tmp / "err")
            for r in range(repeats):  # interleaved, so that load changes hit every one alike
                for n in (many, few):
                    for who in contenders:
                        server.reset()
                        used = cpu_of(argv(who, server.base, n, f"{n}-{r}"), env, tmp / "err")
                        served = server.served()
                        cpu[who][n].append((used, served))
                        progress(
                            f"cpu_per_reply {who} {n} replies, repeat {r + 1}/{repeats}: "
                            f"{used:.2f} s CPU, {served} requests served"
                        )
            # the first token through litellm: rolecall against the bare loop
            firsts: dict[str, list[float]] = {}
            for who in ("litellm", "bare_litellm"):
                paced.reset()
                cmd = argv(who, paced.base, ft_replies, "first")
                if who == "bare_litellm":
                    cmd.append("lines")
                reader, _, _ = lat.run_child(cmd, env)
                firsts[who] = lat.added_latencies(reader, paced.base)
    finally:
        server.close()
        paced.close()

    marginal: dict[str, float] = {}
    for who in contenders:
        per = [
            (big - small) / (n_big - n_small) * 1000
            for (big, n_big), (small, n_small) in zip(cpu[who][many], cpu[who][few], strict=True)
        ]
        marginal[who] = statistics.median(per)
        b.details[f"{who}_cpu_ms_per_reply_repeats"] = [round(x, 3) for x in per]
        b.details[f"{who}_runs"] = {
            str(n): [{"cpu_s": round(c, 3), "served": s} for c, s in runs]
            for n, runs in cpu[who].items()
        }
        b.add(f"{who}_cpu_ms_per_reply", marginal[who], "ms")
        b.add(f"{who}_start_cpu_s", min(c for c, _ in cpu[who][few]), "s")
    served_ok = all(s > 0 for runs in cpu.values() for n in runs.values() for _, s in n)
    counts = {who: sorted({s for n in runs.values() for _, s in n}) for who, runs in cpu.items()}
    exact = all(sorted({s for _, s in cpu[w][n]}) == [n] for w in contenders for n in (many, few))
    b.check(
        "every_reply_served",
        served_ok and exact,
        f"requests the server counted in each contender's runs: {counts} (asked: {many} and {few})",
    )
    # decision 2: rolecall's own work on top of litellm
    b.add("litellm_to_bare_litellm_ratio", marginal["litellm"] / marginal["bare_litellm"], "ratio")
    paired = zip(
        b.details["litellm_cpu_ms_per_reply_repeats"],
        b.details["bare_litellm_cpu_ms_per_reply_repeats"],
        strict=True,
    )  # each repeat's two runs side by side in time: how much of the ratio is load
    b.details["litellm_to_bare_litellm_ratio_repeats"] = [
        round(ours / bare, 3) for ours, bare in paired
    ]
    b.target(
        "litellm_to_bare_litellm_ratio",
        1.2,
        "issue 50, decision 2: rolecall through litellm adds at most 20% to a bare "
        "litellm.acompletion loop's CPU per reply",
    )
    for who, values in firsts.items():
        b.details[f"{who}_first_token_added_ms"] = [round(x, 3) for x in values]
        b.add(f"{who}_first_token_added_p50_ms", statistics.median(values), "ms")
    b.add(
        "litellm_first_token_over_bare_ms",
        b.figures["litellm_first_token_added_p50_ms"]
        - b.figures["bare_litellm_first_token_added_p50_ms"],
        "ms",
    )
    b.target(
        "litellm_first_token_over_bare_ms",
        1.0,
        "issue 50, decision 2: rolecall through litellm adds at most 1 ms to the bare "
        "litellm loop's first token (p50)",
    )
    # decision 3: the default path against the best peer
    available = [p for p in ("autogen", "ag2") if p in pythons]
    if available:
        best = min(available, key=lambda p: marginal[p])
        b.details["best_peer"] = best
        b.add("best_peer_cpu_ms_per_reply", marginal[best], "ms")
        b.add("http_to_best_peer_ratio", marginal["http"] / marginal[best], "ratio")
        b.add("litellm_to_best_peer_ratio", marginal["litellm"] / marginal[best], "ratio")
        b.target(
            "http_to_best_peer_ratio",
            0.125,
            f"issue 50, decision 3: rolecall's default path (client: http) at most one "
            f"eighth of the best peer's CPU per reply (here {best})",
        )
    # decision 6: what a worker's CPU gives
    per_s = 1000 / marginal["http"]
    b.add("http_replies_per_cpu_s", per_s, "replies/s")
    for seconds in LATENCIES_S:
        b.add(f"http_sessions_per_core_at_{seconds}s_replies", per_s * seconds, "sessions")
    if missing:
        b.error = "unavailable: " + "; ".join(f"{p}: {why}" for p, why in missing.items())
        b.details["unavailable"] = True
    b.method = {
        "server": f"scripts/bench_latency.py serve 0 {WORDS}: every reply {WORDS} words, a "
        "chunk each, back to back, then a finish reason, usage and [DONE]; a process of "
        "its own (aiohttp); it counts the requests of each run",
        "cpu": f"rolecall's modules compiled to bytecode first (compileall) and a warm-up run "
        f"of {few} replies of each contender, not counted; then each contender as a child "
        f"process, {many} replies then {few}, interleaved with the others, {repeats} "
        "repeat(s); the child's user+system CPU (wait4); CPU per reply = (CPU of the long "
        "run - CPU of the short run) / (the server's request counts' difference): start-up "
        "and imports cancel out; the median of the repeats; "
        "litellm_to_bare_litellm_ratio_repeats: each repeat's own ratio (its two runs close "
        "in time), how much of the ratio is the machine's load",
        "http, litellm": "`python -m rolecall.cli.main run WORLD --json -q --data-dir "
        "FRESH` (stdout discarded), two roles in a loop on openai/bench-model at the "
        "loopback api_base, settings.client http or litellm: every message and its events "
        "stored in SQLite and the memory files, JSON events written to stdout",
        "bare_litellm": "scripts/bench_peers.py litellm, in rolecall's venv (the same "
        "litellm): a loop of litellm.acompletion(stream=True), two speakers, a system "
        "message and the last 12 messages a request, asking for what rolecall's litellm "
        "client asks for (stream_options include_usage, max_retries 0, timeout 30, "
        "max_tokens 1024, the four stop sequences of reply hygiene), streaming logging off "
        "as rolecall's client has it with no litellm callback; it reads each chunk's text "
        "(rolecall also its finish reason, usage and tool-call pieces, stores and prints "
        "everything: its own work); nothing stored, nothing printed",
        "autogen": "scripts/bench_peers.py autogen in the AutoGen venv (autogen-agentchat, "
        "autogen-ext[openai] 0.7.5): RoundRobinGroupChat of two AssistantAgents, "
        "model_client_stream=True through one OpenAIChatCompletionClient, "
        "BufferedChatCompletionContext(12); nothing stored",
        "ag2": f"scripts/bench_peers.py ag2 in the AG2 venv ({', '.join(AG2_PINS)}): two "
        "ag2.Agents streaming through AG2's OpenAI client (OpenAIConfig(streaming=True)), "
        "taking turns, each reply one agent.ask given the last 12 messages; nothing stored",
        "first_token": f"scripts/bench_latency.py serve 0.05 {lat.CHUNKS} (the first chunk of "
        f"each reply stamped as it leaves); {ft_replies} replies of rolecall through litellm "
        "(`run WORLD --json -q`) and of the bare loop printing a JSON line a chunk; added = "
        "the line's arrival here less the stamp, the first reply left out; p50",
        "sessions_per_core": "http_replies_per_cpu_s = 1000 / http_cpu_ms_per_reply; "
        "sessions a core keeps busy at a reply latency L = replies per CPU-second × L (a "
        "session waits L for each reply; CPU only, a core at 100%)",
    }
    return b
