"""The ``tools`` benchmark of scripts/bench.py (docs/tools.md, docs/performance.md).

* One MCP tool round trip over stdio: ``notes.search`` of the shipped example server
  (``python -m rolecall.examples.mcp_notes``) called through rolecall's
  :meth:`~rolecall.tools.box.ToolBox.call` (schema check, timeout, result cut, key
  redaction), against its peer, the same call made with the ``mcp`` SDK's own
  ``ClientSession`` (no rolecall), and its floor, the same Python function called in
  process. A Python tool (``compute``) through ``ToolBox.call`` against calling it.
* The per-turn overhead of tools declared but unused: a scripted 3-role flow whose
  roles may call tools (an MCP server and a Python tool, started) but never do, against
  the same world without tools; the runs alternate, and the best of each is compared
  (target: within 5%).
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import yaml

from rolecall.api.entry import open_live
from rolecall.examples import desk_tools
from rolecall.examples.mcp_notes import SEED, build
from rolecall.tools.box import open_toolbox
from rolecall.world.loader import parse_world
from rolecall.world.models import World

NOTES = [sys.executable, "-m", "rolecall.examples.mcp_notes"]
QUERY = {"query": "how do honeybee workers make heat in winter"}
ROLES = ("alice", "bob", "carol")
LINE = "Turn {n} of {speaker}: let us weigh the cost against the benefit once more now."


def _percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def _world(turns: int, *, tools: bool) -> World:
    """Three scripted roles taking turns in a loop until ``turns``; with ``tools``, each
    may call the notes server's tools and a Python tool, and never does."""
    roles: list[dict[str, Any]] = [{"id": r, "script": [LINE]} for r in ROLES]
    data: dict[str, Any] = {
        "name": "bench-tools",
        "topic": "overhead",
        "model": "scripted",
        "settings": {"max_turns": turns},
        "roles": roles,
        "flow": {
            "steps": [
                {"id": "a", "speaker": "alice"},
                {"id": "b", "speaker": "bob"},
                {"id": "c", "speaker": "carol", "loop": {"to": "a", "max": 10000}},
            ]
        },
    }
    if tools:
        data["tools"] = {
            "mcp": {"notes": {"command": NOTES}},
            "python": {"compute": "rolecall.examples.desk_tools:compute"},
        }
        for role in roles:
            role["tools"] = ["notes.*", "compute"]
    return parse_world(yaml.safe_dump(data, sort_keys=False), source="bench").world


async def _timed(call: Callable[[], Awaitable[object]], count: int) -> list[float]:
    for _ in range(min(5, count)):  # warm up: imports, the server's first answers
        await call()
    samples = []
    for _ in range(count):
        t0 = time.perf_counter()
        await call()
        samples.append(time.perf_counter() - t0)
    return samples


async def _round_trips(count: int) -> dict[str, list[float]]:
    """Seconds per call: rolecall's ToolBox, the SDK alone, the function in process.

    The ToolBox's server and the SDK's own are up at once, and the calls alternate in
    blocks of 10, so a busy moment of the machine falls on both alike."""
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    out: dict[str, list[float]] = {"rolecall": [], "sdk": []}
    world = _world(3, tools=True)
    params = StdioServerParameters(command=NOTES[0], args=NOTES[1:])
    async with (
        open_toolbox(world, source="bench") as box,
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        assert box is not None
        await session.initialize()
        first = await box.call("notes.search", dict(QUERY))
        if first.is_error or "honeybees" not in first.content:
            raise RuntimeError(f"notes.search answered {first.content!r}")
        block = 10
        for _ in range(max(1, count // block)):
            out["rolecall"] += await _timed(lambda: box.call("notes.search", dict(QUERY)), block)
            out["sdk"] += await _timed(lambda: session.call_tool("search", dict(QUERY)), block)
        expression = {"expression": "6*7"}
        out["python_rolecall"] = await _timed(lambda: box.call("compute", expression), count)
    # the function the server runs, called here (the SDK's registry holds it)
    search = build(dict(SEED))._tool_manager.get_tool("search").fn

    async def in_process() -> object:
        return search(**QUERY)

    async def compute() -> object:
        return desk_tools.compute("6*7")

    out["function"] = await _timed(in_process, count)
    out["python_function"] = await _timed(compute, count)
    return out


async def _run_turns(world: World) -> float:
    """Seconds per turn of ``session.run()`` (the servers started before the clock)."""
    async with open_live(world) as session:
        t0 = time.perf_counter()
        await session.run()
        seconds = time.perf_counter() - t0
    turns = session.result.turns
    if turns != world.settings.max_turns:
        raise RuntimeError(f"expected {world.settings.max_turns} turns, got {turns}")
    return seconds / turns


def bench_tools(quick: bool, bench_class: Any) -> Any:
    b = bench_class(
        "tools",
        "tools: one MCP round trip over stdio (rolecall, the mcp SDK alone, the function in "
        "process) and the per-turn overhead of tools declared but unused",
    )
    calls = 20 if quick else 500
    trips = anyio.run(_round_trips, calls)
    for name, key in (
        ("mcp_call", "rolecall"),
        ("mcp_sdk_call", "sdk"),
        ("function_call", "function"),
        ("python_tool_call", "python_rolecall"),
        ("python_function_call", "python_function"),
    ):
        samples = trips[key]
        b.add(f"{name}_ms_p50", statistics.median(samples) * 1000, "ms")
        b.add(f"{name}_ms_p99", _percentile(samples, 99) * 1000, "ms")
    b.add(
        "mcp_call_over_sdk_ms",
        b.figures["mcp_call_ms_p50"] - b.figures["mcp_sdk_call_ms_p50"],
        "ms",
    )
    b.add(
        "mcp_call_over_function_ms",
        b.figures["mcp_call_ms_p50"] - b.figures["function_call_ms_p50"],
        "ms",
    )

    turns = 150 if quick else 3000
    repeats = 1 if quick else 7
    plain, tooled = [], []
    for _ in range(repeats):  # alternated, so a busy moment hits both alike
        plain.append(anyio.run(_run_turns, _world(turns, tools=False)))
        tooled.append(anyio.run(_run_turns, _world(turns, tools=True)))
    b.add("turn_ms_no_tools", min(plain) * 1000, "ms")
    b.add("turn_ms_tools_unused", min(tooled) * 1000, "ms")
    b.add("turn_ratio_tools_unused", min(tooled) / min(plain), "ratio")
    b.target(
        "turn_ratio_tools_unused",
        1.05,
        "issue 37: tools declared but unused cost at most 5% more per turn",
    )
    b.details["turn_ms_runs_no_tools"] = [round(x * 1000, 4) for x in plain]
    b.details["turn_ms_runs_tools_unused"] = [round(x * 1000, 4) for x in tooled]
    b.method = {
        "mcp_call": f"{calls} calls of notes.search ({QUERY['query']!r}) through "
        "ToolBox.call, the server started by the world's stdio command; 5 warm-up calls",
        "mcp_sdk_call": "the same calls with mcp.ClientSession over mcp.client.stdio "
        "(the peer: the SDK alone, no rolecall), its own server up at the same time; the "
        "two alternate in blocks of 10 calls (each block after 5 warm-up calls)",
        "function_call": "the server's search function called in this process (the floor)",
        "python_tool_call": "compute('6*7') through ToolBox.call, against calling it",
        "turns": f"{turns} turns of 3 scripted roles (13-word lines), in memory, no sink; "
        f"best of {repeats} alternating runs each; with tools every role may call notes.* "
        "and compute (the server started before the clock) and never does",
    }
    return b
