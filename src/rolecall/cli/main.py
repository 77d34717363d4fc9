"""The ``rolecall`` command: argument parsing only; each command imports what it needs.

The commands are those of :mod:`rolecall.cli.registry`, one line each.

Kept light on purpose so ``rolecall --help`` starts fast: no pydantic, no litellm here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from rolecall.cli import registry
from rolecall.errors import UsageError

EPILOG = """examples:
  rolecall run classroom                      run worlds/classroom on its models
  rolecall run worlds/classroom --json        the event stream as JSON lines
  rolecall run classroom --mode step          one turn per Enter, q to stop
  rolecall chat panel < questions.txt         piped chat, one message per line
  rolecall worlds validate worlds/classroom   list every problem of a world file
  rolecall worlds show classroom              its roles, and each step's speaker and target
"""


def _build(
    only: str | None = None, *, listing: bool = False
) -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The parser, and each command's handler (``module:function``) by command name;
    when ``only`` names a command, with that command alone (``rolecall run ...`` is
    parsed without adding the other commands' flags: about 10 ms of every start). With
    ``listing``, every command by name and summary alone, none parsable: what
    ``rolecall --help`` shows and a mistyped command is compared with."""
    from rolecall.cli.suggest import Parser

    parser: argparse.ArgumentParser = Parser(
        prog="rolecall",
        description="Multi-role LLM dialogues: worlds of roles that talk one at a time.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if listing:
        registry.list_commands(sub)
        return parser, {}
    handlers = registry.add_commands(sub, only)
    return parser, handlers


def build_parser() -> argparse.ArgumentParser:
    """The ``rolecall`` parser, every registered command in it."""
    return _build()[0]


def main(argv: Sequence[str] | None = None) -> int:
    if sys.stdin is None:  # standard input closed (`<&-`, some service managers): empty
        sys.stdin = open(os.devnull, encoding="utf-8")  # noqa: SIM115 - lives as long as we do
    from rolecall.cli.suggest import parse

    words = sys.argv[1:] if argv is None else list(argv)
    for word in words:
        try:
            word.encode("utf-8")
        except UnicodeEncodeError:  # bytes that are not UTF-8 (Python kept them as surrogates)
            shown = os.fsencode(word).decode("utf-8", "backslashreplace")
            print(f"rolecall: the argument '{shown}' is not UTF-8 text", file=sys.stderr)
            return UsageError.exit_code
    # `rolecall run ...`: the other commands' parsers are not needed to parse it (nor
    # their help: `rolecall run --help` is the run command's own). With no command named
    # at all (`rolecall --help`, `rolecall`, a mistyped one), no command's parser is: the
    # listing shows and suggests the same, and nothing can be dispatched from it
    names = {command.name for command in registry.COMMANDS}
    first = words[0] if words else None
    listing = not names.intersection(words)
    parser, handlers = _build(first if first in names else None, listing=listing)
    args = parse(parser, words)
    if args.version:
        from rolecall.version import __version__

        print(f"rolecall {__version__}")
        return 0
    if args.command is None:
        parser.print_help()
        return UsageError.exit_code
    from rolecall.cli.commands import dispatch

    return dispatch(args, handlers[args.command])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
