"""``rolecall memory``: show or clear an agent's passive memory in a session."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from rolecall.cli.manage.common import (
    add_manage_flags,
    confirm,
    data_dir_of,
    resolve_session_id,
    role_ids_of,
    with_store,
)
from rolecall.cli.registry import add_command, summary

if TYPE_CHECKING:
    from pathlib import Path

    from rolecall.storage.data_store import DataStore
    from rolecall.storage.document import SessionDocument


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``rolecall memory`` and its actions to the top-level subparsers ``sub``."""
    memory = add_command(
        sub,
        "memory",
        help=summary("memory"),
        description=(
            "Each agent keeps a memory file per session: every message it received or "
            "wrote. Clearing archives the file beside it and resets the agent's turn count; "
            "its prompts then start after the current last message."
        ),
        examples=[
            "rolecall memory show 20261122-101500-a1b2c3 teacher",
            "rolecall memory clear 20261122-101500-a1b2c3 teacher",
        ],
    )
    msub = memory.add_subparsers(dest="memory_command", metavar="ACTION", required=True)
    for action, text in (
        ("show", "an agent's memory entries, oldest first"),
        ("clear", "archive an agent's memory file and reset its turn count"),
    ):
        p = add_command(
            msub,
            action,
            help=text,
            examples=[f"rolecall memory {action} 20261122-101500-a1b2c3 teacher"],
        )
        p.add_argument("session", metavar="SESSION", help="a session id")
        p.add_argument("agent", metavar="AGENT", help="a role id of that session")
        add_manage_flags(p)


# =================================================================== memory
def cmd_memory(args: argparse.Namespace) -> int:
    from rolecall.cli.options import Options
    from rolecall.errors import UsageError
    from rolecall.memory import MemoryFiles
    from rolecall.paths import safe_id
    from rolecall.world.library import suggest

    opts = Options.of(args)
    sid = resolve_session_id(args.session, opts)
    agent = safe_id(args.agent, "agent id")
    memory = MemoryFiles.in_data_dir(data_dir_of(opts))
    clearing = args.memory_command == "clear"

    async def body(store: DataStore) -> tuple[SessionDocument, int, Path | None]:
        doc = await store.load(sid, with_events=False)
        agents = role_ids_of(doc)
        if agent not in agents:
            raise UsageError(f"session {sid} has no agent '{agent}'{suggest(agent, agents)}")
        if not clearing:
            return doc, 0, None
        claim = store.claim(sid)  # refused while a live session writes it: nothing archived
        try:
            archive = memory.clear(sid, agent)
            return doc, await store.forget(sid, agent), archive
        finally:
            claim.release()

    doc, start, archive = with_store(
        opts, body, missing=f"no session '{sid}'", read_only=not clearing
    )
    path = memory.path(sid, agent)
    if clearing:
        what = f"archived {path.name} as {archive.name}" if archive else "no memory file yet"
        confirm(
            opts,
            f"cleared the memory of {agent} in session {sid}: {what}; turn count reset; "
            f"its prompts start after message {start}",
        )
        return 0
    from rolecall.export.common import visible

    entries = memory.read(sid, agent)
    noun = "entry" if len(entries) == 1 else "entries"
    print(f"memory of {agent} in session {sid}: {len(entries)} {noun} ({path})")
    begin = doc.state.memory_start.get(agent, 0)
    if begin:
        print(f"cleared after message {begin}: its prompts use only the messages after it")
    archives = list(path.parent.glob(f"{agent}.*.jsonl.archived")) if path.parent.is_dir() else []
    if archives:
        print(f"{len(archives)} archived file(s) beside it from earlier clears")
    for entry in entries:
        role = entry.get("role")
        if role == "assistant":
            who = "own message"
        elif role == "system":
            who = "system"
        else:
            who = f"from {entry.get('name', '?')}"
        stamp = str(entry.get("ts", ""))[:19].replace("T", " ")
        head = f"\n[{entry.get('message_id', '?')}] {who}  {stamp}".rstrip()
        print(visible(head))  # what a model wrote: an ESC shown as ␛, never obeyed
        content = visible(str(entry.get("content", "")))
        for line in content.splitlines() or [""]:
            print(f"  {line}")
    return 0
