"""Serving the web view: uvicorn inside our task group, beside the sessions it runs.

The store is opened once for the server. Sessions started from the page run in the
same task group as the server, so stopping the server (Ctrl-C, SIGTERM) pauses them
cleanly, like any interrupted session, and they can be resumed later.
"""

from __future__ import annotations

import contextlib
import ipaddress
import signal
import socket
from collections.abc import Awaitable, Callable
from pathlib import Path

import anyio
import uvicorn

from rolecall.errors import UsageError
from rolecall.log import get_logger
from rolecall.nats.link import connect
from rolecall.storage.data_store import open_data_store, sqlite_only
from rolecall.web.app import create_app
from rolecall.web.cluster import Cluster
from rolecall.web.context import WebContext
from rolecall.web.live import start_soon
from rolecall.web.runs import LiveRun, LiveRuns

log = get_logger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_host(host: str, token: str | None) -> None:
    """A non-loopback address needs a token: anyone who can reach it could drive sessions."""
    if not is_loopback(host) and not token:
        raise UsageError(
            f"--host {host} is not a loopback address: pass --token T (or set "
            "ROLECALL_WEB_TOKEN) so that only people with the token can use the page"
        )


def listen(host: str, port: int) -> socket.socket:
    """The server's socket, bound here so that a port in use is a clear error (port 0:
    any free port, announced with the address)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.set_inheritable(True)
    return sock


async def serve(
    *,
    data_dir: Path,
    worlds_dir: Path,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    token: str | None = None,
    announce: Callable[[str], None] = lambda _: None,
    first: Callable[[WebContext], Awaitable[LiveRun | None]] | None = None,
    nats: str | None = None,
) -> int | None:
    """Serve until SIGINT or SIGTERM (returned) or cancellation. ``announce`` gets the
    address once the socket listens; ``first`` may start a session (``rolecall chat W
    --web``) before that; ``nats`` is a NATS URL whose sessions the pages follow too."""
    check_host(host, token)
    async with contextlib.AsyncExitStack() as stack:
        link = await stack.enter_async_context(connect(nats, name="rolecall-web")) if nats else None
        store = sqlite_only(
            await stack.enter_async_context(open_data_store(data_dir)), "the web view"
        )
        tg = await stack.enter_async_context(anyio.create_task_group())
        ctx = WebContext(
            store=store,
            data_dir=data_dir,
            worlds_dir=worlds_dir,
            runs=LiveRuns(tg, data_dir, store),
            token=token,
            cluster=Cluster(link, tg) if link is not None else None,
        )
        if ctx.cluster is not None:
            start_soon(tg, ctx.cluster.index, "cluster-index")
        opened = await first(ctx) if first is not None else None
        config = uvicorn.Config(
            create_app(ctx),
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            timeout_graceful_shutdown=1,
        )
        sock = listen(host, port)
        port = sock.getsockname()[1]
        server = uvicorn.Server(config)
        # signals are ours: Ctrl-C and SIGTERM stop the server, then the sessions it runs
        # pause and the command exits 130 or 143 (uvicorn would re-raise them and kill
        # the process before the sessions are paused)
        server.capture_signals = contextlib.nullcontext  # type: ignore[assignment,method-assign]
        stopped_by: list[int] = []

        async def watch_signals() -> None:
            with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for signum in signals:
                    stopped_by.append(signum)
                    server.should_exit = True
                    return

        tg.start_soon(watch_signals)

        async def announce_when_up() -> None:
            while not server.started:
                if server.should_exit:
                    return
                await anyio.sleep(0.02)
            shown = f"[{host}]" if ":" in host else host
            path = f"/s/{opened.session_id}" if opened is not None else "/"
            suffix = f"?token={token}" if token else ""
            announce(f"http://{shown}:{port}{path}{suffix}")

        tg.start_soon(announce_when_up)
        try:
            await server.serve(sockets=[sock])
        finally:
            ctx.runs.close_all()
            sock.close()
            # the sessions it runs pause (a turn under way is cut, its draft kept) and
            # close; whatever is left after that is cancelled
            with anyio.move_on_after(8, shield=True):
                await ctx.runs.wait_closed()
            tg.cancel_scope.cancel()
    return stopped_by[0] if stopped_by else None
