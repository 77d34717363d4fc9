"""``rolecall web``: the sessions, the live thread and the flow pages in a browser (web.md)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio

from rolecall.cli.options import Options, WorldOptions
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

EXAMPLES = [
    "rolecall web                                 serve on http://127.0.0.1:8765/",
    "rolecall web --port 9000 --data-dir /tmp/rc  another port and data directory",
    "rolecall web --host 0.0.0.0 --token s3cret   reachable from other machines, with a token",
    "rolecall web --nats nats://127.0.0.1:4222    also the sessions running on a NATS cluster",
    "rolecall chat panel --web                    a chat session to talk to from the page",
]
INSTALL = (
    "the web view needs its optional dependencies: pip install 'rolecall[web]' (missing: {missing})"
)


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_common_flags, add_nats_flag

    p = add_command(
        sub,
        "web",
        description=(
            "Serve a local web page: every stored session with search and filters, a "
            "session's thread with reply links, live tokens of running sessions, talking "
            "to chat worlds, starting a world, and each world's flow as a diagram. With "
            "--nats URL, also every session on that NATS cluster, followed chunk by chunk, "
            "and the sessions it runs run on it (remote agents included)."
        ),
        examples=EXAMPLES,
    )
    add_web_flags(p)
    add_common_flags(p, run_flags=False)
    add_nats_flag(p)


def add_web_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free port)")
    p.add_argument("--token", help="required for a non-loopback --host (env ROLECALL_WEB_TOKEN)")


@dataclass(frozen=True, slots=True, kw_only=True)
class WebOptions(Options):
    """``rolecall web`` (and ``rolecall chat --web``): where the page is served."""

    host: str = "127.0.0.1"  # --host
    port: int = 8765  # --port (0: any free port)
    token: str | None = None  # --token (else ROLECALL_WEB_TOKEN)


def missing_dependencies() -> list[str]:
    from importlib.util import find_spec

    wanted = {
        "starlette": "starlette",
        "uvicorn": "uvicorn",
        "jinja2": "jinja2",
        "markdown_it": "markdown-it-py",
        "sse_starlette": "sse-starlette",
        "ruamel.yaml": "ruamel.yaml",
        "multipart": "python-multipart",
    }
    out = []
    for module, package in wanted.items():
        try:
            if find_spec(module) is None:
                out.append(package)
        except ModuleNotFoundError:
            out.append(package)
    return out


def _check(web: WebOptions) -> str | None:
    missing = missing_dependencies()
    if missing:
        raise UsageError(INSTALL.format(missing=", ".join(missing)))
    if not 0 <= web.port <= 65535:
        raise UsageError(f"--port must be from 0 to 65535, got {web.port}")
    token: str | None = web.token or os.environ.get("ROLECALL_WEB_TOKEN") or None
    return token


def _announce(url: str) -> None:
    print(f"rolecall web: serving on {url} (Ctrl-C stops)", file=sys.stderr, flush=True)


def cmd_web(args: argparse.Namespace) -> int:
    from rolecall.nats.link import nats_url
    from rolecall.paths import data_dir

    web = WebOptions.of(args)
    token = _check(web)
    nats = nats_url(web.nats)
    from rolecall.web.server import check_host, serve

    check_host(web.host, token)
    folder = data_dir(web.data_dir)

    async def main() -> int | None:
        return await serve(
            data_dir=folder,
            worlds_dir=Path.cwd() / "worlds",
            host=web.host,
            port=web.port,
            token=token,
            announce=_announce,
            nats=nats,
        )

    return _run(main)


def _run(main: Callable[[], Awaitable[int | None]]) -> int:
    """Serve; exit 0, or 128 + the signal that stopped the server (130, 143)."""
    try:
        signum = anyio.run(main)
    except KeyboardInterrupt:
        signum = 2
    if signum is None:
        return 0
    print("rolecall web: stopped; the sessions it ran are paused", file=sys.stderr)
    return 128 + signum


def cmd_chat_web(args: argparse.Namespace) -> int:
    """``rolecall chat WORLD --web``: a chat session served by the web view's talk page
    (on the NATS cluster of ``--nats``, as ``rolecall chat --nats`` runs it)."""
    from rolecall.api.entry import load_world
    from rolecall.nats.link import nats_url
    from rolecall.paths import data_dir

    web, chat = WebOptions.of(args), WorldOptions.of(args)
    token = _check(web)
    from rolecall.web.server import check_host, serve

    check_host(web.host, token)
    folder = data_dir(chat.data_dir)
    world = load_world(chat.world, data_dir=folder)

    async def main() -> int | None:
        from rolecall.web.context import WebContext
        from rolecall.web.runs import LiveRun

        async def first(ctx: WebContext) -> LiveRun:
            return await ctx.runs.start(world, topic=chat.topic, model=chat.model)

        return await serve(
            data_dir=folder,
            worlds_dir=Path.cwd() / "worlds",
            host=web.host,
            port=web.port,
            token=token,
            announce=_announce,
            first=first,
            nats=nats_url(chat.nats),
        )

    return _run(main)
