"""A large batch through a real process: planned lazily (its first line comes at once,
whatever ``--runs`` says), memory bounded by the runs in flight, Ctrl-C answered at once."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.batch.test_batch_cli import scripted_world
from tests.faults import Cli


def _started(proc: subprocess.Popen[str], text: str, timeout: float = 40) -> None:
    assert proc.stderr is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if text in line:
            return
        assert line, f"ended before {text!r} (exit {proc.wait()})"
    raise AssertionError(f"no {text!r} within {timeout} s")


def _peak_mb(pid: int) -> float:
    """The process's peak resident memory so far (VmHWM), in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def _run_then_interrupt(cli: Cli, world: Path, runs: int) -> tuple[float, str]:
    """Start ``batch --runs RUNS``, let it run 3 s, Ctrl-C: its peak memory, its stderr."""
    name = f"big{runs}"
    proc = cli.popen(
        "batch", str(world), "--runs", str(runs), "--name", name, "--concurrency", "4",
        ROLECALL_STREAM_DELAY="0.2",  # 30 runs take about 15 s: all still running
    )  # fmt: skip
    try:
        _started(proc, f"batch {name}: running {runs} of {runs} runs, 4 at once")
        time.sleep(3)
        peak = _peak_mb(proc.pid)
        proc.send_signal(signal.SIGINT)
        _, err = Cli.rest(proc, 20)  # Ctrl-C answered: the runs in flight pause, none starts
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert f"`rolecall batch --resume {name}` finishes the batch" in err, err
    assert "Traceback" not in err
    return peak, err


@pytest.mark.timeout(150)
def test_memory_does_not_grow_with_the_runs_planned(cli: Cli, tmp_path: Path) -> None:
    """A task per run waiting its turn: --runs 300000 grew to 1.9 GB. Now 30,000 runs
    cost what 30 do (both stopped after 3 s, with about as many runs done)."""
    world = scripted_world(tmp_path)
    small, _ = _run_then_interrupt(cli, world, 30)
    large, _ = _run_then_interrupt(cli, world, 30_000)
    assert large - small < 25, f"peak {large:.0f} MB for 30,000 runs, {small:.0f} MB for 30"


@pytest.mark.timeout(90)
def test_a_hundred_million_runs_start_at_once_and_stop_on_ctrl_c(cli: Cli, tmp_path: Path) -> None:
    """--runs 100000000 printed nothing for 120 s (every run was planned first)."""
    world = scripted_world(tmp_path)
    peak, _ = _run_then_interrupt(cli, world, 100_000_000)
    assert peak < 400, f"peak {peak:.0f} MB"
