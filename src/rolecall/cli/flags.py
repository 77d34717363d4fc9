"""The flags every command shares (guide.md, modes.md), in one module every command imports."""

from __future__ import annotations

import argparse

from rolecall.errors import UsageError


def add_common_flags(
    p: argparse.ArgumentParser,
    *,
    run_flags: bool = True,
    max_turns: bool = True,
    topic_help: str = "replace the world's topic",
    data_dir_help: str = "where sessions are stored (env ROLECALL_HOME)",
    quiet_help: str = "less output (no token lines)",
) -> None:
    """Add the common flags (modes.md) to ``p``, in their usual order.

    ``--model --json --data-dir --session-file --max-turns --topic -q -v --log-file``;
    ``max_turns=False`` leaves out ``--max-turns`` (a command defining its own), and
    ``run_flags=False`` keeps only ``--data-dir -q -v --log-file`` (commands that run no
    session). The ``*_help`` texts let a command word a flag for itself.
    """
    if run_flags:
        p.add_argument(
            "--model",
            type=model_name,
            help="replace the model of every non-scripted role (env ROLECALL_MODEL)",
        )
        p.add_argument(
            "--json", action="store_true", help="write every event as JSON lines on stdout"
        )
    p.add_argument("--data-dir", help=data_dir_help)
    if run_flags:
        p.add_argument("--session-file", help="also write the session file here on every turn")
        if max_turns:
            p.add_argument(
                "--max-turns", type=int, help="hard cap on agent messages in this session"
            )
        p.add_argument(
            "--max-cost",
            type=float,
            metavar="USD",
            help="hard budget in USD, checked before each model call (settings.max_cost)",
        )
        p.add_argument("--topic", help=topic_help)
        add_replay_flags(p)
        p.add_argument(
            "--approve",
            choices=("auto", "deny"),
            help="answer the tool calls a role must ask for (approve: ask) when no person "
            "can: allow them all, or refuse them (the default), docs/tools.md",
        )
    p.add_argument("-q", "--quiet", action="store_true", help=quiet_help)
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output and logs (-vv)")
    p.add_argument("--log-file", help="write structured JSON logs to this file")


def add_replay_flags(p: argparse.ArgumentParser) -> None:
    """``--record``, ``--replay``, ``--replay-or-call``, ``--replay-file`` (docs/replay.md)."""
    group = p.add_mutually_exclusive_group()
    group.add_argument(
        "--record",
        dest="replay",
        action="store_const",
        const="record",
        help="keep every model call in the replay store",
    )
    group.add_argument(
        "--replay",
        dest="replay",
        action="store_const",
        const="replay",
        help="serve model calls from the replay store; a call not in it is an error",
    )
    group.add_argument(
        "--replay-or-call",
        dest="replay",
        action="store_const",
        const="replay-or-call",
        help="serve recorded calls, call (and record) the model for the others",
    )
    p.add_argument(
        "--replay-file",
        metavar="FILE",
        help="the replay store (JSON Lines); default replay.jsonl in the data dir",
    )


def add_nats_flag(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """``--nats URL``: the NATS JetStream transport (docs/nats.md)."""
    p.add_argument(
        "--nats",
        metavar="URL",
        required=required,
        help="a NATS server with JetStream, e.g. nats://127.0.0.1:4222 (env ROLECALL_NATS_URL)",
    )


def add_service_flags(p: argparse.ArgumentParser, *, quiet: str) -> None:
    """``-q`` (``quiet`` says what it hides), ``-v`` and ``--log-file``: the flags of the
    long-running NATS commands (``worker``, ``agent``)."""
    p.add_argument("-q", "--quiet", action="store_true", help=quiet)
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output and logs")
    p.add_argument("--log-file", help="write structured JSON logs to this file")


def at_least_one(value: int, flag: str) -> int:
    """``value`` of ``flag``, a usage error below 1."""
    if value < 1:
        raise UsageError(f"{flag} must be at least 1, got {value}")
    return value


def model_name(value: str) -> str:
    """``--model``: a model name; not empty, and not ``scripted`` (which plays a role's
    ``script:`` lines, so it is chosen per role in the world)."""
    if not value.strip():
        raise argparse.ArgumentTypeError("give a model name, e.g. offline or openai/gpt-4o-mini")
    if value == "scripted":
        raise argparse.ArgumentTypeError(
            "'scripted' plays a role's script: lines; set model: scripted on those roles "
            "in the world instead"
        )
    return value


def file_to_write(value: str, flag: str) -> str:
    """``value`` of ``flag`` (a file written at the end of a long command); a usage error
    up front when it could not be: a directory, under a file, or in a folder this process
    may not write to (missing folders are created)."""
    import os
    from pathlib import Path

    path = Path(value).expanduser()
    if path.is_dir():
        raise UsageError(f"{flag} {value} is a directory; give the path of a file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise UsageError(f"{flag} {value}: {folder} is not a directory")
    special = path.exists() and not path.is_file()  # /dev/null, a pipe: written in place
    if not special and not os.access(folder, os.W_OK | os.X_OK):
        # the file is replaced atomically: a new file in its folder, renamed over it
        raise UsageError(f"{flag} {value}: cannot write in {folder} (permission denied)")
    return value
