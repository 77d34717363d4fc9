"""The peers' side of ``scripts/bench.py``'s ``cpu_per_reply``: one dialogue loop a process.

``python -I scripts/bench_peers.py PEER URL REPLIES [lines]`` runs a two-agent dialogue
of REPLIES streamed replies against the OpenAI-compatible server at URL (its ``/v1``
base), then exits; the benchmark reads the process's whole CPU with ``wait4``. PEER is:

* ``litellm``: a bare ``litellm.acompletion(stream=True)`` loop, two speakers taking
  turns, each request the speaker's system message and the last 12 messages (rolecall's
  default ``memory_window``). It asks litellm for what rolecall's litellm client asks
  for: ``stream_options={"include_usage": True}``, ``max_retries=0``, the timeout, a
  reply cap (``max_tokens``, rolecall's default 1024) and four stop sequences (rolecall's
  reply hygiene sends where another participant's turn would begin), with litellm's
  per-stream logging off, as rolecall's client turns it off while no litellm callback is
  registered; it reads each chunk's text (rolecall also reads its finish reason, usage
  and tool-call pieces: its own work). So the difference to rolecall through litellm is
  rolecall's own work. With ``lines``, a JSON line a chunk (flushed) on stdout, for the
  first-token latency;
* ``autogen``: AutoGen AgentChat, a ``RoundRobinGroupChat`` of two ``AssistantAgent``s
  streaming (``model_client_stream=True``) through one ``OpenAIChatCompletionClient``,
  each with a ``BufferedChatCompletionContext(12)``, ``MaxMessageTermination(REPLIES + 1)``
  (the task counts as one); ``team.run_stream`` consumed;
* ``ag2``: AG2 1.2, two ``ag2.Agent``s streaming (``OpenAIConfig(streaming=True)``)
  through its OpenAI client, taking turns; each reply is one ``agent.ask`` given the
  last 12 messages (AG2's ``Agent`` keeps no window of its own: a conversation continued
  with ``reply.ask`` grows without bound).

Each peer runs in its own virtualenv (``bench.py`` makes them under the user's cache,
never in rolecall's); this file imports nothing from rolecall, and a peer's packages
only inside its own function.
"""

from __future__ import annotations

import asyncio
import json
import sys

TASK = "benchmarking the runtime"
WINDOW = 12  # messages a request carries, as rolecall's default memory_window
SPEAKERS = ("alice", "bob")
KEY = "sk-bench"
MODEL = "bench-model"


MAX_TOKENS = 1024  # rolecall's reply cap when a world sets none


def system(name: str) -> str:
    return f"You are {name}, one of the panel discussing {TASK}."


def stops(other: str) -> list[str]:
    """The stop sequences rolecall sends a speaker: where the human's or the other's
    turn would begin (reply hygiene)."""
    return ["\nhuman:", "\nUser:", f"\n[{other}]", f"\n{other.title()}:"]


async def bare_litellm(url: str, replies: int, lines: bool) -> None:
    import litellm

    litellm.disable_streaming_logging = True  # as rolecall's client does (see above)
    history: list[dict[str, str]] = [{"role": "user", "content": TASK}]
    out = sys.stdout
    for i in range(replies):
        speaker = SPEAKERS[i % 2]
        messages = [{"role": "system", "content": system(speaker)}, *history[-WINDOW:]]
        stream = await litellm.acompletion(
            model=f"openai/{MODEL}",
            api_base=url,
            api_key=KEY,
            messages=messages,
            stream=True,
            stream_options={"include_usage": True},
            timeout=30,
            max_retries=0,
            max_tokens=MAX_TOKENS,
            stop=stops(SPEAKERS[(i + 1) % 2]),
        )
        parts: list[str] = []
        async for chunk in stream:
            for choice in chunk.choices:
                delta = choice.delta.content
                if delta:
                    parts.append(delta)
                    if lines:
                        out.write(json.dumps({"type": "chunk", "delta": delta}) + "\n")
                        out.flush()
        history.append({"role": "user", "content": f"{speaker}: {''.join(parts)}"})


async def autogen(url: str, replies: int) -> None:
    from autogen_agentchat.agents import AssistantAgent
    from autogen_agentchat.base import TaskResult
    from autogen_agentchat.conditions import MaxMessageTermination
    from autogen_agentchat.teams import RoundRobinGroupChat
    from autogen_core.model_context import BufferedChatCompletionContext
    from autogen_ext.models.openai import OpenAIChatCompletionClient

    client = OpenAIChatCompletionClient(
        model=MODEL,
        base_url=url,
        api_key=KEY,
        max_retries=0,
        model_info={
            "vision": False,
            "function_calling": False,
            "json_output": False,
            "family": "unknown",
            "structured_output": False,
        },
    )
    agents = [
        AssistantAgent(
            name,
            model_client=client,
            model_context=BufferedChatCompletionContext(buffer_size=WINDOW),
            system_message=system(name),
            model_client_stream=True,
        )
        for name in SPEAKERS
    ]
    team = RoundRobinGroupChat(agents, termination_condition=MaxMessageTermination(replies + 1))
    async for item in team.run_stream(task=TASK):
        if isinstance(item, TaskResult):
            break
    await client.close()


async def ag2(url: str, replies: int) -> None:
    from ag2 import Agent
    from ag2.config.openai import OpenAIConfig

    config = OpenAIConfig(
        model=MODEL, base_url=url, api_key=KEY, streaming=True, max_retries=0, timeout=30
    )
    agents = [Agent(name, prompt=system(name), config=config) for name in SPEAKERS]
    history = [TASK]
    for i in range(replies):
        speaker = SPEAKERS[i % 2]
        reply = await agents[i % 2].ask(*history[-WINDOW:])
        history.append(f"{speaker}: {reply.body}")


def main() -> int:
    peer, url, replies = sys.argv[1], sys.argv[2], int(sys.argv[3])
    lines = sys.argv[4:] == ["lines"]
    if peer == "litellm":
        asyncio.run(bare_litellm(url, replies, lines))
    elif peer == "autogen":
        asyncio.run(autogen(url, replies))
    elif peer == "ag2":
        asyncio.run(ag2(url, replies))
    else:
        print(f"usage: {sys.argv[0]} litellm|autogen|ag2 URL REPLIES [lines]", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
