"""``rolecall serve --mcp``: rolecall as an MCP server (docs/compare.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rolecall.cli.exits import EXIT_INTERRUPTED, EXIT_OK
from rolecall.cli.registry import add_command

EXAMPLES = [
    "rolecall serve --mcp                         stdio (an MCP client starts it)",
    "rolecall serve --mcp --port 8931             streamable HTTP on http://127.0.0.1:8931/mcp",
    "rolecall serve --mcp --approve auto          allow the tool calls that need approval",
]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_common_flags

    p = add_command(
        sub,
        "serve",
        description=(
            "Serve rolecall to MCP clients: tools list_worlds, start_session, say, "
            "read_session, debate and consensus. Over stdio, or with --port over "
            "streamable HTTP on 127.0.0.1. Sessions are stored in the data directory "
            "like any other."
        ),
        examples=EXAMPLES,
    )
    p.add_argument("--mcp", action="store_true", help="speak the Model Context Protocol")
    p.add_argument(
        "--port",
        type=int,
        help="serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio",
    )
    p.add_argument(
        "--approve",
        choices=("auto",),
        help="allow the tool calls a served world's roles must ask for (approve: ask); "
        "without it they are refused, saying so",
    )
    add_common_flags(p, run_flags=False)


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from rolecall.errors import UsageError
    from rolecall.paths import data_dir

    if not args.mcp:
        raise UsageError("serve needs --mcp (the protocol it serves): rolecall serve --mcp")
    if args.port is not None and not 0 < args.port < 65536:
        raise UsageError(f"--port must be 1..65535, got {args.port}")
    if args.port is not None:
        _check_port(args.port)
    from rolecall.serve.mcp_server import Served, serve

    served = Served(
        data_dir(args.data_dir),
        approve=args.approve,
        local=Path.cwd() / "worlds",
    )

    async def main() -> None:
        await serve(served, port=args.port)

    try:
        anyio.run(main)
    except KeyboardInterrupt:
        print("rolecall serve: stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_OK


def _check_port(port: int) -> None:
    """A port already taken on 127.0.0.1 is a usage error naming it (before the server
    starts, which would only log it)."""
    import socket

    from rolecall.errors import UsageError

    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise UsageError(
                f"--port {port}: cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}); "
                "choose another port"
            ) from None
