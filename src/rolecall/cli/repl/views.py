"""The REPL's ``/commands`` that show something and change nothing (repl.md): ``/help``,
``/agents``, ``/roles``, ``/flow``, ``/history`` and ``/memory``, as lines echoed to the
user. :class:`rolecall.cli.repl.runner.CommandRunner` carries them out through these
functions, in the REPL and in the piped mode alike.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from rolecall.cli.palette import Palette, header, terminal_width, tokens
from rolecall.cli.repl.commands import CommandError, SlashCommand, help_lines

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.memory import MemoryFiles


class Viewer(Protocol):
    """The command runner as the views see it: what they use of
    :class:`rolecall.cli.repl.runner.CommandRunner`."""

    session: Session
    memory: MemoryFiles | None
    palette: Palette
    data_dir: Path | None
    echo: Callable[[str], None]
    interactive: bool  # on a terminal: /flow's lines are broken between words


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def _shorten(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _resolve_agent(session: Session, name: str) -> str:
    wanted = name.lstrip("@").lower()
    for rid in session.world.role_ids:
        if rid.lower() == wanted:
            return rid
    ids = session.world.role_ids
    close = difflib.get_close_matches(wanted, ids, n=1, cutoff=0.5)
    hint = f"did you mean {close[0]}?" if close else "agents: " + ", ".join(ids)
    raise CommandError(f"no agent {name!r} in this world ({hint})")


async def show_help(runner: Viewer, cmd: SlashCommand) -> None:
    runner.echo("\n".join(help_lines(cmd.args[0] if cmd.args else None)))


async def show_agents(runner: Viewer, cmd: SlashCommand) -> None:
    s = runner.session
    p = runner.palette
    width = max(len(r.id) for r in s.world.roles) + 1
    lines = [f"agents of {s.world.name}:"]
    turns_by_role = Counter(m.sender for m in s.transcript if m.kind == "agent")
    turn_counts = s.status.turn_counts
    for role in s.world.roles:
        turns = turns_by_role[role.id]
        facts = [s.model_name(role), _count(turns, "turn")]
        count = turn_counts.get(role.id)
        if count:
            facts.append(f"{count}/{s.world.settings.turn_limit} calls since you spoke")
        if runner.memory is not None:
            entries = len(runner.memory.read(s.session_id, role.id))
            facts.append(_count(entries, "memory entry", "memory entries"))
        about = role.display_name + (f" — {role.description}" if role.description else "")
        at = "@" + role.id
        lines.append(f"  {p.role(role.id, f'{at:<{width}}')}  {_shorten(about, 70)}")
        lines.append("  " + " " * width + "  " + p.dim(" · ".join(facts)))
    runner.echo("\n".join(lines))


async def show_roles(runner: Viewer, cmd: SlashCommand) -> None:
    from rolecall.world.library import RoleLibrary

    user_dir = runner.data_dir / "roles" if runner.data_dir is not None else None
    library = RoleLibrary(user_dir)
    used = {r.template for r in runner.session.world.roles if r.template}
    ids = library.ids()
    width = max((len(i) for i in ids), default=4)
    lines = ["role library (templates for `roles:` entries in a world file):"]
    for rid in ids:
        try:
            data = library.get(rid)
        except Exception as exc:  # a broken user file: say so, keep listing
            lines.append(f"  {rid:<{width}}  (unreadable: {exc})")
            continue
        kind = "built-in" if library.is_builtin(rid) else "yours"
        mark = " *" if rid in used else ""
        desc = _shorten(str(data.get("description", "")), 60)
        lines.append(f"  {rid:<{width}}  {desc}  {runner.palette.dim(kind + mark)}")
    if used:
        lines.append(runner.palette.dim("  * used by this world"))
    runner.echo("\n".join(lines))


async def show_flow(runner: Viewer, cmd: SlashCommand) -> None:
    from rolecall.session.state import FlowPointer, Transcript
    from rolecall.world.view import flow_lines

    s = runner.session
    flow = s.world.flow
    if flow is None:
        if not s.chat:
            runner.echo(
                f"this world runs in {s.world.mode} mode: its turns are planned by the mode"
            )
        else:
            runner.echo("this world has no flow: it is a chat (type a message, @agent for one)")
        return
    status = s.status
    pointer = FlowPointer(**status.pointer.model_dump())
    transcript = Transcript()
    for message in s.transcript:
        transcript.add(message)
    start = None if pointer.started else flow.start_id
    current = None if s.finished else (pointer.current or start)
    lines = flow_lines(
        flow,
        pointer=pointer,
        transcript=transcript,
        current=current,
        paint=runner.palette.role,
    )
    if s.finished:
        lines.append(f"finished: {status.stop_reason}")
    else:
        where = f"next: {current}" if current else "next: (deciding)"
        asides = pointer.exec_counts.get("interjection", 0)  # answers, not steps
        ran = pointer.execution_order - asides
        done = f"{ran} step{'' if ran == 1 else 's'} executed"
        if asides:
            done += f" (and {asides} interjection{'s' if asides > 1 else ''})"
        lines.append(f"{where} · {done} · state {status.state}")
    if runner.interactive:  # on a terminal: broken between words, not by the terminal
        width = terminal_width() - 1
        lines = [part for line in lines for part in _fold(line, width)]
    runner.echo("\n".join(lines))


async def show_history(runner: Viewer, cmd: SlashCommand) -> None:
    s = runner.session
    role = cmd.options.get("role")
    if role is not None and role.lower() not in ("human", "system"):
        role = _resolve_agent(s, role)
    search = cmd.options.get("search")
    p = runner.palette
    shown = 0
    from rolecall.cli.wrap import wrap_line  # wcwidth: only for what is shown

    width = terminal_width() - 3
    lines: list[str] = []
    for m in s.transcript:
        if role is not None and m.sender.lower() != role.lower():
            continue
        if search is not None and search.casefold() not in m.content.casefold():
            continue
        shown += 1
        head = f"{p.dim(m.id)} " + header(
            p, m.sender, m.target, m.step_id, m.loop_iteration, audience=m.audience
        )
        if m.kind == "agent":
            head += "  " + p.dim(tokens(m.input_tokens, m.output_tokens))
        lines.append(head)
        for text_line in m.content.split("\n"):
            lines += [p.bar(m.sender) + piece for piece in wrap_line(text_line, width)]
    drafts = [d for d in s.drafts if role is None or d.sender.lower() == role.lower()]
    what = []
    if role:
        what.append(f"by {role}")
    if search:
        what.append(f"containing {search!r}")
    if not shown:
        lines.append("no messages" + (" " + " ".join(what) if what else " yet"))
    else:
        noun = "message" if shown == 1 else "messages"
        lines.append(p.dim(f"{shown} {noun}" + (" " + " ".join(what) if what else "")))
    if drafts and search is None:
        n = len(drafts)
        lines.append(p.dim(f"{n} incomplete draft{'' if n == 1 else 's'} outside the history"))
    runner.echo("\n".join(lines))


async def show_memory(runner: Viewer, cmd: SlashCommand) -> None:
    agent = _resolve_agent(runner.session, cmd.args[0])
    if runner.memory is None:
        runner.echo("memory files are not available here")
        return
    entries = runner.memory.read(runner.session.session_id, agent)
    start = runner.session.status.memory_start.get(agent, 0)
    path = runner.memory.path(runner.session.session_id, agent)
    p = runner.palette
    lines = [f"memory of {agent}: {_count(len(entries), 'entry', 'entries')} ({path})"]
    window = runner.session.world.settings.memory_window
    for i, entry in enumerate(entries):
        who = entry.get("name") or entry.get("role", "?")
        role = entry.get("role", "?")
        text = _shorten(str(entry.get("content", "")), max(terminal_width() - 30, 40))
        lines.append(f"  {p.dim(str(entry.get('message_id', '')))} {role}({who}): {text}")
        if i == len(entries) - window - 1:
            lines.append(p.dim(f"  ── the last {window} entries are in the next prompt ──"))
    if start:
        lines.append(p.dim(f"  (prompts start at message m{start + 1}: memory cleared before)"))
    runner.echo("\n".join(lines))


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _fold(line: str, width: int, indent: str = "      ") -> list[str]:
    """``line`` in lines at most ``width`` columns wide, broken between words (the
    terminal would cut a word in two), colours not counted; the rest indented."""
    from rolecall.cli.wrap import width_of

    if width_of(_ANSI.sub("", line)) <= width:
        return [line]
    out: list[str] = []
    current, used = "", 0
    for i, word in enumerate(line.split(" ")):
        w = width_of(_ANSI.sub("", word))
        gap = 0 if i == 0 else 1
        if used and word and used + gap + w > width:
            out.append(current)
            current, used = indent + word, len(indent) + w
        else:
            current += " " * gap + word
            used += gap + w
    out.append(current)
    return out
