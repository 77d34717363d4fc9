"""AutoGen's side of ``scripts/bench.py --compare autogen``: one JSON document on stdout.

Runs inside the separate AutoGen virtualenv that ``bench.py`` creates (never inside
rolecall's), so it imports nothing from rolecall. It reads a spec on stdin::

    {"turns": 1000, "repeats": 3, "warmup_turns": 30, "window": 12, "stream": true,
     "task": "benchmarking the runtime",
     "agents": {"alice": ["text of alice's turn 1", ...], "bob": [...], "carol": [...]}}

and runs, ``repeats`` times, a ``RoundRobinGroupChat`` of one ``AssistantAgent`` per
entry of ``agents`` (in that order), each answering from its own
``ReplayChatCompletionClient`` (the texts given, in order), with a
``BufferedChatCompletionContext(window)`` (the same prompt window as rolecall's
``memory_window``), ``model_client_stream`` as ``stream`` (one chunk a word, as
rolecall's scripted model) and ``MaxMessageTermination(turns + 1)`` (the task message
counts as one). ``team.run_stream`` is consumed and every agent's ``TextMessage`` is
timestamped: the time between two consecutive ones is one turn, as in ``bench.py``.
Before each timed run, a team of ``warmup_turns`` turns runs untimed.

AutoGen is asyncio-based, so this script uses asyncio.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import itertools
import json
import statistics
import sys
import time
from importlib import metadata
from typing import Any

from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.base import TaskResult
from autogen_agentchat.conditions import MaxMessageTermination
from autogen_agentchat.messages import ModelClientStreamingChunkEvent, TextMessage
from autogen_agentchat.teams import RoundRobinGroupChat
from autogen_core.model_context import BufferedChatCompletionContext
from autogen_ext.models.replay import ReplayChatCompletionClient


def build_team(spec: dict[str, Any]) -> RoundRobinGroupChat:
    agents = [
        AssistantAgent(
            name,
            model_client=ReplayChatCompletionClient(texts),
            model_context=BufferedChatCompletionContext(buffer_size=int(spec["window"])),
            system_message=f"You are {name}, one of the panel discussing {spec['task']}.",
            model_client_stream=bool(spec["stream"]),
        )
        for name, texts in spec["agents"].items()
    ]
    return RoundRobinGroupChat(
        agents, termination_condition=MaxMessageTermination(int(spec["turns"]) + 1)
    )


async def one_run(spec: dict[str, Any]) -> dict[str, Any]:
    team = build_team(spec)
    warmup = int(spec.get("warmup_turns", 0))
    if warmup:  # imports, caches and first-use costs outside the timed run
        small = {**spec, "turns": warmup}
        small["agents"] = {k: v[:warmup] for k, v in spec["agents"].items()}
        await build_team(small).run(task=str(spec["task"]))
    names = set(spec["agents"])
    stamps: list[float] = []
    texts: list[str] = []
    chunks = 0
    gc.collect()
    cpu0, wall0 = time.process_time(), time.perf_counter()
    async for item in team.run_stream(task=str(spec["task"])):
        if isinstance(item, TextMessage) and item.source in names:
            stamps.append(time.perf_counter())
            texts.append(item.content)
        elif isinstance(item, ModelClientStreamingChunkEvent):
            chunks += 1
        elif isinstance(item, TaskResult):
            break
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    durations = [b - a for a, b in itertools.pairwise(stamps)]
    ordered = sorted(durations)
    rank = max(1, min(len(ordered), round(0.95 * len(ordered) + 0.5)))  # as bench.py
    return {
        "turns": len(texts),
        "chunks": chunks,
        "wall_s": wall,
        "cpu_s": cpu,
        "median_s_per_turn": statistics.median(durations) if durations else 0.0,
        "p95_s_per_turn": ordered[rank - 1] if ordered else 0.0,
        "texts_sha256": hashlib.sha256("\n".join(texts).encode()).hexdigest(),
    }


def main() -> int:
    spec = json.load(sys.stdin)
    runs = [asyncio.run(one_run(spec)) for _ in range(int(spec.get("repeats", 1)))]
    versions = {
        name: metadata.version(name)
        for name in ("autogen-agentchat", "autogen-core", "autogen-ext", "pydantic")
    }
    json.dump({"python": sys.version.split()[0], "versions": versions, "runs": runs}, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
