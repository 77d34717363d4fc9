""":class:`CommandRunner` carries out a parsed ``/command`` on a session; :func:`run_command_line`
shares it with the piped mode."""

from __future__ import annotations

import difflib
import re
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio

from rolecall.cli.palette import Palette, header, terminal_width, tokens
from rolecall.cli.repl.commands import (
    CommandError,
    LoadRequest,
    SlashCommand,
    help_lines,
    parse_command,
    parse_whisper,
)
from rolecall.cli.repl.display import STREAM_MODES, StreamMode
from rolecall.paths import write_atomically

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.options import Options
    from rolecall.memory import MemoryFiles
    from rolecall.storage.data_store import DataStore
    from rolecall.world.models import World


class LoopControl(Enum):
    CONTINUE = "continue"
    QUIT = "quit"


Job = Callable[[], Awaitable[object]]
Spawner = Callable[[str, Job], None]


def _models_in_use(session: Session) -> list[str]:
    return sorted({session.model_name(r) for r in session.world.roles})


def _flag_names(world: World) -> list[str]:
    """Flag names the world's conditions look at (for completion)."""
    return world.flow.flags if world.flow is not None else []


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


_CHAT_ONLY = (
    "this world has no flow {what}: it is a chat, and replies to your messages run by "
    "themselves{due} (type a message; /pause holds the replies)"
)


def _due(session: Session) -> str:
    n = len(session.status.pending)
    return f" ({n} due now)" if n else ""


class CommandRunner:
    """Carries out parsed commands on one session; no terminal needed.

    ``echo`` prints one line (or several joined by newlines) for the user. ``spawn``
    starts a job (a turn, a run) in the background; without it jobs are awaited in
    place, as the piped mode does. ``busy`` says whether background jobs are running.
    """

    def __init__(
        self,
        session: Session,
        *,
        echo: Callable[[str], None],
        store: DataStore | None = None,
        memory: MemoryFiles | None = None,
        spawn: Spawner | None = None,
        busy: Callable[[], bool] = lambda: False,
        palette: Palette | None = None,
        cwd: Path | None = None,
        data_dir: Path | None = None,
        on_model: Callable[[str], None] | None = None,
        stream: Callable[[StreamMode | None], StreamMode] | None = None,
        interactive: bool = True,
    ) -> None:
        """``interactive``: False in piped mode, which does not switch sessions."""
        self.session = session
        self.interactive = interactive
        self.stream = stream
        self.echo = echo
        self.store = store
        self.memory = memory
        self.spawn = spawn
        self.busy = busy
        self.palette = palette or Palette(session.world.role_ids, color=False)
        self.cwd = cwd
        self.data_dir = data_dir
        self.on_model = on_model
        self.pausing = False  # a pause is asked for and the current turn still runs

    @property
    def driven(self) -> bool:
        """The world has a flow (or a mode's director) that decides who speaks."""
        return not self.session.chat

    async def _start(self, name: str, job: Job) -> None:
        if self.spawn is not None:
            self.spawn(name, job)
        else:
            await job()

    def _path(self, name: str) -> Path:
        path = Path(name).expanduser()
        if not path.is_absolute() and self.cwd is not None:
            path = self.cwd / path
        return path.absolute()  # printed in full: the path works pasted anywhere

    async def execute(self, command: SlashCommand) -> LoopControl | LoadRequest:
        handler: Callable[[SlashCommand], Awaitable[LoopControl | LoadRequest | None]] = getattr(
            self, "_cmd_" + command.name
        )
        result = await handler(command)
        # what the command changed (a stop, a pause, a flag...) is stored now, not with
        # the next turn or on the way out (a job it started stores its own turns)
        await self.session.save()
        return LoopControl.CONTINUE if result is None else result

    async def run_line(self, line: str) -> LoopControl | LoadRequest:
        """Parse and run one ``/command`` line; a bad line or a failure is echoed, not raised."""
        from rolecall.errors import RolecallError

        try:
            return await self.execute(parse_command(line))
        except (CommandError, RolecallError) as exc:
            self.echo(str(exc))
            return LoopControl.CONTINUE

    # -- information ------------------------------------------------------------------
    async def _cmd_help(self, cmd: SlashCommand) -> None:
        self.echo("\n".join(help_lines(cmd.args[0] if cmd.args else None)))

    async def _cmd_agents(self, cmd: SlashCommand) -> None:
        s = self.session
        p = self.palette
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
            if self.memory is not None:
                entries = len(self.memory.read(s.session_id, role.id))
                facts.append(_count(entries, "memory entry", "memory entries"))
            about = role.display_name + (f" — {role.description}" if role.description else "")
            at = "@" + role.id
            lines.append(f"  {p.role(role.id, f'{at:<{width}}')}  {_shorten(about, 70)}")
            lines.append("  " + " " * width + "  " + p.dim(" · ".join(facts)))
        self.echo("\n".join(lines))

    async def _cmd_roles(self, cmd: SlashCommand) -> None:
        from rolecall.world.library import RoleLibrary

        user_dir = self.data_dir / "roles" if self.data_dir is not None else None
        library = RoleLibrary(user_dir)
        used = {r.template for r in self.session.world.roles if r.template}
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
            lines.append(f"  {rid:<{width}}  {desc}  {self.palette.dim(kind + mark)}")
        if used:
            lines.append(self.palette.dim("  * used by this world"))
        self.echo("\n".join(lines))

    async def _cmd_flow(self, cmd: SlashCommand) -> None:
        from rolecall.session.state import FlowPointer, Transcript
        from rolecall.world.view import flow_lines

        s = self.session
        flow = s.world.flow
        if flow is None:
            if not s.chat:
                self.echo(
                    f"this world runs in {s.world.mode} mode: its turns are planned by the mode"
                )
            else:
                self.echo("this world has no flow: it is a chat (type a message, @agent for one)")
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
            paint=self.palette.role,
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
        if self.interactive:  # on a terminal: broken between words, not by the terminal
            width = terminal_width() - 1
            lines = [part for line in lines for part in _fold(line, width)]
        self.echo("\n".join(lines))

    async def _cmd_history(self, cmd: SlashCommand) -> None:
        s = self.session
        role = cmd.options.get("role")
        if role is not None and role.lower() not in ("human", "system"):
            role = _resolve_agent(s, role)
        search = cmd.options.get("search")
        p = self.palette
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
        self.echo("\n".join(lines))

    async def _cmd_memory(self, cmd: SlashCommand) -> None:
        agent = _resolve_agent(self.session, cmd.args[0])
        if self.memory is None:
            self.echo("memory files are not available here")
            return
        entries = self.memory.read(self.session.session_id, agent)
        start = self.session.status.memory_start.get(agent, 0)
        path = self.memory.path(self.session.session_id, agent)
        p = self.palette
        lines = [f"memory of {agent}: {_count(len(entries), 'entry', 'entries')} ({path})"]
        window = self.session.world.settings.memory_window
        for i, entry in enumerate(entries):
            who = entry.get("name") or entry.get("role", "?")
            role = entry.get("role", "?")
            text = _shorten(str(entry.get("content", "")), max(terminal_width() - 30, 40))
            lines.append(f"  {p.dim(str(entry.get('message_id', '')))} {role}({who}): {text}")
            if i == len(entries) - window - 1:
                lines.append(p.dim(f"  ── the last {window} entries are in the next prompt ──"))
        if start:
            lines.append(p.dim(f"  (prompts start at message m{start + 1}: memory cleared before)"))
        self.echo("\n".join(lines))

    # -- flow control -----------------------------------------------------------------
    async def _cmd_run(self, cmd: SlashCommand) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.result.stop_reason}); /load another one")
            return
        if not self.driven and (self.busy() or s.status.pending):
            self.echo(_CHAT_ONLY.format(what="to run", due=_due(s)))
            return
        if self.busy():
            self.echo("already running; /pause or /stop it, or type to interject")
            return
        if not self.driven and not s.status.pending:
            self.echo("this world has no flow to run: type a message to talk to the agents")
            return
        await self._start("run", s.run)

    async def _cmd_next(self, cmd: SlashCommand) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.result.stop_reason}); nothing to step")
            return
        if not self.driven and self.busy():
            self.echo(_CHAT_ONLY.format(what="to step", due=_due(s)))
            return
        if self.busy():
            self.echo("a turn is running; /pause first, then /next steps one turn at a time")
            return
        if not self.driven and not s.status.pending:
            self.echo("nothing to step: this world has no flow and no reply is due")
            return

        async def one() -> None:
            if not await s.step():
                self.echo("nothing to run")

        await self._start("next", one)

    async def _cmd_pause(self, cmd: SlashCommand) -> None:
        s = self.session
        if s.finished:
            self.echo("the session has finished; nothing to pause")
        elif self.busy() or s.generating:
            s.pause("manual")
            self.pausing = True
            self.echo("pausing after the current turn (/resume keeps it going)")
        elif (status := s.status).state == "paused":
            self.echo(f"already paused ({status.pause_reason})")
        else:
            s.pause("manual")

    async def _cmd_skip(self, cmd: SlashCommand) -> None:
        dropped = self.session.drop_replies()
        if not dropped:
            self.echo("no replies are due")
            return
        who = ", ".join(dropped)
        self.echo(f"dropped {_count(len(dropped), 'reply', 'replies')} still due ({who})")

    async def _cmd_resume(self, cmd: SlashCommand) -> None:
        s = self.session
        if s.finished:
            self.echo(f"the session has finished ({s.result.stop_reason}); nothing to resume")
            return
        if self.busy():
            if self.pausing and s.cancel_pause():
                self.pausing = False
                self.echo("not pausing: it goes on after the current turn")
            else:
                self.echo("already running")
            return
        if not self.driven and not s.status.pending:
            self.echo("nothing to resume: no reply is due; type a message")
            return
        await self._start("resume", s.run)  # a paused flow goes on where it stopped

    async def _cmd_stop(self, cmd: SlashCommand) -> None:
        s = self.session
        if s.finished:
            self.echo(f"already finished ({s.result.stop_reason})")
            return
        running = self.busy() or s.generating
        s.stop()
        if running:
            self.echo("stopping after the current turn")

    async def _cmd_stream(self, cmd: SlashCommand) -> None:
        if self.stream is None:
            raise CommandError("/stream needs the interactive REPL")
        if not cmd.args:
            mode = self.stream(None)
            self.echo(f"replies stream as: {mode} (/stream preview or /stream full)")
            return
        wanted = cmd.args[0].lower()
        if wanted not in STREAM_MODES:
            raise CommandError(f"/stream takes preview or full, not {cmd.args[0]!r}")
        mode = self.stream(wanted)
        what = (
            "a one-line preview while a reply streams, then the whole reply"
            if mode == "preview"
            else "every line of a reply as it streams"
        )
        self.echo(f"replies stream as: {mode} ({what})")

    async def _cmd_whisper(self, cmd: SlashCommand) -> None:
        """A private message (audiences.md): piped chat awaits its replies here; the
        REPL sends it as a message (app.py), so its prompt stays usable."""
        audience, text = parse_whisper(" ".join(cmd.args))
        if self.session.finished:
            self.echo("the session has finished; the message was not sent")
            return
        await self.session.say(text, audience=audience)

    async def _cmd_flag(self, cmd: SlashCommand) -> None:
        name = cmd.args[0]
        self.session.set_flag(name)
        self.echo(f"flag {name} set")

    async def _cmd_clear(self, cmd: SlashCommand) -> None:
        agent = _resolve_agent(self.session, cmd.args[0])
        archive = None
        if self.memory is not None:
            archive = await anyio.to_thread.run_sync(
                self.memory.clear, self.session.session_id, agent
            )
        self.session.forget(agent)
        where = f"; the old file is archived as {archive.name}" if archive is not None else ""
        self.echo(f"memory of {agent} cleared{where}")

    async def _cmd_model(self, cmd: SlashCommand) -> None:
        s = self.session
        if not cmd.args:
            lines = [f"model override: {s.model_override or 'none'}"]
            for role in s.world.roles:
                base = s.world.model_for(role)
                used = s.model_name(role)
                note = f" (world: {base})" if used != base else ""
                lines.append(f"  {role.id}: {used}{note}")
            self.echo("\n".join(lines))
            return
        name = cmd.args[0]
        if name.lower() in ("default", "none", "-"):
            s.model_override = None
            self.echo("model override removed: every role uses the world's model again")
            return
        s.model_override = name
        self.echo(f"every non-scripted role now uses {name} (from the next turn)")
        if self.on_model is not None:
            self.on_model(name)

    # -- files --------------------------------------------------------------------------
    async def _cmd_save(self, cmd: SlashCommand) -> None:
        s = self.session
        if self.store is None or self.memory is None:
            self.echo("/save needs the session store")
            return
        path = self._path(cmd.args[0] if cmd.args else f"{s.session_id}.json")
        doc = await s.save_to(path, self.memory)
        self.echo(f"saved {_count(len(doc.messages), 'message')} to {path}")

    async def _cmd_load(self, cmd: SlashCommand) -> LoadRequest | None:
        from rolecall.api.entry import stored_or_file
        from rolecall.storage.document import read_session_file

        if self.busy() or self.session.generating:  # as /fork: never cut a turn short
            raise CommandError("a turn is running: /pause (or wait for it), then /load")
        name = cmd.args[0]
        path = self._path(name)
        from_file = path.suffix == ".json" or await anyio.Path(path).is_file()
        if from_file:
            doc = await anyio.to_thread.run_sync(read_session_file, path)
            source = str(path)
        elif self.store is not None:
            await self.session.save()  # the store holds all this session did
            doc = await self.store.load(await self.store.resolve_id(name))
            source = f"the store ({name})"
        else:
            raise CommandError(f"no session file {path}")
        if doc.session_id == self.session.session_id:
            self.echo(f"{source} holds this very session ({doc.session_id}): nothing to switch")
            return None
        if from_file:
            # as `rolecall resume FILE`: a session stored here goes on from the stored copy
            doc, notice = await stored_or_file(self.store, doc, path)
            if notice is not None:
                self.echo(notice)
        return LoadRequest(doc, source)

    async def _cmd_fork(self, cmd: SlashCommand) -> LoadRequest | None:
        from rolecall.cli.repl import branching

        return await branching.fork_here(self, cmd)

    async def _cmd_retry(self, cmd: SlashCommand) -> LoadRequest | None:
        from rolecall.cli.repl import branching

        return await branching.retry(self, cmd)

    async def _cmd_branch(self, cmd: SlashCommand) -> LoadRequest | None:
        from rolecall.cli.repl import branching

        return await branching.branch(self, cmd)

    async def _cmd_export(self, cmd: SlashCommand) -> None:
        s = self.session
        fmt = cmd.args[0]
        if self.store is None or self.memory is None:
            self.echo("/export needs the session store")
            return
        path = self._path(cmd.args[1] if len(cmd.args) > 1 else f"{s.session_id}.{fmt}")
        role = cmd.options.get("role")
        search = cmd.options.get("search")
        if fmt == "json":
            if role or search:
                raise CommandError(
                    "/export json writes the whole session; --role/--search are for md and html"
                )
            doc = await s.save_to(path, self.memory)
            self.echo(f"exported {_count(len(doc.messages), 'message')} to {path}")
            return
        from rolecall.export import to_html, to_markdown

        render = to_markdown if fmt == "md" else to_html
        await s.flush()
        doc = await self.store.load(s.session_id)
        if role is not None and role.lower() not in ("human", "system"):
            role = _resolve_agent(s, role)
        text = render(doc, role=role, search=search)
        # as `sessions export --out`: atomically, its parent folders created
        await anyio.to_thread.run_sync(write_atomically, Path(path), text)
        self.echo(f"exported {fmt} to {path}")

    async def _cmd_quit(self, cmd: SlashCommand) -> LoopControl:
        return LoopControl.QUIT


async def run_command_line(
    session: Session,
    line: str,
    *,
    store: DataStore | None = None,
    memory: MemoryFiles | None = None,
    out: TextIO | None = None,
    opts: Options | None = None,
) -> bool:
    """One ``/command`` line in the piped mode; False means quit (like ``piped.command``).

    Jobs (``/run``, ``/next``, ``/resume``) are awaited in place; messages for the user
    go to ``out`` (stderr by default) so the transcript on stdout stays clean. ``opts``
    are the command's: a printed ``rolecall resume`` carries its ``--data-dir``.
    """
    stream = out or sys.stderr

    def echo(text: str) -> None:
        print(text, file=stream, flush=True)

    if line.split()[0].lower() in ("/retry", "/branch"):  # they switch sessions
        echo(f"{line.split()[0].lower()} works in the interactive REPL only")
        return True
    runner = CommandRunner(
        session, echo=echo, store=store, memory=memory, cwd=Path.cwd(), interactive=False
    )
    result = await runner.run_line(line)
    if isinstance(result, LoadRequest):
        if line.split()[0].lower() == "/load":
            echo("/load works in the interactive REPL only")
        else:  # /fork, /retry, /branch: the session is there, to resume
            from rolecall.cli.hints import resume_command

            resume = resume_command(result.doc.session_id, opts)
            echo(f"`{resume}` continues it (switching works in the interactive REPL only)")
        return True
    return result is not LoopControl.QUIT


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
