"""``rolecall worlds``: list, validate, show, check, new and schema of world folders."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rolecall.cli.flags import add_common_flags
from rolecall.cli.options import Options
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError, WorldError

if TYPE_CHECKING:
    from rolecall.world.library import RoleLibrary
    from rolecall.world.models import World


@dataclass(frozen=True, slots=True, kw_only=True)
class WorldsOptions(Options):
    """``rolecall worlds ACTION``: each action's arguments (defaults where it has none)."""

    worlds_command: str  # list, validate, show, check, new, schema
    world: str = ""  # validate, show, check WORLD
    dir: str = "worlds"  # list, new --dir
    name: str = ""  # new NAME
    preset: str = ""  # new --from


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    worlds = add_command(
        sub,
        "worlds",
        description="List, validate, check and create world folders.",
        examples=[
            "rolecall worlds list",
            "rolecall worlds validate worlds/classroom",
            "rolecall worlds check worlds/classroom",
            "rolecall worlds new my-study --from study",
        ],
    )
    wsub = worlds.add_subparsers(dest="worlds_command", metavar="ACTION", required=True)
    wl = add_command(
        wsub,
        "list",
        help="list the shipped worlds and those under ./worlds/ (marked local; a local one wins)",
        examples=[
            "rolecall worlds list",
            "rolecall worlds list --dir ~/my-worlds",
        ],
    )
    wl.add_argument("--dir", default="worlds", help="folder holding worlds (default ./worlds)")
    add_common_flags(wl, run_flags=False, data_dir_help="the data directory (its role library)")
    wv = add_command(
        wsub,
        "validate",
        help="check a world file and list every problem",
        examples=[
            "rolecall worlds validate worlds/classroom",
        ],
    )
    wv.add_argument("world", metavar="WORLD")
    add_common_flags(
        wv, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    ws = add_command(
        wsub,
        "show",
        help=(
            "a world's roles and its flow: each step's speaker and reply target, loops, branches"
        ),
        examples=[
            "rolecall worlds show classroom",
        ],
    )
    ws.add_argument("world", metavar="WORLD")
    add_common_flags(
        ws, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    wc = add_command(
        wsub,
        "check",
        help="a world's worst case before it runs: turns, tokens, cost, caps (no model call)",
        examples=[
            "rolecall worlds check tutoring",
            "rolecall worlds check debate --json",
        ],
    )
    wc.add_argument("world", metavar="WORLD")
    wc.add_argument("--json", action="store_true", help="one JSON object on stdout")
    add_common_flags(
        wc, run_flags=False, data_dir_help="the data directory (its role library for template:)"
    )
    wn = add_command(
        wsub,
        "new",
        help="write a ready-to-edit world folder from a preset or a copy of any world",
        examples=[
            "rolecall worlds new my-debate --from debate",
            "rolecall worlds new my-class --from classroom   (a copy of a shipped world)",
            "rolecall worlds new mine --from tutoring --dir my-worlds   (in a checkout)",
            "rolecall worlds new panel2 --from consensus",
            "rolecall worlds new my-study --from study   (world.yaml and a starter notes.md)",
        ],
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
    wsc = add_command(
        wsub,
        "schema",
        help="print the JSON Schema of world.yaml (for editors: see docs/worlds.md)",
        examples=[
            "rolecall worlds schema > world.schema.json",
        ],
    )
    add_common_flags(wsc, run_flags=False, data_dir_help="the data directory (unused by schema)")


def cmd_worlds(args: argparse.Namespace) -> int:
    from rolecall.cli.exits import EXIT_OK
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import load_world

    opts = WorldsOptions.of(args)
    library = role_library(opts)
    if opts.worlds_command == "new":
        return _new_world(opts)
    if opts.worlds_command == "schema":
        from rolecall.cli.ecosystem_cmd import cmd_schema

        return cmd_schema()
    if opts.worlds_command == "validate":
        loaded = load_world(opts.world, library)
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
    if opts.worlds_command == "show":
        return _show_world(opts, library)
    if opts.worlds_command == "check":
        from rolecall.cli.check_cmd import cmd_check

        loaded = load_world(opts.world, library)
        for warning in loaded.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        return cmd_check(loaded.world, json_out=opts.json)
    from rolecall.world import catalog

    for entry in catalog.available(Path(opts.dir)):
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


def _show_world(opts: WorldsOptions, library: RoleLibrary) -> int:
    """``worlds show``: the roles, then the flow (speaker → reply target per step)."""
    from rolecall.cli.exits import EXIT_OK
    from rolecall.world.loader import load_world
    from rolecall.world.view import flow_lines

    loaded = load_world(opts.world, library)
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


def _new_world(opts: WorldsOptions) -> int:
    """Write ``<dir>/<name>/`` from a preset or a copy of any world; never overwrite a
    world, never write into the rolecall package (a checkout's ``./worlds`` links there)."""
    from rolecall.cli.exits import EXIT_OK
    from rolecall.cli.modes_cmd import PRESET_YAML, check_world_name, new_world_yaml
    from rolecall.cli.study_cmd import new_study_files

    name, start = opts.name, opts.preset
    check_world_name(name)
    files: dict[str, str | bytes]
    if start == "study":
        files = dict(new_study_files(name))
    elif start in PRESET_YAML:
        files = {"world.yaml": new_world_yaml(start, name)}
    else:
        files = _copied_world(start, name)
    folder = Path(opts.dir) / name
    _refuse_the_package(folder, opts)
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


def _refuse_the_package(folder: Path, opts: WorldsOptions) -> None:
    """UsageError when ``folder`` is inside the installed rolecall package (its shipped
    worlds are package data: an upgrade replaces them, and they are listed as shipped)."""
    import rolecall

    package = Path(rolecall.__file__).resolve().parent
    if folder.resolve().is_relative_to(package):
        raise UsageError(
            f"--dir {opts.dir}: {folder} is inside the rolecall package ({package}); "
            "`worlds new` never writes there (in a checkout ./worlds links to the shipped "
            f"worlds). Give a folder of your own: rolecall worlds new {opts.name} "
            f"--from {opts.preset} --dir my-worlds"
        )
