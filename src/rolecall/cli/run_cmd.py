"""``rolecall run``, ``chat`` and ``resume``: their parsers (handlers in commands.py)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rolecall.cli.flags import add_common_flags, add_nats_flag
from rolecall.cli.registry import summary
from rolecall.cli.web_cmd import add_web_flags

if TYPE_CHECKING:
    Sub = argparse._SubParsersAction[argparse.ArgumentParser]


def world_help() -> str:
    """WORLD's help: what it may be, with the names of the shipped worlds."""
    from rolecall.world.catalog import shipped_dir

    names = sorted(p.parent.name for p in shipped_dir().glob("*/world.yaml"))
    return (
        "a shipped world (" + ", ".join(names) + "), a name under ./worlds/, a folder, or a "
        "world.yaml path (rolecall worlds list)"
    )


def add_run(sub: Sub) -> None:
    run = sub.add_parser(
        "run",
        help=summary("run"),
        description="Run a world's flow to its stop, streaming every message live.",
        epilog="examples:\n  rolecall run classroom\n"
        "  rolecall run worlds/classroom --json --max-turns 4\n"
        "  rolecall run classroom --model openai/gpt-4o-mini",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("world", metavar="WORLD", help=world_help())
    run.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: run to the stop; step: one turn per Enter",
    )
    add_common_flags(run)
    add_nats_flag(run)


def add_chat(sub: Sub) -> None:
    chat = sub.add_parser(
        "chat",
        help=summary("chat"),
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
    chat.add_argument("world", metavar="WORLD", help=world_help())
    chat.add_argument(
        "--mode",
        choices=("auto", "step"),
        default="auto",
        help="auto: a flow runs by itself between your messages; step: one turn per Enter",
    )
    chat.add_argument(
        "--web", action="store_true", help="talk in the web view instead (see `rolecall web`)"
    )
    add_web_flags(chat)
    add_common_flags(chat)
    add_nats_flag(chat)
    add_stream_flag(chat)


def add_stream_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--stream",
        choices=("preview", "full"),
        default=None,
        help="the REPL while a reply streams: a one-line preview, the reply printed whole "
        "when complete (default), or every line as it streams",
    )


def add_resume(sub: Sub) -> None:
    resume = sub.add_parser(
        "resume",
        help=summary("resume"),
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
    add_stream_flag(resume)
