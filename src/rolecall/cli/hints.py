"""Commands printed for the user to paste: they must work exactly as printed.

A hint names every flag it needs (``--data-dir`` when the session is not in the default
data directory of the shell it is pasted in) and absolute paths, so it works pasted in
any folder of the same shell.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rolecall.cli.options import Options


def _data_dir_flag(opts: Options | None) -> str:
    explicit = opts.data_dir if opts is not None else None
    if not explicit:
        return ""
    return f" --data-dir {shlex.quote(str(Path(explicit).expanduser().absolute()))}"


def _nats_flag(opts: Options | None) -> str:
    """``--nats URL`` when the session ran with it given as a flag (its events, and any
    remote agents, are on that cluster; ``ROLECALL_NATS_URL`` set in the shell stays)."""
    url = opts.nats if opts is not None else None
    return f" --nats {shlex.quote(str(url))}" if url else ""


def command(words: str, opts: Options | None) -> str:
    """``rolecall WORDS`` with ``--data-dir`` when the command ran with one: a hint about
    a session, batch or role of that data directory (``sessions list --batch NAME``)."""
    return f"rolecall {words}{_data_dir_flag(opts)}"


def resume_command(session_id: str, opts: Options | None) -> str:
    """``rolecall resume ID`` with the flags that find the session again."""
    return f"{command(f'resume {session_id}', opts)}{_nats_flag(opts)}"


def export_command(session_id: str, opts: Options | None, fmt: str = "md") -> str:
    """``rolecall sessions export ID --format md --out /abs/ID.md`` (and ``--data-dir``)."""
    out = shlex.quote(str(Path.cwd() / f"{session_id}.{fmt}"))
    return f"rolecall sessions export {session_id} --format {fmt} --out {out}{_data_dir_flag(opts)}"
