"""A loopback OpenAI-compatible server in a process of its own, for the scale benchmarks.

``python scripts/bench_provider.py SECONDS`` serves ``POST /v1/chat/completions`` on
127.0.0.1 (an ephemeral port), prints its ``api_base`` on the first line of stdout, then
answers every request after SECONDS of silence with a short reply streamed as
Server-Sent Events (text chunks, a finish reason, usage, ``[DONE]``), until its stdin
is closed. It runs on aiohttp's server in its own process, so that a hundred requests
held at once cost it little and it never competes with the measured client for a GIL
(the tests' server, tests/llm/openai_server.py, is a thread-per-request server inside
the test process, made to script faults, not to be fast).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from aiohttp import web

WORDS = ("ok, ", "noted.")


def _event(model: str, delta: dict[str, Any] | None, **extra: Any) -> bytes:
    choices = [] if delta is None else [{"index": 0, "delta": delta, **extra}]
    body: dict[str, Any] = {"id": "bench", "object": "chat.completion.chunk", "model": model}
    body["choices"] = choices
    if delta is None:
        body["usage"] = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    return f"data: {json.dumps(body)}\n\n".encode()


async def main(seconds: float) -> None:
    async def completions(request: web.Request) -> web.StreamResponse:
        model = str((await request.json()).get("model", "bench"))
        await asyncio.sleep(seconds)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        for word in WORDS:
            await response.write(_event(model, {"content": word}, finish_reason=None))
        await response.write(_event(model, {}, finish_reason="stop"))
        await response.write(_event(model, None))
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_post("/v1/chat/completions", completions)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, backlog=1024)
    await site.start()
    port = runner.addresses[0][1]
    print(f"http://127.0.0.1:{port}/v1", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await runner.cleanup()


if __name__ == "__main__":
    asyncio.run(main(float(sys.argv[1])))
