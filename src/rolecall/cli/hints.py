"""Commands printed for the user to paste: they must work exactly as printed.

A hint names every flag it needs (``--data-dir`` when the session is not in the default
data directory of the shell it is pasted in) and absolute paths, so it works pasted in
any folder of the same shell.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path


def _data_dir_flag(args: argparse.Namespace | None) -> str:
    explicit = getattr(args, "data_dir", None) if args is not None else None
    if not explicit:
        return ""
    return f" --data-dir {shlex.quote(str(Path(explicit).expanduser().absolute()))}"


def _nats_flag(args: argparse.Namespace | None) -> str:
    """``--nats URL`` when the session ran with it given as a flag (its events, and any
    remote agents, are on that cluster; ``ROLECALL_NATS_URL`` set in the shell stays)."""
    url = getattr(args, "nats", None) if args is not None else None
    return f" --nats {shlex.quote(str(url))}" if url else ""


def command(words: str, args: argparse.Namespace | None) -> str:
    """``rolecall WORDS`` with ``--data-dir`` when the command ran with one: a hint about
    a session, batch or role of that data directory (``sessions list --batch NAME``)."""
    return f"rolecall {words}{_data_dir_flag(args)}"


def resume_command(session_id: str, args: argparse.Namespace | None) -> str:
    """``rolecall resume ID`` with the flags that find the session again."""
    return f"{command(f'resume {session_id}', args)}{_nats_flag(args)}"


def export_command(session_id: str, args: argparse.Namespace | None, fmt: str = "md") -> str:
    """``rolecall sessions export ID --format md --out /abs/ID.md`` (and ``--data-dir``)."""
    out = shlex.quote(str(Path.cwd() / f"{session_id}.{fmt}"))
    return f"rolecall sessions export {session_id} --format {fmt} --out {out}{_data_dir_flag(args)}"
