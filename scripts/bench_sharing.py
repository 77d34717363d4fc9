"""Many sessions (issue 18): 100 x 100 in one process, and processes sharing a data dir.

Run by ``scripts/bench.py`` (``many_worlds`` and ``shared_store``); each measurement is
a child process of its own (``python scripts/bench_sharing.py --many W T`` or
``--turns N DATA START``), so its peak memory and CPU are its own:

* ``--many W T``: W sessions of T turns at once in one process sharing one store and
  one set of memory files (bench.py's ``_many_worlds``); prints CPU, wall, peak RSS;
* ``--turns N DATA START``: one session of N stored turns in data dir DATA, started at
  the epoch time START (so that the processes of one measurement start together);
  prints when it ended.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

import bench

HERE = Path(__file__).resolve()


def many_child(worlds: int, turns: int) -> int:
    bench.logs.configure(-1)
    with tempfile.TemporaryDirectory(prefix="rolecall-bench-") as data:
        wall, cpu, latencies, problems = anyio.run(bench._many_worlds, worlds, turns, Path(data))
    print(
        json.dumps(
            {
                "wall_s": wall,
                "cpu_s": cpu,
                "peak_rss_mb": bench.peak_rss_mb(),
                "median_latency_s": bench.median(latencies),
                "problems": problems[:5],
            }
        )
    )
    return 0


async def _one(turns: int, data: Path, start: float) -> float:
    async with (
        bench.SqliteStore(bench.db_path(data)) as store,
        bench.open_live(
            bench.turn_world(turns),
            bench.Opening(store=store, memory=bench.MemoryFiles.in_data_dir(data)),
        ) as session,
    ):
        bench.tune_gc()
        await anyio.sleep(max(0.0, start - time.time()))
        await session.run()
        ended = time.time()
        if session.result.turns != turns:
            raise RuntimeError(f"{session.result.turns} of {turns} turns")
        return ended


def turns_child(turns: int, data: str, start: float) -> int:
    bench.logs.configure(-1)
    print(json.dumps({"ended": anyio.run(_one, turns, Path(data), start)}))
    return 0


def run_many(worlds: int, turns: int) -> dict[str, Any]:
    """A ``--many`` child's figures."""
    out = subprocess.run(
        [sys.executable, str(HERE), "--many", str(worlds), str(turns)],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def turns_per_s(processes: int, turns: int, *, shared: bool) -> float:
    """``processes`` children of ``turns`` turns each, started together; their turns/s."""
    with tempfile.TemporaryDirectory(prefix="rolecall-bench-") as root:
        dirs = [Path(root) / ("shared" if shared else f"own{i}") for i in range(processes)]
        start = time.time() + 2.5  # every child imported and set up by then
        children = [
            subprocess.Popen(
                [sys.executable, str(HERE), "--turns", str(turns), str(d), str(start)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for d in dirs
        ]
        ends = []
        for child in children:
            out, _ = child.communicate(timeout=600)
            if child.returncode != 0:
                raise RuntimeError(f"a --turns child failed ({child.returncode})")
            ends.append(json.loads(out.strip().splitlines()[-1])["ended"])
    return processes * turns / (max(ends) - start)


if __name__ == "__main__":
    if sys.argv[1] == "--many":
        sys.exit(many_child(int(sys.argv[2]), int(sys.argv[3])))
    sys.exit(turns_child(int(sys.argv[2]), sys.argv[3], float(sys.argv[4])))
