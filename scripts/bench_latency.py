"""What a user feels with a real model: the latency rolecall adds to the first token, its
CPU per reply, and the time from the command to the first token (issue 39).

Measured from outside the process under test, against a floor doing the same work by hand:

* a loopback OpenAI-compatible server (``python scripts/bench_latency.py serve GAP``, a
  process of its own on aiohttp) streams every reply as ``CHUNKS`` words ``GAP`` seconds
  apart and notes ``time.monotonic_ns()`` as each reply's first chunk leaves it (and as
  each request arrives); ``GET /stamps`` gives them;
* the client under test runs as a child process whose stdout this process reads line by
  line on a thread of its own, noting ``time.monotonic_ns()`` as each line arrives
  (CLOCK_MONOTONIC is one clock for every process of the machine);
* a reply's **added latency** is the arrival of its first token's line here less the
  moment the server sent that token: the client's reading, parsing, its event path and
  its sink, and the pipe;
* the **floor** (``python scripts/bench_latency.py floor URL N DB``) is raw aiohttp: it
  sends the same request, parses the same stream, prints one JSON line a chunk (flushed),
  and commits one SQLite row a reply: what any client doing this work pays at least.

Imported by ``scripts/bench.py`` (``bench_first_token``); the modes above are this
file's command line.
"""

from __future__ import annotations

import asyncio
import compileall
import contextlib
import itertools
import json
import os
import re
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHUNKS = 4  # words a reply
CPR = b"\x1b[6n"  # a cursor position request; prompt-toolkit waits up to 1 s
MARK = "tok"  # a reply's words are tok<reply>_<k>: the first token is k == 0
FIRST = re.compile(rb"tok(\d+)_0\b")  # a first token (never "output_tokens", a field)


# ----------------------------------------------------------------------------- server
async def serve(gap: float, chunks: int = CHUNKS) -> None:
    from aiohttp import web

    first_sent: list[int] = []
    arrived: list[int] = []

    def event(model: str, delta: dict[str, Any] | None, **extra: Any) -> bytes:
        choices = [] if delta is None else [{"index": 0, "delta": delta, **extra}]
        body: dict[str, Any] = {"id": "lat", "object": "chat.completion.chunk", "model": model}
        body["choices"] = choices
        if delta is None:
            body["usage"] = {
                "prompt_tokens": 11,
                "completion_tokens": chunks,
                "total_tokens": 11 + chunks,
            }
        return f"data: {json.dumps(body)}\n\n".encode()

    async def completions(request: web.Request) -> web.StreamResponse:
        arrived.append(time.monotonic_ns())
        model = str((await request.json()).get("model", "bench"))
        reply = len(arrived) - 1
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for k in range(chunks):
            if k:
                await asyncio.sleep(gap)
            chunk = event(model, {"content": f"{MARK}{reply}_{k} "}, finish_reason=None)
            if k == 0:
                first_sent.append(time.monotonic_ns())
            await response.write(chunk)
        await response.write(event(model, {}, finish_reason="stop"))
        await response.write(event(model, None))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def stamps(request: web.Request) -> web.Response:
        return web.json_response({"first_sent": first_sent, "arrived": arrived})

    async def reset(request: web.Request) -> web.Response:
        first_sent.clear()
        arrived.clear()
        return web.json_response({})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    app.router.add_get("/stamps", stamps)
    app.router.add_post("/reset", reset)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()


# ----------------------------------------------------------------------------- floor
async def floor(url: str, replies: int, db_path: str, lines: bool = False) -> None:
    """Raw aiohttp: the same request and stream, a JSON line a chunk, a row a reply; with
    ``lines``, one reply for each line read from stdin (until its end) instead."""
    import aiohttp

    loop = asyncio.get_running_loop()

    db = sqlite3.connect(db_path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")
    db.execute("CREATE TABLE IF NOT EXISTS messages (id INTEGER PRIMARY KEY, body TEXT)")
    out = sys.stdout
    body = {
        "model": "bench-model",
        "messages": [{"role": "user", "content": "hello"}],
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with aiohttp.ClientSession() as session:
        for _ in range(replies) if not lines else itertools.count():
            if lines and not await loop.run_in_executor(None, sys.stdin.readline):
                break
            text = []
            async with session.post(f"{url}/chat/completions", json=body) as response:
                async for raw in response.content:
                    line = raw.strip()
                    if not line.startswith(b"data: ") or line == b"data: [DONE]":
                        continue
                    chunk = json.loads(line[6:])
                    for choice in chunk.get("choices", ()):
                        delta = choice.get("delta", {}).get("content")
                        if delta:
                            text.append(delta)
                            out.write(json.dumps({"type": "chunk", "delta": delta}) + "\n")
                            out.flush()
            db.execute("BEGIN")
            db.execute("INSERT INTO messages (body) VALUES (?)", (json.dumps("".join(text)),))
            db.execute("COMMIT")
    db.close()


# ----------------------------------------------------------------------------- measuring
class Reader:
    """A child's stdout read line by line on a thread, each line stamped as it arrives."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self.lines: list[tuple[int, bytes]] = []
        self.first_at: int | None = None
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        readline = self.proc.stdout.readline
        while True:
            line = readline()
            if not line:
                return
            now = time.monotonic_ns()
            self.lines.append((now, line))
            if self.first_at is None and FIRST.search(line):
                self.first_at = now

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    def first_tokens(self) -> dict[int, int]:
        """Reply number -> when the line with its first token arrived."""
        found: dict[int, int] = {}
        for at, line in self.lines:
            for match in FIRST.finditer(line):
                found.setdefault(int(match.group(1)), at)
        return found


class PtyReader:
    """A child's terminal (the master side of its pty) read as it comes, each read stamped.

    It answers the cursor position requests a terminal emulator answers: prompt-toolkit
    waits up to 1 s for each answer before it prints above its prompt, so a bare pty would
    add that second to every message typed in the REPL (no person's terminal does)."""

    def __init__(self, proc: subprocess.Popen[bytes], master: int) -> None:
        self.proc = proc
        self.master = master
        self.buf = bytearray()
        self.ends: list[tuple[int, int]] = []  # (offset just past a read, when it arrived)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            try:
                data = os.read(self.master, 65536)
            except OSError:  # EIO: the child closed its terminal
                return
            if not data:
                return
            now = time.monotonic_ns()
            with self._lock:
                start = max(len(self.buf) - len(CPR) + 1, 0)  # a request split across reads
                self.buf += data
                self.ends.append((len(self.buf), now))
                asked = self.buf.count(CPR, start)
            for _ in range(asked):  # answered as a terminal emulator answers it
                os.write(self.master, b"\x1b[1;1R")

    def wait_for(self, pattern: bytes, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while pattern not in self.buf:
            if time.monotonic() > deadline or self.proc.poll() is not None:
                tail = bytes(self.buf[-400:])
                raise RuntimeError(f"{pattern!r} never appeared on the terminal: {tail!r}")
            time.sleep(0.002)

    def first_tokens(self) -> dict[int, int]:
        """Reply number -> when the read that completed its first token arrived."""
        with self._lock:
            buf, ends = bytes(self.buf), list(self.ends)
        found: dict[int, int] = {}
        k = 0
        for match in FIRST.finditer(buf):
            while ends[k][0] < match.end():
                k += 1
            found.setdefault(int(match.group(1)), ends[k][1])
        return found

    def close(self, timeout: float = 60.0) -> None:
        try:
            self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._thread.join(5)
            os.close(self.master)


def spawn_pty(argv: list[str], env: dict[str, str]) -> PtyReader:
    """Start ``argv`` on a terminal of its own (a pty, 200 columns), as a user's shell does."""
    import fcntl
    import pty
    import struct
    import termios

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    proc = subprocess.Popen(
        argv, env={**env, "TERM": "xterm"}, cwd=ROOT, stdin=slave, stdout=slave, stderr=slave,
        start_new_session=True,
    )  # fmt: skip
    os.close(slave)
    return PtyReader(proc, master)


def _get(url: str) -> Any:
    import urllib.request

    with urllib.request.urlopen(url, timeout=10) as response:  # loopback only
        return json.loads(response.read())


def _post(url: str) -> None:
    import urllib.request

    request = urllib.request.Request(url, data=b"{}", method="POST")
    with urllib.request.urlopen(request, timeout=10):
        pass


def world(base_url: str, client: str, replies: int, *, chat: bool = False) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "latency",
        "topic": "latency",
        "model": "openai/bench-model",
        "settings": {"api_base": base_url, "retries": 0, "timeout": 30, "client": client},
        "roles": [{"id": "a"}, {"id": "b"}],
    }
    if not chat:  # a loop, so that the world's own size does not grow with the replies
        raw["settings"]["max_turns"] = replies
        raw["flow"] = {
            "steps": [
                {"id": "s1", "speaker": "a"},
                {"id": "s2", "speaker": "b", "loop": {"to": "s1", "max": replies}},
            ]
        }
    return raw


def child_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ROLECALL_")}
    env.update(
        ROLECALL_HOME=str(home),
        OPENAI_API_KEY="sk-bench",
        LITELLM_LOCAL_MODEL_COST_MAP="True",
        NO_COLOR="1",
        PYTHONUNBUFFERED="0",
    )
    return env


def run_child(
    argv: list[str], env: dict[str, str], stdin: bytes = b""
) -> tuple[Reader, float, int]:
    """Run ``argv``, reading its stdout as it comes: (reader, CPU seconds, spawn time)."""
    spawned = time.monotonic_ns()
    proc = subprocess.Popen(
        argv, env=env, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    reader = Reader(proc)
    assert proc.stdin is not None
    proc.stdin.write(stdin)
    proc.stdin.close()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    reader.join(10)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {proc.returncode}")
    return reader, usage.ru_utime + usage.ru_stime, spawned


def added_latencies(reader: Reader, base: str, skip: int = 1) -> list[float]:
    """Milliseconds from a reply's first token leaving the server to its line here."""
    sent = _get(base.removesuffix("/v1") + "/stamps")["first_sent"]
    got = reader.first_tokens()
    return [(got[r] - sent[r]) / 1e6 for r in range(skip, len(sent)) if r in got]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered) + 0.5) - 1))]


def _server(gap: float, chunks: int = CHUNKS) -> tuple[subprocess.Popen[str], str]:
    server = subprocess.Popen(
        [sys.executable, __file__, "serve", str(gap), str(chunks)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert server.stdout is not None
    return server, server.stdout.readline().strip()


def _argv(variant: str, base: str, n: int, tmp: Path) -> list[str]:
    if variant == "floor":
        return [sys.executable, __file__, "floor", base, str(n), str(tmp / f"floor{n}.db")]
    path = tmp / f"{variant}{n}.json"
    path.write_text(json.dumps(world(base, variant, n)), encoding="utf-8")
    return [sys.executable, "-m", "rolecall.cli.main", "run", str(path), "--json", "-q",
            "--data-dir", str(tmp / "data")]  # fmt: skip


def _stamps(base: str) -> dict[str, list[int]]:
    stamps: dict[str, list[int]] = _get(base.removesuffix("/v1") + "/stamps")
    return stamps


def on_terminal(argv: list[str], env: dict[str, str], base: str) -> list[float]:
    """Added latencies (ms) of a run on a terminal: first token sent to its arrival on the
    pty, the first reply left out."""
    _post(base.removesuffix("/v1") + "/reset")
    term = spawn_pty(argv, env)
    term.close(timeout=300)
    if term.proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])}... exited {term.proc.returncode}")
    sent, got = _stamps(base)["first_sent"], term.first_tokens()
    return [(got[r] - sent[r]) / 1e6 for r in range(1, len(sent)) if r in got]


def typed(
    argv: list[str], env: dict[str, str], base: str, messages: int, *, line: bytes, ready: bytes
) -> tuple[list[float], list[float]]:
    """A program on a terminal given ``messages`` lines, one after the other reply: (Enter
    to its request at the server, ms; the reply's first token sent to its arrival on the
    pty, ms), the first message left out (the client's first import, the connection)."""
    _post(base.removesuffix("/v1") + "/reset")
    term = spawn_pty(argv, env)
    entered = []
    try:
        term.wait_for(ready)
        for i in range(messages):
            entered.append(time.monotonic_ns())
            os.write(term.master, line + b"\r")
            term.wait_for(f"{MARK}{i}_{CHUNKS - 1}".encode())
            time.sleep(0.05)  # the prompt drawn again
        os.write(term.master, b"\x04")  # Ctrl-D: the end of the input
    finally:
        term.close(timeout=120)
    stamps = _stamps(base)
    arrived, sent, got = stamps["arrived"], stamps["first_sent"], term.first_tokens()
    enter = [(arrived[i] - entered[i]) / 1e6 for i in range(1, messages)]
    return enter, [(got[r] - sent[r]) / 1e6 for r in range(1, messages) if r in got]


def _api(host: str, port: int, method: str, path: str, body: Any = None) -> Any:
    import http.client

    conn = http.client.HTTPConnection(host, port, timeout=60)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"content-type": "application/json"})
        response = conn.getresponse()
        answer = response.read()
        if response.status >= 300:
            raise RuntimeError(f"{method} {path}: {response.status} {answer[:300]!r}")
        return json.loads(answer)
    finally:
        conn.close()


def on_web(
    raw: dict[str, Any], env: dict[str, str], base: str, messages: int, tmp: Path
) -> tuple[list[float], list[float]]:
    """`rolecall web` running a chat world, a client on its SSE stream and ``messages``
    POSTs to ``say``: (POST to the request at the server, ms; a reply's first token sent to
    its SSE line's arrival at the client, ms), the first message left out."""
    import http.client

    cwd = tmp / "web"
    (cwd / "worlds" / "latency").mkdir(parents=True, exist_ok=True)
    (cwd / "worlds" / "latency" / "world.yaml").write_text(json.dumps(raw), encoding="utf-8")
    _post(base.removesuffix("/v1") + "/reset")
    web = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "web", "--port", "0", "--data-dir",
         str(tmp / "webdata")],
        cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    posted: list[int] = []
    try:
        assert web.stderr is not None
        found = re.search(r"serving on http://([\d.]+):(\d+)", web.stderr.readline())
        if not found:
            raise RuntimeError("rolecall web did not start")
        host, port = found.group(1), int(found.group(2))
        sid = _api(host, port, "POST", "/api/sessions", {"world": "latency"})["session_id"]
        conn = http.client.HTTPConnection(host, port, timeout=120)
        conn.request("GET", f"/api/sessions/{sid}/stream")
        stream = conn.getresponse()
        lines: list[tuple[int, bytes]] = []

        def read() -> None:
            with contextlib.suppress(OSError, ValueError, AttributeError):  # closed below
                for line in stream:
                    lines.append((time.monotonic_ns(), line))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        for i in range(messages):
            posted.append(time.monotonic_ns())
            _api(host, port, "POST", f"/api/sessions/{sid}/say", {"text": "@a hello"})
            deadline = time.monotonic() + 60
            last = f"{MARK}{i}_{CHUNKS - 1}".encode()
            while not any(last in line for _, line in lines[-8:]):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"reply {i} never came on the SSE stream")
                time.sleep(0.002)
            time.sleep(0.05)
        if conn.sock is not None:
            conn.sock.shutdown(socket.SHUT_RDWR)  # the reader sees the stream's end
        reader.join(10)
        conn.close()
    finally:
        web.send_signal(signal.SIGINT)
        try:
            web.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            web.kill()
            web.communicate()
    stamps = _stamps(base)
    arrived, sent = stamps["arrived"], stamps["first_sent"]
    got: dict[int, int] = {}
    for at, line in lines:
        for match in FIRST.finditer(line):
            got.setdefault(int(match.group(1)), at)
    say = [(arrived[i] - posted[i]) / 1e6 for i in range(1, messages)]
    return say, [(got[r] - sent[r]) / 1e6 for r in range(1, messages) if r in got]


def bench_first_token(quick: bool, bench_cls: Any) -> Any:
    b = bench_cls(
        "first_token",
        "with a loopback provider: the latency rolecall adds between the provider's first "
        "token and the token on --json's stdout (chunks 50 ms apart), its CPU per reply, and "
        "the time from `rolecall chat` to the first token, against raw aiohttp (the floor)",
    )
    replies, many, starts_n = (8, 40, 2) if quick else (40, 300, 5)
    messages = 6 if quick else 21
    gap = 0.05
    variants = ("floor", "http", "litellm")
    details: dict[str, Any] = {}
    paced, base = _server(gap)
    eager, eager_base = _server(0.0)
    try:
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            env = child_env(tmp / "home")
            for variant in variants:
                _post(base.removesuffix("/v1") + "/reset")
                reader, _, _ = run_child(_argv(variant, base, replies, tmp), env)
                lat = added_latencies(reader, base)
                details[f"{variant}_added_ms"] = [round(x, 3) for x in lat]
                b.add(f"{variant}_added_p50_ms", statistics.median(lat), "ms")
                b.add(f"{variant}_added_p90_ms", pct(lat, 90), "ms")
                b.add(f"{variant}_added_p99_ms", pct(lat, 99), "ms")
                b.add(f"{variant}_added_max_ms", max(lat), "ms")
            # the same on a terminal: `rolecall run` (its terminal display), the floor
            # printing its JSON lines to a pty, and the REPL given a message at a time
            surfaces: dict[str, list[float]] = {}
            path = tmp / "terminal.json"
            path.write_text(json.dumps(world(base, "http", replies)), encoding="utf-8")
            surfaces["terminal"] = on_terminal(
                [sys.executable, "-m", "rolecall.cli.main", "run", str(path), "--data-dir",
                 str(tmp / "data")], env, base,
            )  # fmt: skip
            surfaces["floor_terminal"] = on_terminal(_argv("floor", base, replies, tmp), env, base)
            path = tmp / "repl.json"
            path.write_text(json.dumps(world(base, "http", 1, chat=True)), encoding="utf-8")
            repl = [sys.executable, "-m", "rolecall.cli.main", "chat", str(path)]
            repl += ["--data-dir", str(tmp / "data")]
            prompt = "› ".encode()
            enter, surfaces["repl"] = typed(
                repl, env, base, messages, line=b"@a hello", ready=prompt
            )
            floor_lines = [*_argv("floor", base, 0, tmp), "lines"]
            floor_enter, surfaces["floor_lines"] = typed(
                floor_lines, env, base, messages, line=b"hello", ready=b""
            )
            web_say, surfaces["web_sse"] = on_web(
                world(base, "http", 1, chat=True), env, base, messages, tmp
            )
            for name, lat in surfaces.items():
                details[f"{name}_added_ms"] = [round(x, 3) for x in lat]
                b.add(f"{name}_added_p50_ms", statistics.median(lat), "ms")
                b.add(f"{name}_added_p99_ms", pct(lat, 99), "ms")
            for name, lat in (("repl", enter), ("floor", floor_enter), ("web_say", web_say)):
                details[f"{name}_enter_to_request_ms"] = [round(x, 3) for x in lat]
                b.add(f"{name}_enter_to_request_p50_ms", statistics.median(lat), "ms")
                b.add(f"{name}_enter_to_request_p99_ms", pct(lat, 99), "ms")
            for variant in variants:  # CPU: chunks back to back, start-up subtracted
                cpu = {n: run_child(_argv(variant, eager_base, n, tmp), env)[1] for n in (many, 2)}
                details[f"{variant}_cpu_s"] = {str(n): round(c, 4) for n, c in cpu.items()}
                b.add(f"{variant}_cpu_ms_per_reply", (cpu[many] - cpu[2]) / (many - 2) * 1000, "ms")
            # the command to the first token, rolecall's modules as bytecode (as pip
            # installs them: under PYTHONDONTWRITEBYTECODE=1, set on these machines, an
            # editable checkout would compile every module at every start); the floor is
            # raw aiohttp's first token, spawned the same way, in the same run
            compileall.compile_dir(str(ROOT / "src" / "rolecall"), quiet=1)
            for variant in ("floor", "http", "litellm"):
                if variant == "floor":
                    argv = _argv("floor", eager_base, 1, tmp)
                else:
                    path = tmp / f"chat-{variant}.json"
                    path.write_text(json.dumps(world(eager_base, variant, 1, chat=True)), "utf-8")
                    argv = [sys.executable, "-m", "rolecall.cli.main", "chat", str(path)]
                    argv += ["--json", "-q", "--data-dir", str(tmp / "data")]
                starts, cpus = [], []
                for _ in range(starts_n):
                    reader, cpu, spawned = run_child(argv, env, b"@a hello\n")
                    if reader.first_at is None:
                        raise RuntimeError(f"{variant}: no first token on stdout")
                    starts.append((reader.first_at - spawned) / 1e9)
                    cpus.append(cpu)
                details[f"{variant}_start_to_first_token_s"] = [round(x, 4) for x in starts]
                details[f"{variant}_start_cpu_s"] = [round(x, 4) for x in cpus]
                b.add(f"{variant}_start_to_first_token_s", statistics.median(starts), "s")
                b.add(f"{variant}_start_cpu_s", statistics.median(cpus), "s")
            imports = [
                run_child([sys.executable, "-c", "import litellm"], env)[1] for _ in range(2)
            ]
            details["litellm_import_cpu_s"] = [round(x, 3) for x in imports]
            b.add("litellm_import_cpu_s", min(imports), "s")
    finally:
        for server in (paced, eager):
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=30)
    floor_p50 = b.figures["floor_added_p50_ms"]
    b.add("http_added_p50_ratio_to_floor", b.figures["http_added_p50_ms"] / floor_p50, "ratio")
    b.add(
        "http_start_cpu_ratio_to_floor",
        b.figures["http_start_cpu_s"] / b.figures["floor_start_cpu_s"],
        "ratio",
    )
    b.add(
        "http_start_ratio_to_floor",
        b.figures["http_start_to_first_token_s"] / b.figures["floor_start_to_first_token_s"],
        "ratio",
    )
    b.add(
        "http_cpu_ratio_to_floor",
        b.figures["http_cpu_ms_per_reply"] / b.figures["floor_cpu_ms_per_reply"],
        "ratio",
    )
    json_p50 = b.figures["http_added_p50_ms"]
    for name in ("terminal", "repl", "web_sse"):
        b.add(f"{name}_minus_json_p50_ms", b.figures[f"{name}_added_p50_ms"] - json_p50, "ms")
        b.target(
            f"{name}_minus_json_p50_ms",
            1.0,
            f"issue 39: the {name} within 1 ms of the JSON sink (p50, the http client)",
        )
    b.target("http_added_p50_ratio_to_floor", 1.5, "issue 39: http ≤ 1.5 × the floor at p50")
    b.target("litellm_added_p50_ms", 2.0, "issue 39: litellm adds ≤ 2 ms at p50")
    b.target("litellm_added_p99_ms", 5.0, "issue 39: litellm adds ≤ 5 ms at p99")
    b.target("http_cpu_ratio_to_floor", 1.5, "issue 39: http ≤ 1.5 × the floor's CPU a reply")
    b.target("litellm_cpu_ms_per_reply", 6.0, "issue 39: litellm ≤ 6 ms of CPU a reply")
    b.target(
        "http_start_ratio_to_floor",
        1.5,
        "issue 50: `rolecall chat` to its first token ≤ 1.5× raw aiohttp's",
    )
    for variant in ("http", "litellm"):
        b.target(
            f"{variant}_start_to_first_token_s",
            0.5,
            "issue 39: `rolecall chat` to the first token ≤ 0.5 s, imports included",
        )
    b.details = details
    b.method = {
        "server": f"scripts/bench_latency.py serve: {CHUNKS} chunks a reply, each reply's "
        "first chunk stamped (monotonic clock) just before it is written",
        "added": f"{replies} replies, chunks {gap * 1000:.0f} ms apart, in one `rolecall run "
        "WORLD --json -q` (two roles in a loop, openai/bench-model at the loopback "
        "api_base, settings.client http or litellm), the first reply left out (the "
        "connection, first imports); each reply's first-token line stamped as this process "
        "reads it from the pipe; floor: `scripts/bench_latency.py floor` (raw aiohttp, a "
        "JSON line a chunk, a SQLite row a reply)",
        "cpu": f"the child's user+system CPU (wait4) for {many} replies less that for 2, over "
        f"{many - 2}: start-up and imports cancel out; chunks back to back",
        "terminal": f"{replies} replies of `rolecall run WORLD` (the http world above, no "
        "--json) on a pty of its own (200 columns, TERM=xterm, NO_COLOR=1): the first token's "
        "arrival is the read of the pty's master side that completed its text; "
        "floor_terminal: the floor's JSON lines printed to a pty the same way",
        "repl": f"`rolecall chat WORLD` on a pty: {messages} times `@a hello` and Enter written "
        "to the terminal once its prompt (or the last reply) is drawn; enter_to_request: "
        "from that write to the request's arrival at the server (the loopback's own trip "
        "included: compare with the floor's); added: as on the terminal; floor: "
        "`bench_latency.py floor URL 0 DB lines`, a request for each line it reads from its "
        "terminal; the first message of each left out",
        "web_sse": "`rolecall web` (cwd holding worlds/latency, the chat world), a session "
        "started with POST /api/sessions, one client reading GET .../stream line by line on "
        f"a thread, then {messages} times POST .../say `@a hello` once the last reply is on "
        "the stream; added: first token sent to its SSE line's arrival; web_say: the POST's "
        "start to the request's arrival at the server",
        "start": f"spawn of `rolecall chat WORLD --json -q` with `@a hello` on stdin to its "
        f"first token's line, median of {starts_n}; the server answers at once; rolecall's "
        "modules compiled to bytecode first (compileall), as pip installs them; floor: the "
        "spawn of `scripts/bench_latency.py floor` (python, aiohttp, sqlite3) for one reply "
        "to its first token's line; *_start_cpu_s: the whole process's CPU (wait4: start, "
        "the one reply, exit), steadier than the wall time on a shared machine",
        "litellm_import": "the CPU (wait4) of `python -c 'import litellm'` (with "
        "LITELLM_LOCAL_MODEL_COST_MAP=True), the least of 2: what the litellm client pays "
        "before its first request, whatever rolecall does",
    }
    return b


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        asyncio.run(serve(float(sys.argv[2]), int(sys.argv[3]) if sys.argv[3:] else CHUNKS))
    elif sys.argv[1] == "floor":
        asyncio.run(floor(sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5:] == ["lines"]))
    else:
        sys.exit(f"usage: {sys.argv[0]} serve GAP [CHUNKS] | floor URL N DB [lines]")
