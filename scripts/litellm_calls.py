"""Python calls a streamed reply, rolecall's litellm client against a bare litellm loop.

``python scripts/litellm_calls.py [REPLIES]`` starts the loopback server of
``scripts/bench_latency.py serve 0 50`` (50-word replies), then, in this one process,
streams REPLIES replies (default 20) through rolecall's ``LiteLLMModel.stream`` (its
retry loop included, no runtime around it) and through a bare
``litellm.acompletion(stream=True)`` loop asking for the same thing, each under cProfile,
and prints the calls a reply of each, by package, as JSON. Counted, not timed: a
machine's load does not move it (docs/performance.md, "Where the time goes on the
litellm path").
"""

from __future__ import annotations

import asyncio
import collections
import cProfile
import json
import os
import pstats
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
PACKAGES = (
    "rolecall/",
    "litellm/",
    "openai/",
    "httpx",
    "aiohttp",
    "anyio/",
    "pydantic",
    "asyncio/",
)
STOP = ("\nhuman:", "\nUser:", "\n[a]", "\nA:")
KEY_ENV = "ROLECALL_LITELLM_CALLS_KEY"  # the loopback server's key, never a real one


def _messages(i: int) -> list[dict[str, str]]:
    return [
        {"role": "system", "content": "You are B.\nYou are B (id: b) in latency."},
        {"role": "user", "content": f"[a] hello {i}", "name": "a"},
    ]


async def _counted(url: str, replies: int) -> dict[str, dict[str, float]]:
    from rolecall.llm import litellm_model as lm
    from rolecall.llm.types import ChatMessage, GenerationRequest, Persona, TurnInfo

    lit = lm._load()

    async def bare(n: int) -> None:
        lit.disable_streaming_logging = True  # as rolecall's client has it (no callbacks)
        for i in range(n):
            stream = await lit.acompletion(
                model="openai/bench-model", api_base=url, api_key="sk-bench",
                messages=_messages(i), stream=True, stream_options={"include_usage": True},
                timeout=30.0, max_retries=0, max_tokens=1024, stop=list(STOP),
            )  # fmt: skip
            async for chunk in stream:
                for choice in chunk.choices:
                    _ = choice.delta.content

    model = lm.LiteLLMModel("openai/bench-model")

    async def rolecall(n: int) -> None:
        for i in range(n):
            request = GenerationRequest(
                model="openai/bench-model",
                messages=tuple(
                    ChatMessage(m["role"], m["content"], m.get("name"))  # type: ignore[arg-type]
                    for m in _messages(i)
                ),
                persona=Persona("b", "B"),
                info=TurnInfo(turn=i, n=i, speaker="b", target="a", target_text="", topic="t"),
                api_base=url, api_key_env=KEY_ENV, timeout=30.0, retries=0,
                max_tokens=1024, stop=STOP,
                client="litellm",
            )  # fmt: skip
            async for _ in model.stream(request):
                pass

    await bare(3)  # first calls: connections, lazy imports
    await rolecall(3)
    out: dict[str, dict[str, float]] = {}
    for name, run in (("bare_litellm", bare), ("rolecall_litellm_client", rolecall)):
        profile = cProfile.Profile()
        profile.enable()
        await run(replies)
        profile.disable()
        stats: Any = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        by: collections.Counter[str] = collections.Counter()
        for (path, _, _), row in stats.items():
            by[next((p.rstrip("/") for p in PACKAGES if p in path), "other")] += row[1]
        out[name] = {"calls_per_reply": round(sum(by.values()) / replies)}
        out[name].update({k: round(v / replies) for k, v in by.most_common()})
    return out


def main() -> int:
    replies = int(sys.argv[1]) if sys.argv[1:] else 20
    sys.path.insert(0, str(HERE))
    import bench_latency

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    os.environ[KEY_ENV] = "sk-bench"
    server, url = bench_latency._server(0.0, 50)
    try:
        counts = asyncio.run(_counted(url, replies))
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=30)
    ours, bare = counts["rolecall_litellm_client"], counts["bare_litellm"]
    counts["added_calls_per_reply"] = {
        "calls": ours["calls_per_reply"] - bare["calls_per_reply"],
        "ratio": round(ours["calls_per_reply"] / bare["calls_per_reply"], 3),
    }
    print(json.dumps(counts, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
