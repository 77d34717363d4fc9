"""``rolecall agent ROLE --world W --nats URL``: serve one role's generations (nats.md)."""

from __future__ import annotations

import argparse
import signal
import sys
from dataclasses import dataclass

import anyio

from rolecall.cli.options import Options
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

EXAMPLES = [
    "rolecall agent con --world debate --nats nats://127.0.0.1:4222",
    "rolecall agent expert --world ./worlds/panel --nats nats://10.0.0.5:4222 --concurrency 4",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class AgentOptions(Options):
    """``rolecall agent ROLE --world W``."""

    role: str  # ROLE
    world: str  # --world W
    concurrency: int = 8  # --concurrency K


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_nats_flag, add_service_flags

    p = add_command(
        sub,
        "agent",
        description=(
            "Serve the generations of ROLE of world W to every session that runs W with "
            "--nats and marks ROLE with `transport: nats`: one NATS request per turn, the "
            "chunks streamed back. Several agent processes of one role share the load. "
            "The model is the one the session asks for (the world's, or its --model); its "
            "keys come from this process's environment. Prints one line starting 'ready:' "
            "on stderr once it takes work; Ctrl-C or SIGTERM stops it."
        ),
        examples=EXAMPLES,
    )
    p.add_argument("role", metavar="ROLE", help="the role's id in the world")
    p.add_argument("--world", required=True, metavar="W", help="a world name or path")
    add_nats_flag(p)
    p.add_argument(
        "--concurrency", type=int, default=8, metavar="K", help="generations at once (default 8)"
    )
    p.add_argument("--data-dir", help="where role templates are found (env ROLECALL_HOME)")
    add_service_flags(p, quiet="no ready line")


def cmd_agent(args: argparse.Namespace) -> int:
    opts = AgentOptions.of(args)
    from rolecall.api.entry import load_world
    from rolecall.cli.flags import at_least_one
    from rolecall.nats.link import required_nats_url
    from rolecall.paths import data_dir

    url = required_nats_url(opts.nats, "agent")
    at_least_one(opts.concurrency, "--concurrency")
    world = load_world(opts.world, data_dir=data_dir(opts.data_dir))
    if opts.role not in world.role_ids:
        raise UsageError(
            f"world '{world.name}' has no role '{opts.role}' (roles: {', '.join(world.role_ids)})"
        )
    if world.role(opts.role).transport != "nats":
        print(
            f"note: role '{opts.role}' of world '{world.name}' has no `transport: nats`, so "
            "sessions generate it themselves until the world says so",
            file=sys.stderr,
        )
    anyio.run(_serve, opts, url, world.name)
    return 0


async def _serve(opts: AgentOptions, url: str, world: str) -> None:
    from rolecall.cli.stop_signal import StopOnSignal
    from rolecall.cli.wiring import stream_pacing
    from rolecall.llm.registry import ModelRegistry
    from rolecall.nats.agents import agent_subject, serve
    from rolecall.nats.link import connect

    models = ModelRegistry(**stream_pacing(True))

    def ready() -> None:
        if not opts.quiet:
            print(
                f"ready: agent for role {opts.role} of world {world} on "
                f"{agent_subject(world, opts.role)} at {url} ({opts.concurrency} at once)",
                file=sys.stderr,
                flush=True,
            )

    async with (
        connect(url, name=f"rolecall-agent-{opts.role}") as link,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(StopOnSignal(tg.cancel_scope, signal.SIGINT, signal.SIGTERM))
        await serve(link, world, opts.role, models.get, concurrency=opts.concurrency, ready=ready)
