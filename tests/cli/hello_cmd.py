"""A command added the documented way (docs/architecture.md): this module plus one line."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from rolecall.cli.options import Options
from rolecall.cli.registry import add_command


@dataclass(frozen=True, slots=True, kw_only=True)
class HelloOptions(Options):
    name: str  # NAME


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(sub, "hello", description="Say hello to NAME.", examples=["rolecall hello you"])
    p.add_argument("name", metavar="NAME")


def cmd_hello(args: argparse.Namespace) -> int:
    opts = HelloOptions.of(args)
    print(f"hello {opts.name}")
    return 0 if opts.name != "nobody" else 3
