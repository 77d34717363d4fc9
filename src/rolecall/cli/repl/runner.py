""":class:`CommandRunner` carries out a parsed ``/command`` on a session; :func:`run_command_line`
shares it with the piped mode. The commands that only show something are :mod:`.views`'s,
those that fork and switch branches :mod:`.branching`'s."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

import anyio

from rolecall.cli.palette import Palette
from rolecall.cli.repl import views
from rolecall.cli.repl.commands import (
    CommandError,
    LoadRequest,
    SlashCommand,
    parse_command,
    parse_whisper,
)
from rolecall.cli.repl.display import STREAM_MODES, StreamMode
from rolecall.cli.repl.views import _count, _resolve_agent
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

    # -- information (views.py) ----------------------------------------------------------
    async def _cmd_help(self, cmd: SlashCommand) -> None:
        await views.show_help(self, cmd)

    async def _cmd_agents(self, cmd: SlashCommand) -> None:
        await views.show_agents(self, cmd)

    async def _cmd_roles(self, cmd: SlashCommand) -> None:
        await views.show_roles(self, cmd)

    async def _cmd_flow(self, cmd: SlashCommand) -> None:
        await views.show_flow(self, cmd)

    async def _cmd_history(self, cmd: SlashCommand) -> None:
        await views.show_history(self, cmd)

    async def _cmd_memory(self, cmd: SlashCommand) -> None:
        await views.show_memory(self, cmd)

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
