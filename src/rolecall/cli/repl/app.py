""":class:`Repl`: the prompt-toolkit front end (prompt session, toolbar, key bindings)."""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.hints import resume_command
from rolecall.cli.palette import Palette, header, terminal_width
from rolecall.cli.repl.commands import (
    CommandError,
    LoadRequest,
    SlashCommand,
    parse_command,
    parse_whisper,
)
from rolecall.cli.repl.completion import ReplCompleter
from rolecall.cli.repl.display import ReplDisplay, StreamMode
from rolecall.cli.repl.live import _logs_above_prompt, _quiet_args, mark_quit, open_live_session
from rolecall.cli.repl.runner import (
    CommandRunner,
    Job,
    LoopControl,
    _count,
    _models_in_use,
    _shorten,
)
from rolecall.cli.repl.toolbar import QUIT_WINDOW, ToolbarParts, fit_toolbar
from rolecall.cli.wrap import width_of, wrap_line, wrap_styled
from rolecall.export.common import snippet
from rolecall.log import get_logger
from rolecall.money import money

if TYPE_CHECKING:
    from anyio.abc import TaskGroup
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.output import Output
    from prompt_toolkit.shortcuts import PromptSession

    from rolecall.api.session import Session
    from rolecall.memory import MemoryFiles
    from rolecall.storage.data_store import DataStore
    from rolecall.tools.approval import Decision, PendingCall
    from rolecall.world.models import World


log = get_logger("rolecall.cli.repl")
After = Callable[["Session"], Awaitable[object]]  # run once the REPL switched (LoadRequest)


_STYLE = {
    "prompt": "bold",
    "continuation": "#888888",
    "placeholder": "#888888 italic",
    "bottom-toolbar": "noreverse bg:#303030 #d0d0d0",
    "bottom-toolbar.key": "bold",
    "bottom-toolbar.state": "bold",
    "bottom-toolbar.hint": "#a0a0a0",
}
_STYLE_PLAIN = {"bottom-toolbar": "reverse", "placeholder": "italic"}


class _FirstPrompt:
    """The first prompt, started before the session exists (see :meth:`Repl.booting`)."""

    def __init__(self) -> None:
        self.started = anyio.Event()
        self.done = anyio.Event()
        self.text = ""
        self.error: BaseException | None = None

    async def run(self, prompt: PromptSession[str]) -> None:
        try:
            self.text = await prompt.prompt_async(handle_sigint=False, pre_run=self.started.set)
        except (EOFError, KeyboardInterrupt) as exc:
            self.error = exc
        finally:
            self.started.set()
            self.done.set()

    async def result(self) -> str:
        await self.done.wait()
        if self.error is not None:
            raise self.error
        return self.text


class Repl:
    """The prompt-toolkit front end of one or more sessions (``/load`` switches)."""

    def __init__(
        self,
        args: argparse.Namespace,
        store: DataStore | None,
        *,
        memory: MemoryFiles | None = None,
        input: Input | None = None,
        output: Output | None = None,
        color: bool | None = None,
        history_file: Path | None = None,
        handle_signals: bool = True,
        patch_output: bool = True,
        sink: Callable[[str], None] | None = None,
        cwd: Path | None = None,
        width: Callable[[], int] | None = None,
    ) -> None:
        from rolecall.paths import data_dir

        self.args = args
        self.store = store  # None while booting: set before run()
        self.data_dir = data_dir(getattr(args, "data_dir", None))
        self._memory = memory
        self.color = (not os.environ.get("NO_COLOR")) if color is None else color
        self.handle_signals = handle_signals
        self.patch_output = patch_output
        self.step_mode = getattr(args, "mode", "auto") == "step"
        self.verbose = int(getattr(args, "verbose", 0) or 0)
        self.quiet = bool(getattr(args, "quiet", False))
        self.stream_mode: StreamMode = getattr(args, "stream", None) or "preview"
        self.cwd = cwd
        self._width = width or terminal_width
        self._sink = sink
        self._input = input
        self._output = output
        self._history_file = history_file or self.data_dir / "repl_history"
        self.jobs = 0
        self._armed = False
        # a tool call waiting for y / n / e (tools.md): the call, its event, the answer
        self._asking: tuple[PendingCall, anyio.Event, list[Decision]] | None = None
        self._armed_at = 0.0
        self._eof_at = -QUIT_WINDOW
        self._quit = False
        self._preloading = False
        self._wake = anyio.Event()
        self._idle = anyio.Event()
        self._tg: TaskGroup | None = None
        self._open: dict[str, Session] = {}
        self._world: World | None = None
        self._first: _FirstPrompt | None = None
        self._boot_banner = False
        self._stored_cache: tuple[float, list[tuple[str, str]]] | None = None
        self.session: Session | None = None
        self.display: ReplDisplay | None = None
        self.runner: CommandRunner | None = None
        self.prompt: PromptSession[str] | None = None

    @property
    def memory(self) -> MemoryFiles:
        if self._memory is None:
            from rolecall.memory import MemoryFiles

            self._memory = MemoryFiles.in_data_dir(self.data_dir)
        return self._memory

    # -- public -------------------------------------------------------------------------
    @asynccontextmanager
    async def booting(self, world: World) -> AsyncIterator[None]:
        """Draw the banner and the prompt at once; open the session inside, then run().

        The first prompt is up (and takes keys) while the runtime, the store and the
        session are loaded; :meth:`run` then carries on with that very prompt.
        """
        self._world = world
        self.prompt = self._make_prompt()
        palette = Palette(world.role_ids, color=self.color)
        width = max(self._width() - 1, 20)  # broken between words, as the display's lines
        banner = [
            piece
            for line in self._world_banner(world, palette)
            for piece in wrap_styled(line, width)
        ]
        self._print("".join(line + "\n" for line in banner))
        self._boot_banner = True
        first = _FirstPrompt()
        async with anyio.create_task_group() as tg:
            tg.start_soon(first.run, self.prompt)
            await first.started.wait()  # the prompt is drawn
            self._first = first
            try:
                yield
            finally:
                tg.cancel_scope.cancel()  # still waiting for input when booting failed

    async def run(self, session: Session) -> Session:
        """Serve ``session`` (and those ``/load`` switches to) until quit; the last one."""
        self._open[session.session_id] = session
        if self.prompt is None:
            self.prompt = self._make_prompt()
        current = session
        after: After | None = None
        async with AsyncExitStack() as stack:
            while True:
                result = await self._serve(current, after)
                if not isinstance(result, LoadRequest):
                    return current
                try:
                    current, after = await self._switch(stack, result), result.after
                except Exception as exc:
                    self._print(Palette((), color=self.color).red(f"✗ cannot load: {exc}"))
                    self._quit = False
                    after = None
        return current  # pragma: no cover - the loop returns

    # -- sessions -----------------------------------------------------------------------
    async def _switch(self, stack: AsyncExitStack, request: LoadRequest) -> Session:
        doc = request.doc
        known = self._open.get(doc.session_id)
        if known is not None:
            return known
        assert self.store is not None
        session = await stack.enter_async_context(
            open_live_session(_quiet_args(self.args), doc.world_model(), self.store, doc=doc)
        )
        self._open[session.session_id] = session
        return session

    def _world_banner(self, world: World, p: Palette) -> list[str]:
        title = world.title or world.description or world.name
        lines = [
            p.bold(f"rolecall · {world.name}") + (f" — {title}" if title != world.name else "")
        ]
        if world.topic:
            lines.append(p.dim("topic: ") + world.topic)
        lines.append(p.dim("agents: ") + "  ".join(p.role(r.id, "@" + r.id) for r in world.roles))
        if world.flow is not None or world.mode is not None:
            steps = len(world.flow.steps) if world.flow else 0
            noun = "step" if steps == 1 else "steps"
            what = f"a flow of {steps} {noun}" if world.flow else f"{world.mode} mode"
            enter = " (or Enter)" if self.step_mode else ""
            lines.append(
                p.dim(f"{what}: /run runs it, /next{enter} one turn, /flow shows where it is")
            )
        lines.append(
            p.dim("type a message · @agent for one agent · /help · Ctrl-C cancels · Ctrl-D quits")
        )
        lines.append("")
        return lines

    def _banner(self, session: Session, *, loaded: bool, hint: bool = True) -> None:
        d = self.display
        assert d is not None
        p = d.palette
        world = session.world
        if self._boot_banner:
            self._boot_banner = False  # printed while booting
            return
        lines = self._world_banner(world, p)
        for line in lines[:3]:
            d.emit(line)
        said = session.result.messages
        if loaded or said:
            st = session.status
            state = st.state + (f" ({st.pause_reason})" if st.pause_reason else "")
            if st.stop_reason:
                state += f" ({st.stop_reason})"
            d.emit(p.dim(f"session {session.session_id}: ") + f"{_count(said, 'message')}, {state}")
            last = session.transcript[-1] if said else None
            if last is not None:
                d.emit(header(p, last.sender, last.target, last.step_id, last.loop_iteration))
                for line in wrap_line(_shorten(last.content, 400), self._width() - 3):
                    d.emit(p.bar(last.sender) + line)
            paused = not session.chat and st.state == "paused" and not session.finished
            if hint and (st.pending or paused):
                d.note("/resume continues where it stopped")
        for line in lines[3:]:
            d.emit(line)

    def _stream(self, mode: StreamMode | None) -> StreamMode:
        """``/stream``: how replies show while they stream (from the next one on)."""
        if mode is not None:
            self.stream_mode = mode
            if self.display is not None:
                self.display.stream = mode
        return self.stream_mode

    async def _serve(
        self, session: Session, after: After | None = None
    ) -> LoopControl | LoadRequest:
        loaded = self.session is not None
        self.session = session
        session.approver = self._approve  # tools.md: `approve: ask` calls are asked here
        palette = Palette(session.world.role_ids, color=self.color)

        def totals() -> tuple[int, int]:
            result = session.result
            return result.input_tokens, result.output_tokens

        self.display = ReplDisplay(
            palette,
            width=self._width,
            quiet=self.quiet,
            verbose=self.verbose,
            on_change=self._changed,
            totals=totals,
            stream=self.stream_mode,
        )
        for m in session.transcript:  # what a reply may answer (its ↩ quote)
            self.display.said[m.id] = snippet(m.content)
        self.runner = CommandRunner(
            session,
            echo=self.display.info,
            store=self.store,
            memory=self.memory,
            spawn=self._spawn,
            busy=lambda: self.jobs > 0,
            palette=palette,
            cwd=self.cwd,
            data_dir=self.data_dir,
            on_model=lambda name: self._preload([name]),
            stream=self._stream,
        )
        subscription = session.bus.subscribe(self.display, name="repl")
        self._armed = False
        self._quit = False
        await session.begin()
        self._banner(session, loaded=loaded, hint=after is None)
        self._changed()  # redraw: the toolbar shows the session now
        try:
            async with anyio.create_task_group() as tg:
                self._tg = tg
                tg.start_soon(self._pump)
                tg.start_soon(self._ticker)
                if self.handle_signals:
                    tg.start_soon(self._watch_signals)
                self._preload(_models_in_use(session))
                if after is not None:  # /retry: the turn asked again, in the new branch
                    self._spawn("retry", functools.partial(after, session))
                with self._terminal():
                    try:
                        result = await self._loop()
                    except BaseException:
                        # the terminal went away or the REPL broke: still keep the session
                        with anyio.move_on_after(5, shield=True):
                            await self._leave(session, switching=False)
                        raise
                    await self._leave(session, switching=isinstance(result, LoadRequest))
                    await self._flush()
                tg.cancel_scope.cancel()
        finally:
            subscription.close()
            self._tg = None
        self._print(self.display.take_output())
        return result

    @contextmanager
    def _terminal(self) -> Iterator[None]:
        if not self.patch_output:
            yield
            return
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True), _logs_above_prompt(self.verbose):
            yield

    async def _loop(self) -> LoopControl | LoadRequest:
        assert self.prompt is not None
        assert self.runner is not None
        while not self._quit:
            await self._flush()  # what the last line printed comes before the next prompt
            first, self._first = self._first, None
            try:
                if first is not None:
                    text = await first.result()
                else:
                    text = await self.prompt.prompt_async(handle_sigint=False)
            except EOFError:
                return LoopControl.QUIT
            except KeyboardInterrupt:  # pragma: no cover - Ctrl-C is bound; belt and braces
                continue
            self._armed = False
            if self._asking is not None:  # the answer to a tool call that waits
                self._answer(text)
                continue
            result = await self._handle(text)
            if result is not LoopControl.CONTINUE:
                return result
        return LoopControl.QUIT

    async def _handle(self, text: str) -> LoopControl | LoadRequest:
        session = self.session
        runner = self.runner
        display = self.display
        assert session is not None
        assert runner is not None
        assert display is not None
        message = text.strip()
        if not message:
            due = runner.driven or session.status.pending
            if self.step_mode and not session.finished and due:
                return await runner.execute(SlashCommand("next"))
            return LoopControl.CONTINUE
        audience: list[str] | None = None
        if message.startswith("//"):
            message = message[1:]  # a message that starts with "/"
        elif message.split()[0].lower() == "/whisper":  # sent as a message (audiences.md)
            try:
                audience, message = parse_whisper(message.partition(" ")[2])
            except CommandError as exc:
                display.error(str(exc))
                return LoopControl.CONTINUE
            unknown = [a for a in audience if a not in session.world.role_ids]
            if unknown:
                display.error(
                    f"/whisper: no agent {', '.join('@' + a for a in unknown)} "
                    f"(agents: {', '.join(session.world.role_ids)}); the message was not sent"
                )
                return LoopControl.CONTINUE
            display.note(f"  (whispered: to {', '.join(audience)} only)")
        elif message.startswith("/"):
            from rolecall.errors import RolecallError

            try:
                return await runner.execute(parse_command(message))
            except (CommandError, RolecallError) as exc:
                display.error(str(exc))
            except Exception as exc:
                log.warning("repl_command_failed", command=message.split()[0], exc_info=exc)
                display.error(f"{message.split()[0]} failed: {exc}")
            return LoopControl.CONTINUE
        if session.finished:
            display.warn(
                f"the session has finished ({session.result.stop_reason}); "
                "the message was not sent (/load another session, or start a new chat)"
            )
            return LoopControl.CONTINUE
        st = session.status
        if st.state == "paused" and st.pause_reason == "manual" and st.pending:
            # paused with /pause: the new message supersedes the old question
            dropped = session.drop_replies()
            display.note(
                f"dropped {len(dropped)} repl{'y' if len(dropped) == 1 else 'ies'} still due "
                f"to your earlier message ({', '.join(dropped)}): your new message is answered"
            )
        self._spawn("message", lambda: session.say(message, audience=audience))
        # let the message go out (stored, its turn started, the request sent) before the
        # next prompt is drawn: drawing it first delayed the request by 7-60 ms under load
        await anyio.lowlevel.checkpoint()
        return LoopControl.CONTINUE

    async def _leave(self, session: Session, *, switching: bool) -> None:
        """Stop what runs, then keep the session paused (reason ``quit``)."""
        if session.generating:
            session.interrupt()  # kept as a draft; the turn pauses the session
        elif self.jobs and not session.finished:
            session.pause("quit")  # after the turn in progress
        if self.jobs:
            with anyio.move_on_after(15):
                await self._idle.wait()
        display = self.display
        assert display is not None
        if not session.result.messages and not session.drafts and self.store is not None:
            # nothing was said: the session is not kept (it would only clutter the list)
            await session.flush()
            await self.store.delete(session.session_id)
            if not switching:
                display.note("nothing was said: the session is not kept")
            return
        mark_quit(session, "step" if self.step_mode else "auto")
        if switching:
            from rolecall.errors import RolecallError

            try:  # stored as left now, not when the REPL quits
                await session.save()
            except RolecallError as exc:  # its store failed before: said again on the way out
                display.error(str(exc))
            display.note(f"left session {session.session_id} (kept, {session.result.state})")
        elif not session.finished:
            display.gap()
            kept = f"session {session.session_id} kept (paused) · continue it with:"
            command = resume_command(session.session_id, self.args)
            if width_of(f"{kept} {command}") < self._width():
                display.note(f"{kept} {command}")
            else:  # the command on a line of its own, whole: pasted as printed
                display.note(kept)
                display.note(command, wrap=False)

    # -- background ----------------------------------------------------------------------
    def _spawn(self, name: str, job: Job) -> None:
        assert self._tg is not None
        if self.jobs == 0:
            self._idle = anyio.Event()
        self.jobs += 1
        self._changed()

        async def run() -> None:
            try:
                await job()
            except Exception as exc:
                log.warning("repl_job_failed", job=name, exc_info=exc)
                if self.display is not None:
                    self.display.error(f"{name} failed: {exc}")
            finally:
                self.jobs -= 1
                if self.jobs == 0:
                    self._idle.set()
                    if self.runner is not None:
                        self.runner.pausing = False
                self._changed()

        self._tg.start_soon(run, name=f"repl-{name}")

    def _preload(self, models: list[str]) -> None:
        from rolecall.llm.registry import needs_litellm

        if self._preloading or self._tg is None or self.session is None:
            return
        client = self.session.world.settings.client
        if not any(needs_litellm(m, client) for m in models):
            return
        from rolecall.llm import litellm_model

        if litellm_model.is_loaded():
            return
        self._preloading = True

        async def load() -> None:
            try:
                await anyio.to_thread.run_sync(litellm_model.preload, abandon_on_cancel=True)
            except Exception as exc:
                self._preloading = False
                if self.display is not None:
                    self.display.warn(f"could not load litellm: {exc}")

        self._tg.start_soon(load, name="repl-preload-litellm")

    def _changed(self) -> None:
        self._wake.set()
        if self.prompt is not None:
            self.prompt.app.invalidate()

    def _print(self, text: str) -> None:
        if not text:
            return
        if self._sink is not None:
            self._sink(text)
            return
        try:
            if self.prompt is None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                self.prompt.app.output.write_raw(text)
                self.prompt.app.output.flush()
        except OSError:  # the terminal is gone (SIGHUP): nothing left to show
            pass

    async def _flush(self) -> None:
        from prompt_toolkit.application import in_terminal

        display = self.display
        if display is None or not display.outbox:
            return
        async with in_terminal():
            self._print(display.take_output())

    async def _pump(self) -> None:
        """Print the display's finished lines above the prompt, in batches."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._flush()
            await anyio.sleep(0.03)

    async def _ticker(self) -> None:
        """Redraw the spinner and elapsed time while a generation runs."""
        while True:
            await anyio.sleep(0.1)
            if self.prompt is not None and self.display is not None and self.display.active:
                self.prompt.app.invalidate()

    async def _watch_signals(self) -> None:
        """SIGINT (outside the prompt's raw mode) as Ctrl-C; SIGTERM and SIGHUP quit cleanly."""
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
            async for signum in signals:
                if signum == signal.SIGINT:
                    self.interrupt(None)
                else:
                    self.request_quit()

    # -- keys ------------------------------------------------------------------------------
    def interrupt(self, buffer: Buffer | None) -> str:
        """Ctrl-C: cancel the generation; else pause a run; else clear; twice quits."""
        session = self.session
        display = self.display
        if session is None or display is None:  # still booting
            if buffer is not None and buffer.text:
                buffer.reset()
                return "cleared"
            self.request_quit()
            return "quit"
        if self._asking is not None:  # a tool call waits: Ctrl-C refuses it, as `n`
            from rolecall.tools.approval import Decision

            call, answered, got = self._asking
            if not answered.is_set():
                got.append(Decision("deny", "human", f"the person refused {call.tool} (Ctrl-C)"))
                answered.set()
                display.note(f"refused {call.tool} (Ctrl-C)")
            if buffer is not None:
                buffer.reset()
            self._armed = False
            return "refused"
        if session.generating:
            session.interrupt()  # the session pauses itself (reason cancelled)
            self._armed = False
            return "cancelled"
        if self.jobs:
            session.pause("interrupted")
            if self.runner is not None:
                self.runner.pausing = True
            display.note("pausing after the current turn")
            self._armed = False
            return "pausing"
        if buffer is not None and buffer.text:
            buffer.reset()
            self._armed = False
            return "cleared"
        now = time.monotonic()
        if self._armed and now - self._armed_at <= QUIT_WINDOW:
            self.request_quit()
            return "quit"
        self._armed, self._armed_at = True, now
        display.note(
            f"(press Ctrl-C again to quit, within {QUIT_WINDOW:g} s; the session is kept · "
            "Ctrl-D quits too)"
        )
        return "armed"

    def end_of_input(self, buffer: Buffer | None) -> str:
        """Ctrl-D at an empty prompt: quit; while a reply is generated, ask first."""
        display = self.display
        session = self.session
        busy = session is not None and session.generating  # a reply streams
        now = time.monotonic()
        if busy and display is not None and now - self._eof_at > QUIT_WINDOW:
            self._eof_at = now
            display.note(
                f"a reply is being generated: Ctrl-D again within {QUIT_WINDOW:g} s quits "
                "(the reply is kept as a draft, the session paused) · Ctrl-C cancels the reply"
            )
            return "asked"
        self.request_quit()
        return "quit"

    def request_quit(self) -> None:
        self._quit = True
        app = self.prompt.app if self.prompt is not None else None
        if app is not None and app.is_running and not app.is_done:
            app.exit(exception=EOFError())

    def _key_bindings(self) -> KeyBindings:
        from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent

        kb = KeyBindings()

        @kb.add("c-c")
        def _ctrl_c(event: KeyPressEvent) -> None:
            self.interrupt(event.current_buffer)

        @kb.add("enter")
        def _enter(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            state = buf.complete_state
            if state is not None and state.current_completion is not None:
                buf.apply_completion(state.current_completion)
                return
            if buf.document.is_cursor_at_the_end and buf.text.endswith("\\"):
                buf.delete_before_cursor(1)
                buf.insert_text("\n")
                return
            buf.validate_and_handle()

        @kb.add("escape", "enter")
        def _newline(event: KeyPressEvent) -> None:
            event.current_buffer.insert_text("\n")

        @kb.add("escape")
        def _escape(event: KeyPressEvent) -> None:  # closes the completion menu
            event.current_buffer.cancel_completion()

        @kb.add("escape", "/")
        def _escape_slash(event: KeyPressEvent) -> None:
            # Esc, then a /command typed within the key timeout: not Alt-/ (which would
            # eat the slash and send the command's name as a message)
            event.current_buffer.cancel_completion()
            event.current_buffer.insert_text("/")

        @kb.add("c-d")
        def _ctrl_d(event: KeyPressEvent) -> None:
            buf = event.current_buffer
            if buf.text:
                buf.delete()  # as usual: delete the character under the cursor
            else:
                self.end_of_input(buf)

        return kb

    # -- the prompt --------------------------------------------------------------------------
    def _make_prompt(self) -> PromptSession[str]:
        from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
        from prompt_toolkit.history import FileHistory, History, InMemoryHistory
        from prompt_toolkit.shortcuts import PromptSession
        from prompt_toolkit.styles import Style

        history: History
        try:
            self._history_file.parent.mkdir(parents=True, exist_ok=True)
            history = FileHistory(str(self._history_file))
        except OSError:
            history = InMemoryHistory()

        def continuation(width: int, line_number: int, wrap_count: int) -> StyleAndTextTuples:
            return [("class:continuation", "… ".rjust(width))]

        def world() -> World:
            if self.session is not None:
                return self.session.world
            assert self._world is not None
            return self._world

        style = Style.from_dict(_STYLE if self.color else _STYLE_PLAIN)
        return PromptSession(
            message=self._message,
            multiline=True,
            completer=ReplCompleter(world, lambda: self.session, self._stored).for_prompt(),
            complete_while_typing=True,
            auto_suggest=AutoSuggestFromHistory(),
            history=history,
            bottom_toolbar=self._toolbar,
            placeholder=self._placeholder,
            prompt_continuation=continuation,
            key_bindings=self._key_bindings(),
            style=style,
            include_default_pygments_style=False,
            reserve_space_for_menu=6,
            input=self._input,
            output=self._output,
        )

    def _stored(self) -> list[tuple[str, str]]:
        """The stored sessions (newest first) for ``/load`` completion, read at most 1/s."""
        now = time.monotonic()
        if self._stored_cache is None or now - self._stored_cache[0] > 1.0:
            from rolecall.paths import db_path
            from rolecall.storage.catalog import recent_ids

            self._stored_cache = (now, recent_ids(db_path(self.data_dir)))
        return self._stored_cache[1]

    def _message(self) -> StyleAndTextTuples:
        from prompt_toolkit.application import get_app_or_none
        from prompt_toolkit.formatted_text import ANSI, to_formatted_text

        app = get_app_or_none()
        prompt: StyleAndTextTuples = [("class:prompt", "› ")]
        if self.display is None or (app is not None and app.is_done):
            return prompt
        lines = self.display.live_lines()
        if not lines:
            return prompt
        return to_formatted_text(ANSI("\n".join(lines) + "\n")) + prompt

    def _placeholder(self) -> StyleAndTextTuples:
        from prompt_toolkit.application import get_app_or_none

        session = self.session
        app = get_app_or_none()
        if app is not None and app.is_done:
            return []  # not left behind in the scrollback
        world = session.world if session is not None else self._world
        if session is not None and self._asking is not None:
            tool = self._asking[0].tool
            return [
                (
                    "class:placeholder",
                    f"{tool} waits: y runs it · n refuses it · e {{...}} runs it with these "
                    "arguments · Ctrl-C refuses",
                )
            ]
        if session is not None and session.finished:
            return [("class:placeholder", "the session has finished · /load another · /quit")]
        if self.step_mode and world is not None and (world.flow or world.mode):
            return [("class:placeholder", "Enter runs the next turn · a message · /help")]
        return [("class:placeholder", "message the agents · @ for one · / for commands")]

    def _toolbar(self) -> StyleAndTextTuples:
        session = self.session
        display = self.display
        if session is None or display is None:
            name = self._world.name if self._world is not None else "rolecall"
            return [("class:bottom-toolbar.key", f" {name}"), ("", " │ starting…")]
        fitted: StyleAndTextTuples = [
            *fit_toolbar(self._toolbar_parts(session, display), self._width())
        ]
        return fitted

    async def _approve(self, call: PendingCall) -> Decision:
        """A call the role must ask for (tools.md, Approval): shown, then held until the
        next line: ``y`` runs it, ``n`` refuses it, ``e {...}`` runs it with these
        arguments (JSON)."""
        from rolecall.tools.approval import Decision

        display = self.display
        answered: anyio.Event = anyio.Event()
        self._asking = (call, answered, [])
        if display is not None:
            display.waiting = call.tool  # the live line says it waits for you, not "thinking"
            display.warn(
                f"{call.sender} wants to call {call.tool} with "
                f"{json.dumps(call.arguments, ensure_ascii=False)} — "
                "y: run it · n: refuse it · e {...}: run it with these arguments (JSON)"
            )
        self._changed()
        try:
            await answered.wait()
        finally:
            got = self._asking[2] if self._asking is not None else []
            self._asking = None
            if display is not None:
                display.waiting = None
            self._changed()
        if got:
            decision: Decision = got[0]
            return decision
        return Decision("deny", "human", "no answer")

    def _answer(self, text: str) -> None:
        """The line typed while a tool call waits: y, n, or e and the arguments."""
        from rolecall.tools.approval import Decision

        assert self._asking is not None
        call, answered, got = self._asking
        word = text.strip()
        decision: Decision | None = None
        if word.lower() in ("y", "yes"):
            decision = Decision("allow", "human")
        elif word.lower() in ("n", "no"):
            decision = Decision("deny", "human", f"the person refused {call.tool}")
        elif word[:1].lower() == "e":
            try:
                arguments = json.loads(word[1:].strip() or "null")
            except ValueError as exc:
                arguments, problem = None, f"not JSON ({exc})"
            else:
                problem = "" if isinstance(arguments, dict) else "not a JSON object"
            if isinstance(arguments, dict):
                decision = Decision("allow", "human", arguments=arguments)
            elif self.display is not None:
                self.display.error(f"e: the arguments are {problem}; the call still waits")
        elif self.display is not None:
            self.display.error("the tool call waits: y, n, or e {...} with its arguments")
        if decision is not None:
            got.append(decision)
            answered.set()

    def _toolbar_parts(self, session: Session, display: ReplDisplay) -> ToolbarParts:
        st = session.status  # a copy, and the result: a few microseconds each redraw
        if self._asking is not None:
            call = self._asking[0]
            return ToolbarParts(
                world=session.world.name,
                session=session.session_id,
                status=f"a call waits: {call.tool} (y / n / e)",
            )
        if self.runner is not None and self.runner.pausing and (self.jobs or session.busy):
            status = "pausing…"
        elif display.active and session.generating:
            status = "generating"
        elif self.jobs:
            status = "running"
        elif st.state in ("created", "running"):
            status = "ready"  # nothing runs: waiting for you
        else:
            status = st.state
        if st.state == "paused" and st.pause_reason and not self.jobs:
            status += f" ({st.pause_reason})"
        if session.finished:
            status = f"finished ({st.stop_reason})"
        parts = ToolbarParts(world=session.world.name, session=session.session_id, status=status)
        flow = session.world.flow
        if flow is not None:
            pointer = st.pointer
            step = pointer.current or ("—" if pointer.started else flow.start_id)
            parts.step = f"step {'—' if session.finished else step}"
            parts.counters = " ".join(
                f"{sid}×{n}"
                for sid, n in pointer.exec_counts.items()
                if n and sid != "interjection"  # an interjection is not a step
            )
        elif not session.chat:
            parts.step = f"{session.world.mode} · turn {st.pointer.execution_order}"
        if session.model_override:
            parts.model = f"model {session.model_override}"
        if st.pending and flow is None:
            queue = [item.agent for item in st.pending]
            shown = ", ".join(queue[:3]) + (", …" if len(queue) > 3 else "")
            parts.status += f" · {len(queue)} due · next: {shown}"
        t = session.result
        live = display.live_out_tokens()
        if t.input_tokens or t.output_tokens or live:
            # no ↑0 while the first reply streams: its prompt tokens come at its end
            up = f"↑{t.input_tokens:,} " if t.input_tokens else ""
            parts.tokens = f"{up}↓{t.output_tokens + live:,}"
        if t.cost:  # known and not free
            parts.tokens += f" · {money(t.cost)}"
        if self._armed and time.monotonic() - self._armed_at <= QUIT_WINDOW:
            parts.hint = "Ctrl-C again to quit"
        elif self.step_mode and flow is not None and not session.finished:
            parts.hint = "Enter: next turn · /help"
        else:
            parts.hint = "/help"
        return parts
