"""The web view's figures for scripts/bench.py (``--only web``): time to first byte of the
sessions page with many stored sessions and of a long session's page, and the delay
from a chunk's publication to its arrival at an SSE client, measured against a real
`rolecall web` process on loopback, as a browser would see them.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SERVING = re.compile(r"serving on http://([\d.]+):(\d+)")

SLOW = """\
name: bench-slow
topic: pacing
model: scripted
roles:
  - id: alice
    script: ["{words}"]
flow:
  steps:
    - {{id: a, speaker: alice, reply_to: none}}
"""


def _rolecall(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "rolecall.cli.main", *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return done.stdout


def _fill(data: Path, sessions: int, big: int) -> str:
    """``sessions`` stored sessions (copies of a real run) and one of ``big`` messages."""
    import sqlite3

    first = json.loads(
        _rolecall("run", "tutoring", "--data-dir", str(data), "--json", cwd=ROOT).splitlines()[0]
    )
    sid = first["session_id"]
    db = sqlite3.connect(data / "rolecall.db")
    with db:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        for i in range(sessions - 1):
            new = f"{(start + timedelta(seconds=i)).strftime('%Y%m%d-%H%M%S')}-{i:06x}"
            db.execute(
                "INSERT INTO sessions SELECT ?, world_name, title, world_json, world_source, "
                "model_override, state, stop_reason, state_json, last_seq, ?, updated_at "
                "FROM sessions WHERE id = ?",
                (new, (start + timedelta(seconds=i)).isoformat(), sid),
            )
            db.execute(
                "INSERT INTO messages SELECT ?, idx, id, sender, body FROM messages "
                "WHERE session_id = ?",
                (new, sid),
            )
        body = db.execute(
            "SELECT body FROM messages WHERE session_id = ? AND idx = 1", (sid,)
        ).fetchone()[0]
        message = json.loads(body)
        big_id = "20270101-000000-b16b16"
        db.execute(
            "INSERT INTO sessions SELECT ?, world_name, 'a long session', world_json, "
            "world_source, model_override, state, stop_reason, state_json, last_seq, "
            "'2027-01-01T00:00:00+00:00', updated_at FROM sessions WHERE id = ?",
            (big_id, sid),
        )
        rows = []
        for i in range(big):
            message.update(id=f"m{i + 1}", reply_to=f"m{i}" if i else None)
            rows.append((big_id, i, f"m{i + 1}", message["sender"], json.dumps(message)))
        db.executemany("INSERT INTO messages VALUES (?, ?, ?, ?, ?)", rows)
    db.close()
    return big_id


def _start(data: Path, cwd: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str, int]:
    process = subprocess.Popen(
        [sys.executable, "-m", "rolecall.cli.main", "web", "--port", "0", "--data-dir", str(data)],
        cwd=cwd,
        env={**os.environ, **env},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stderr is not None
    line = process.stderr.readline()
    found = SERVING.search(line)
    if not found:
        process.kill()
        raise RuntimeError(f"rolecall web did not start: {line}")
    return process, found.group(1), int(found.group(2))


def _ttfb(host: str, port: int, path: str, repeats: int) -> list[float]:
    out = []
    for _ in range(repeats):
        conn = http.client.HTTPConnection(host, port, timeout=30)
        t0 = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        response.read(1)
        out.append(time.perf_counter() - t0)
        response.read()
        conn.close()
    return out


def _sse_delays(host: str, port: int) -> list[float]:
    """Publication (the event's ts) to arrival, for every chunk of one started session."""
    conn = http.client.HTTPConnection(host, port, timeout=30)
    conn.request(
        "POST",
        "/api/sessions",
        body=json.dumps({"world": "bench-slow"}),
        headers={"content-type": "application/json"},
    )
    sid = json.loads(conn.getresponse().read())["session_id"]
    conn.close()
    conn = http.client.HTTPConnection(host, port, timeout=60)
    conn.request("GET", f"/api/sessions/{sid}/stream")
    response = conn.getresponse()
    delays = []
    for raw in response:
        line = raw.decode()
        if line.startswith("event: end"):
            break
        if not line.startswith("data:"):
            continue
        arrived = datetime.now(UTC)
        event = json.loads(line[5:])
        if event.get("topic") == "sse" and event.get("type") == "chunk":
            delays.append((arrived - datetime.fromisoformat(event["ts"])).total_seconds())
    conn.close()
    return delays


def bench_web(quick: bool, bench_cls: Any) -> Any:
    """The web view's benchmark as scripts/bench.py reports it (``--web``)."""
    b = bench_cls(
        "web",
        "the web view (rolecall web): time to first byte of the sessions page with many "
        "stored sessions and of a long session's page; chunk publication to SSE arrival",
    )
    found = measure(quick)
    for key, value in found["figures"].items():
        b.add(key, value, "ms")
    for key, limit in found["targets"]:
        b.target(key, limit, "issue 20")
    b.method.update(found["method"])
    return b


def measure(quick: bool) -> dict[str, Any]:
    sessions, big, repeats = (1_000, 2_000, 3) if quick else (10_000, 10_000, 7)
    with tempfile.TemporaryDirectory(prefix="rolecall-bench-web-") as tmp:
        root = Path(tmp)
        data = root / "data"
        (root / "worlds" / "bench-slow").mkdir(parents=True)
        words = " ".join(f"w{i}" for i in range(200))
        (root / "worlds" / "bench-slow" / "world.yaml").write_text(SLOW.format(words=words))
        big_id = _fill(data, sessions, big)
        process, host, port = _start(data, root, {"ROLECALL_STREAM_DELAY": "0.005"})
        try:
            _ttfb(host, port, "/", 1)  # warm up: imports, templates
            sessions_page = _ttfb(host, port, "/", repeats)
            session_page = _ttfb(host, port, f"/s/{big_id}", repeats)
            # a search: every message is looked at (the text may be inside a word)
            search_page = _ttfb(host, port, "/?q=tilt", repeats)
            delays = _sse_delays(host, port)
        finally:
            process.terminate()
            process.wait(timeout=15)
            assert process.stderr is not None
            process.stderr.close()
    return {
        "figures": {
            "sessions_page_ttfb_ms": round(statistics.median(sessions_page) * 1000, 1),
            "long_session_page_ttfb_ms": round(statistics.median(session_page) * 1000, 1),
            "sessions_search_ttfb_ms": round(statistics.median(search_page) * 1000, 1),
            "chunk_to_sse_median_ms": round(statistics.median(delays) * 1000, 2),
            "chunk_to_sse_p95_ms": round(sorted(delays)[int(len(delays) * 0.95)] * 1000, 2),
        },
        "method": {
            "stored_sessions": sessions,
            "long_session_messages": big,
            "repeats": repeats,
            "chunks_timed": len(delays),
            "how": "a real `rolecall web` process on 127.0.0.1; time to the first byte of the "
            "response (median); chunk delay from the event's ts to its arrival at an SSE "
            "client reading /api/sessions/ID/stream",
        },
        "targets": [
            ("sessions_page_ttfb_ms", 100),
            ("long_session_page_ttfb_ms", 300),
            ("chunk_to_sse_median_ms", 5),
        ],
    }


if __name__ == "__main__":
    print(json.dumps(measure("--quick" in sys.argv), indent=2))
