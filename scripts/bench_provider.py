"""A loopback OpenAI-compatible server in a process of its own, for the scale benchmarks.

``python scripts/bench_provider.py SECONDS`` serves on 127.0.0.1 (an ephemeral port),
prints its ``api_base`` on the first line of stdout, then answers every chat completion
after SECONDS of silence with a short streamed reply, until its stdin is closed. Run in
its own process so that its threads never compete with the measured client for the GIL
(the tests' server, tests/llm/openai_server.py, runs in the test process).
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.llm.openai_server import OpenAITestServer, Reply, Stall

ENOUGH = 200_000  # replies queued: more than any benchmark asks for


def main() -> int:
    seconds = float(sys.argv[1])
    with OpenAITestServer() as server:
        server.queue(*[Stall(seconds, Reply("ok, noted.")) for _ in range(ENOUGH)])
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the benchmark closes it
    return 0


if __name__ == "__main__":
    sys.exit(main())
