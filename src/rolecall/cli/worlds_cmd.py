"""``rolecall worlds``: list, validate, show, check, new and schema of world folders."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from rolecall.cli.flags import add_common_flags
from rolecall.cli.registry import summary
from rolecall.errors import UsageError, WorldError

if TYPE_CHECKING:
    from rolecall.world.library import RoleLibrary
    from rolecall.world.models import World


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worlds = sub.add_parser(
        "worlds",
        help=summary("worlds"),
        description="List, validate, check and create world folders.",
        epilog="examples:\n  rolecall worlds list\n"
        "  rolecall worlds validate worlds/classroom\n"
        "  rolecall worlds check worlds/classroom\n"
        "  rolecall worlds new my-study --from study",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wsub = worlds.add_subparsers(dest="worlds_command", metavar="ACTION", required=True)
    wl = wsub.add_parser(
        "list",
        help="list the shipped worlds and those under ./worlds/ (marked local; a local one wins)",
        epilog="examples:\n  rolecall worlds list\n  rolecall worlds list --dir ~/my-worlds",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wl.add_argument("--dir", default="worlds", help="folder holding worlds (default ./worlds)")
    add_common_flags(wl, run_flags=False, data_dir_help="the data directory (its role library)")
    wv = wsub.add_parser(
        "validate",
        help="check a world file and list every problem",
        epilog="example:\n  rolecall worlds validate worlds/classroom",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wv.add_argument("world", metavar="WORLD")
    add_common_flags(
        wv, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    ws = wsub.add_parser(
        "show",
        help="a world's roles and its flow: each step's speaker and reply target, loops, branches",
        epilog="example:\n  rolecall worlds show classroom",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ws.add_argument("world", metavar="WORLD")
    add_common_flags(
        ws, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    wc = wsub.add_parser(
        "check",
        help="a world's worst case before it runs: turns, tokens, cost, caps (no model call)",
        epilog="examples:\n  rolecall worlds check tutoring\n  rolecall worlds check debate --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wc.add_argument("world", metavar="WORLD")
    wc.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_common_flags(
        wc, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    wn = wsub.add_parser(
        "new",
        help="write a ready-to-edit world folder from a preset or a copy of any world",
        epilog="examples:\n  rolecall worlds new my-debate --from debate\n"
        "  rolecall worlds new my-class --from classroom   (a copy of a shipped world)\n"
        "  rolecall worlds new mine --from tutoring --dir my-worlds   (in a checkout)\n"
        "  rolecall worlds new panel2 --from consensus\n"
        "  rolecall worlds new my-study --from study   (world.yaml and a starter notes.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wn.add_argument("name", metavar="NAME", help="the new world's name (folder under --dir)")
    wn.add_argument(
        "--from",
        dest="preset",
        required=True,
        metavar="PRESET|WORLD",
        help="a preset (debate, consensus or study) or any world to copy (a shipped or "
        "./worlds/ name, or a folder)",
    )
    wn.add_argument(
        "--dir",
        default="worlds",
        help="folder holding your worlds (default ./worlds, where `rolecall run NAME` looks; "
        "never inside the rolecall package)",
    )
    add_common_flags(wn, run_flags=False, data_dir_help="the data directory (unused by new)")
    wsc = wsub.add_parser(
        "schema",
        help="print the JSON Schema of world.yaml (for editors: see docs/worlds.md)",
        epilog="example:\n  rolecall worlds schema > world.schema.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_flags(wsc, run_flags=False, data_dir_help="the data directory (unused by schema)")


def cmd_worlds(args: argparse.Namespace) -> int:
    from rolecall.cli.exits import EXIT_OK
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    library = role_library(args)
    if args.worlds_command == "new":
        return _new_world(args)
    if args.worlds_command == "schema":
        from rolecall.cli.ecosystem_cmd import cmd_schema

        return cmd_schema(args)
    if args.worlds_command == "validate":
        loaded = load_world(args.world, library)
        world = loaded.world
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        _check_tools(world, str(loaded.path))
        steps = len(world.flow.steps) if world.flow else 0
        roles = len(world.roles)
        counted = (
            f"{roles} role{'' if roles == 1 else 's'}, {steps} step{'' if steps == 1 else 's'}"
        )
        print(f"{loaded.path}: ok ({counted})")
        from rolecall.cli.check_cmd import summary, worst_case

        print(summary(worst_case(world)))
        return EXIT_OK
    if args.worlds_command == "show":
        return _show_world(args, library)
    if args.worlds_command == "check":
        from rolecall.cli.check_cmd import cmd_check

        loaded = load_world(args.world, library)
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return cmd_check(args, loaded.world)
    from rolecall.world import catalog

    for entry in catalog.available(Path(args.dir)):
        note = " (instead of the shipped one)" if entry.shadows else ""
        try:
            world = load_world(entry.path, library).world
            print(f"{entry.name:16} {entry.source:8} {world.title or world.topic}{note}")
        except WorldError as exc:
            print(
                f"{entry.name:16} {entry.source:8} invalid: {len(exc.problems)} "
                f"{'problem' if len(exc.problems) == 1 else 'problems'}{note}",
                file=sys.stderr,
            )
    return EXIT_OK


def _check_tools(world: World, source: str) -> None:
    """Start the world's tools as a session does (tools.md): a pattern that matches no
    tool, a server that does not start, a Python tool that does not import is a
    WorldError naming each."""
    from rolecall.tools.box import open_toolbox, uses_tools

    if not uses_tools(world):
        return
    import anyio

    async def started() -> None:
        async with open_toolbox(world, source=source):
            pass

    anyio.run(started)


def _show_world(args: argparse.Namespace, library: RoleLibrary) -> int:
    """``worlds show``: the roles, then the flow (speaker → reply target per step)."""
    from rolecall.cli.exits import EXIT_OK
    from rolecall.world.loader import load_world
    from rolecall.world.view import flow_lines

    loaded = load_world(args.world, library)
    world = loaded.world
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    print(f"{world.title or world.name}  ({loaded.path})")
    if world.topic:
        print(f"topic: {world.topic}")
    width = max(len(r.id) for r in world.roles)
    print("roles:")
    for role in world.roles:
        print(f"  {role.id:<{width}}  {role.display_name} · {world.model_for(role)}")
    if world.flow is not None:
        print("\n".join(flow_lines(world.flow, current=world.flow.start_id)))
    elif world.mode is not None:
        print(f"{world.mode} mode: its turns are planned by the mode (docs/modes.md)")
    else:
        print("no flow: a chat (rolecall chat WORLD; @role to address one)")
    return EXIT_OK


def _new_world(args: argparse.Namespace) -> int:
    """Write ``<dir>/<name>/`` from a preset or a copy of any world; never overwrite a
    world, never write into the rolecall package (a checkout's ``./worlds`` links there)."""
    from rolecall.cli.exits import EXIT_OK
    from rolecall.cli.modes_cmd import PRESET_YAML, check_world_name, new_world_yaml
    from rolecall.cli.study_cmd import new_study_files

    name, start = args.name, args.preset
    check_world_name(name)
    files: dict[str, str | bytes]
    if start == "study":
        files = dict(new_study_files(name))
    elif start in PRESET_YAML:
        files = {"world.yaml": new_world_yaml(start, name)}
    else:
        files = _copied_world(start, name)
    folder = Path(args.dir) / name
    _refuse_the_package(folder, args)
    if (folder / "world.yaml").exists():
        raise UsageError(f"{folder / 'world.yaml'} already exists; choose another name")
    for relative, data in files.items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(data, str):
            path.write_text(data, encoding="utf-8")
        else:
            path.write_bytes(data)
    print(f"wrote {folder / 'world.yaml'} (edit it, then: rolecall run {folder})")
    return EXIT_OK


def _copied_world(spec: str, name: str) -> dict[str, str | bytes]:
    """The files of the world ``spec`` (a shipped or ``./worlds/`` name, or a folder),
    its ``world.yaml`` renamed ``name``; UsageError naming the choices when none."""
    import re

    from rolecall.cli.modes_cmd import PRESET_YAML
    from rolecall.cli.suggest import did_you_mean
    from rolecall.world import catalog
    from rolecall.world.loader import resolve_world_path

    try:
        source = resolve_world_path(spec)
    except UsageError:
        known = [entry.name for entry in catalog.available()]
        presets = [*PRESET_YAML, "study"]
        raise UsageError(
            f"--from {spec!r}: no preset or world to start from"
            f"{did_you_mean(spec, [*presets, *known])} (presets: {', '.join(presets)}; "
            f"worlds: {', '.join(known)}; or a world folder)"
        ) from None
    root = source.parent
    files: dict[str, str | bytes] = {}
    for path in sorted(root.rglob("*")):
        relative = path.relative_to(root)
        hidden = any(part.startswith(".") or part == "__pycache__" for part in relative.parts)
        if path.is_file() and not hidden and path != source:
            files[relative.as_posix()] = path.read_bytes()
    text = source.read_text(encoding="utf-8")
    renamed, count = re.subn(r"(?m)^name:.*$", f"name: {name}", text, count=1)
    files["world.yaml"] = renamed if count else f"name: {name}\n{text}"
    return files


def _refuse_the_package(folder: Path, args: argparse.Namespace) -> None:
    """UsageError when ``folder`` is inside the installed rolecall package (its shipped
    worlds are package data: an upgrade replaces them, and they are listed as shipped)."""
    import rolecall

    package = Path(rolecall.__file__).resolve().parent
    if folder.resolve().is_relative_to(package):
        raise UsageError(
            f"--dir {args.dir}: {folder} is inside the rolecall package ({package}); "
            "`worlds new` never writes there (in a checkout ./worlds links to the shipped "
            f"worlds). Give a folder of your own: rolecall worlds new {args.name} "
            f"--from {args.preset} --dir my-worlds"
        )
