"""The ``rolecall`` command: argument parsing only; each command imports what it needs.

Kept light on purpose so ``rolecall --help`` starts fast: no pydantic, no litellm here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rolecall.cli.flags import add_common_flags, add_nats_flag

EPILOG = """examples:
  rolecall run classroom                      run worlds/classroom on its models
  rolecall run worlds/classroom --json        the event stream as JSON lines
  rolecall run classroom --mode step          one turn per Enter, q to stop
  rolecall chat panel < questions.txt         piped chat, one message per line
  rolecall worlds validate worlds/classroom   list every problem of a world file
  rolecall worlds show classroom              its roles, and each step's speaker and target
"""


def build_parser() -> argparse.ArgumentParser:
    from rolecall.cli.suggest import Parser

    parser: argparse.ArgumentParser = Parser(
        prog="rolecall",
        description="Multi-role LLM dialogues: worlds of roles that talk one at a time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run a world's flow to its stop, streaming every message",
        description="Run a world's flow to its stop, streaming every message live.",
        epilog="examples:\n  rolecall run classroom\n"
        "  rolecall run worlds/classroom --json --max-turns 4\n"
        "  rolecall run classroom --model openai/gpt-4o-mini",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument(
        "world", metavar="WORLD", help="a folder, a world.yaml path, or a name under ./worlds/"
    )
    run.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: run to the stop; step: one turn per Enter",
    )
    add_common_flags(run)
    add_nats_flag(run)

    chat = sub.add_parser(
        "chat",
        help="talk to a world (REPL on a terminal, piped mode otherwise)",
        description=(
            "Talk to a world. On a terminal this opens the REPL (docs/repl.md): type a "
            "message, @role to address one role, /help for the commands. With stdin not a "
            "terminal, each input line is one message or /command."
        ),
        epilog="examples:\n  rolecall chat panel\n"
        "  rolecall chat classroom --mode step        one turn per Enter\n"
        "  printf 'hello @alice\\n' | rolecall chat panel --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.add_argument(
        "world", metavar="WORLD", help="a folder, a world.yaml path, or a name under ./worlds/"
    )
    chat.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: a flow runs by itself between your messages; step: one turn per Enter",
    )
    chat.add_argument(
        "--web", action="store_true", help="talk in the web view instead (see `rolecall web`)"
    )
    from rolecall.cli.web_cmd import add_web_flags

    add_web_flags(chat)
    add_common_flags(chat)
    add_nats_flag(chat)

    resume = sub.add_parser(
        "resume",
        help="continue a saved session (an id or a session file)",
        description="Continue a saved session exactly where it stopped; nothing is regenerated.",
        epilog="examples:\n  rolecall resume 20261122-101500-a1b2c3\n"
        "  rolecall resume saved.json --json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    resume.add_argument("session", metavar="SESSION", help="a session id or a session file path")
    resume.add_argument(
        "--mode",
        choices=("auto", "step"),
        default=None,
        help="auto or step (default: the mode the session was left in from the REPL, else auto)",
    )
    add_common_flags(resume)
    add_nats_flag(resume)

    from rolecall.cli.batch_cmd import add_parser as add_batch
    from rolecall.cli.manage import register
    from rolecall.cli.modes_cmd import add_parsers
    from rolecall.cli.nats_cmd import add_watch_parser, add_worker_parser
    from rolecall.cli.study_cmd import add_parser as add_study
    from rolecall.cli.web_cmd import add_parser as add_web

    register(sub)
    add_parsers(sub)
    add_study(sub)
    add_batch(sub)
    add_watch_parser(sub)
    add_worker_parser(sub)
    from rolecall.cli.agent_cmd import add_parser as add_agent

    add_agent(sub)
    from rolecall.cli.ecosystem_cmd import add_parser as add_models

    add_models(sub)
    add_web(sub)

    worlds = sub.add_parser(
        "worlds",
        help="list, validate, check and create world folders",
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
        help="write a ready-to-edit world folder from a preset",
        epilog="examples:\n  rolecall worlds new my-debate --from debate\n"
        "  rolecall worlds new panel2 --from consensus\n"
        "  rolecall worlds new my-study --from study   (world.yaml and a starter notes.md)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wn.add_argument("name", metavar="NAME", help="the new world's name (folder under --dir)")
    wn.add_argument(
        "--from", dest="preset", required=True, metavar="MODE", help="debate, consensus or study"
    )
    wn.add_argument("--dir", default="worlds", help="folder holding worlds (default ./worlds)")
    add_common_flags(wn, run_flags=False, data_dir_help="the data directory (unused by new)")
    wsc = wsub.add_parser(
        "schema",
        help="print the JSON Schema of world.yaml (for editors: see docs/worlds.md)",
        epilog="example:\n  rolecall worlds schema > world.schema.json",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_common_flags(wsc, run_flags=False, data_dir_help="the data directory (unused by schema)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdin is None:  # standard input closed (`<&-`, some service managers): empty
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as we do
    from rolecall.cli.suggest import parse

    parser = build_parser()
    args = parse(parser, argv)
    if args.version:
        from rolecall.version import __version__

        print(f"rolecall {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return 2
    from rolecall.cli.commands import dispatch

    return dispatch(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
