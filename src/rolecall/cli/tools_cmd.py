"""``rolecall tools list WORLD [--json]``: every tool each role may call (docs/tools.md)."""

from __future__ import annotations

import argparse
import json

from rolecall.cli.flags import add_common_flags
from rolecall.cli.registry import add_command

EXIT_OK = 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tools = add_command(
        sub,
        "tools",
        description="The tools of a world's roles: MCP servers, Python callables, built-ins.",
        examples=[
            "rolecall tools list worlds/research",
            "rolecall tools list worlds/research --json",
        ],
    )
    tsub = tools.add_subparsers(dest="tools_command", metavar="ACTION", required=True)
    tl = add_command(
        tsub,
        "list",
        help="every tool each role may call, with where it comes from (starts the servers)",
        examples=[
            "rolecall tools list worlds/research --json",
        ],
    )
    tl.add_argument("world", metavar="WORLD")
    tl.add_argument("--json", action="store_true", help="one JSON object: roles and their tools")
    add_common_flags(
        tl, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )


def cmd_tools(args: argparse.Namespace) -> int:
    import anyio

    from rolecall.cli.manage.roles import role_library
    from rolecall.cli.options import Options
    from rolecall.tools.box import open_toolbox
    from rolecall.world.loader import load_world

    loaded = load_world(args.world, role_library(Options.of(args)))
    world = loaded.world

    async def listing() -> dict[str, list[dict[str, object]]]:
        async with open_toolbox(world, source=str(loaded.path)) as box:
            if box is None:
                return {role.id: [] for role in world.roles}
            return {
                role.id: [spec.as_dict() for spec in box.for_role(role)] for role in world.roles
            }

    found = anyio.run(listing)
    if args.json:
        roles = [{"role": rid, "tools": tools} for rid, tools in found.items()]
        print(json.dumps({"world": world.name, "roles": roles}, indent=2, ensure_ascii=False))
        return EXIT_OK
    for rid, tools in found.items():
        print(f"{rid}:")
        if not tools:
            print("  (no tools)")
        for tool in tools:
            first = str(tool["description"]).strip().splitlines()
            about = f" — {first[0]}" if first else ""
            print(f"  {tool['name']}  [{tool['source']}]{about}")
    return EXIT_OK
