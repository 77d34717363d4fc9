"""A command added the documented way (docs/architecture.md): this module plus one line."""

from __future__ import annotations

import argparse

from rolecall.cli.registry import summary


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("hello", help=summary("hello"), description="Say hello to NAME.")
    p.add_argument("name", metavar="NAME")


def cmd_hello(args: argparse.Namespace) -> int:
    print(f"hello {args.name}")
    return 0 if args.name != "nobody" else 3
