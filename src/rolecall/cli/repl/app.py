""":class:`Repl`: the REPL's front end, serving one session after another (``/load``).

It composes the parts, each a module of this package with one purpose: the prompt
(:mod:`.prompt`) and its bottom toolbar (:mod:`.toolbar`), the keys (:mod:`.keys`), tool
calls that wait for the person (:mod:`.approvals`), signals (:mod:`.signals`), the jobs a
line starts (:mod:`.background`), what is printed above the prompt (:mod:`.screen`), what
a typed line does (:mod:`.typed`), the banners (:mod:`.banner`) and leaving a session
(:mod:`.leaving`). :class:`Repl` holds what they share (the session served now, its
display and its command runner), opens and switches sessions, and runs the input loop.
"""

from __future__ import annotations

import functools
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.palette import Palette, terminal_width
from rolecall.cli.repl.approvals import Approvals
from rolecall.cli.repl.background import Background
from rolecall.cli.repl.banner import session_banner, world_banner
from rolecall.cli.repl.commands import (
    LoadRequest,
)
from rolecall.cli.repl.completion import ReplCompleter
from rolecall.cli.repl.display import ReplDisplay, StreamMode
from rolecall.cli.repl.keys import Keys
from rolecall.cli.repl.leaving import leave
from rolecall.cli.repl.live import _quiet_args, open_live_session
from rolecall.cli.repl.prompt import (
    FirstPrompt,
    StoredSessions,
    live_message,
    make_prompt,
    placeholder,
)
from rolecall.cli.repl.runner import (
    CommandRunner,
    LoopControl,
    _models_in_use,
)
from rolecall.cli.repl.screen import Screen
from rolecall.cli.repl.signals import watch_signals
from rolecall.cli.repl.toolbar import fit_toolbar, starting_toolbar, status_parts
from rolecall.cli.repl.typed import handle_line
from rolecall.cli.wrap import wrap_styled
from rolecall.export.common import snippet
from rolecall.log import get_logger

if TYPE_CHECKING:
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.input import Input
    from prompt_toolkit.output import Output
    from prompt_toolkit.shortcuts import PromptSession

    from rolecall.api.session import Session
    from rolecall.cli.options import SessionOptions
    from rolecall.memory import MemoryFiles
    from rolecall.storage.data_store import DataStore
    from rolecall.world.models import World


log = get_logger("rolecall.cli.repl")
After = Callable[["Session"], Awaitable[object]]  # run once the REPL switched (LoadRequest)


class Repl:
    """The prompt-toolkit front end of one or more sessions (``/load`` switches)."""

    def __init__(
        self,
        args: SessionOptions,
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
        self.data_dir = data_dir(args.data_dir)
        self._memory = memory
        self.color = (not os.environ.get("NO_COLOR")) if color is None else color
        self.handle_signals = handle_signals
        self.step_mode = args.mode == "step"
        self.verbose = args.verbose
        self.quiet = args.quiet
        self.stream_mode: StreamMode = args.stream or "preview"
        self.cwd = cwd
        self._width = width or terminal_width
        self._input = input
        self._output = output
        self._history_file = history_file or self.data_dir / "repl_history"
        self.screen = Screen(
            prompt=lambda: self.prompt,
            display=lambda: self.display,
            sink=sink,
            patch_output=patch_output,
            verbose=self.verbose,
        )
        self.approvals = Approvals(lambda: self.display, self.screen.changed)
        self.background = Background(
            display=lambda: self.display, changed=self.screen.changed, on_idle=self._pausing_done
        )
        self.keys = Keys(self, self.approvals)
        self._quit = False
        self._open: dict[str, Session] = {}
        self._world: World | None = None
        self._first: FirstPrompt | None = None
        self._boot_banner = False
        self._stored = StoredSessions(self.data_dir)
        self.session: Session | None = None
        self.display: ReplDisplay | None = None
        self.runner: CommandRunner | None = None
        self.prompt: PromptSession[str] | None = None

    @property
    def jobs(self) -> int:
        """How many jobs started from the prompt still run."""
        return self.background.count

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
            for line in world_banner(world, palette, step_mode=self.step_mode)
            for piece in wrap_styled(line, width)
        ]
        self.screen.print("".join(line + "\n" for line in banner))
        self._boot_banner = True
        first = FirstPrompt()
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
                    self.screen.print(Palette((), color=self.color).red(f"✗ cannot load: {exc}"))
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

    def _stream(self, mode: StreamMode | None) -> StreamMode:
        """``/stream``: how replies show while they stream (from the next one on)."""
        if mode is not None:
            self.stream_mode = mode
            if self.display is not None:
                self.display.stream = mode
        return self.stream_mode

    def _attach(self, session: Session) -> ReplDisplay:
        """Serve ``session`` from now on: its display, its command runner, its approver."""
        self.session = session
        session.approver = self.approvals.ask  # tools.md: `approve: ask` calls are asked here
        palette = Palette(session.world.role_ids, color=self.color)

        def totals() -> tuple[int, int]:
            result = session.result
            return result.input_tokens, result.output_tokens

        self.display = display = ReplDisplay(
            palette,
            width=self._width,
            quiet=self.quiet,
            verbose=self.verbose,
            on_change=self.screen.changed,
            totals=totals,
            stream=self.stream_mode,
        )
        for m in session.transcript:  # what a reply may answer (its ↩ quote)
            display.said[m.id] = snippet(m.content)
        self.runner = CommandRunner(
            session,
            echo=display.info,
            store=self.store,
            memory=self.memory,
            spawn=self.background.spawn,
            busy=lambda: self.jobs > 0,
            palette=palette,
            cwd=self.cwd,
            data_dir=self.data_dir,
            on_model=lambda name: self._preload([name]),
            stream=self._stream,
        )
        return display

    async def _serve(
        self, session: Session, after: After | None = None
    ) -> LoopControl | LoadRequest:
        loaded = self.session is not None
        display = self._attach(session)
        subscription = session.bus.subscribe(display, name="repl")
        self.keys.disarm()
        self._quit = False
        await session.begin()
        if self._boot_banner:
            self._boot_banner = False  # printed while booting
        else:
            session_banner(
                session,
                display,
                width=self._width,
                loaded=loaded,
                hint=after is None,
                step_mode=self.step_mode,
            )
        self.screen.changed()  # redraw: the toolbar shows the session now
        try:
            async with anyio.create_task_group() as tg:
                self.background.tg = tg
                tg.start_soon(self.screen.pump)
                tg.start_soon(self.screen.ticker)
                if self.handle_signals:
                    tg.start_soon(
                        functools.partial(
                            watch_signals,
                            interrupt=lambda: self.keys.interrupt(None),
                            quit=self.request_quit,
                        )
                    )
                self._preload(_models_in_use(session))
                if after is not None:  # /retry: the turn asked again, in the new branch
                    self.background.spawn("retry", functools.partial(after, session))
                with self.screen.terminal():
                    try:
                        result = await self._loop()
                    except BaseException:
                        # the terminal went away or the REPL broke: still keep the session
                        with anyio.move_on_after(5, shield=True):
                            await self._leave(session, switching=False)
                        raise
                    await self._leave(session, switching=isinstance(result, LoadRequest))
                    await self.screen.flush()
                tg.cancel_scope.cancel()
        finally:
            subscription.close()
            self.background.tg = None
        self.screen.print(display.take_output())
        return result

    async def _loop(self) -> LoopControl | LoadRequest:
        assert self.prompt is not None
        assert self.runner is not None
        while not self._quit:
            await self.screen.flush()  # what the last line printed comes before the next prompt
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
            self.keys.disarm()
            if self.approvals.waiting is not None:  # the answer to a tool call that waits
                self.approvals.answer(text)
                continue
            assert self.session is not None
            assert self.display is not None
            result = await handle_line(
                text,
                session=self.session,
                runner=self.runner,
                display=self.display,
                spawn=self.background.spawn,
                step_mode=self.step_mode,
            )
            if result is not LoopControl.CONTINUE:
                return result
        return LoopControl.QUIT

    async def _leave(self, session: Session, *, switching: bool) -> None:
        assert self.display is not None
        await leave(
            session,
            switching=switching,
            display=self.display,
            background=self.background,
            store=self.store,
            step_mode=self.step_mode,
            args=self.args,
            width=self._width,
        )

    def _preload(self, models: list[str]) -> None:
        if self.session is not None:
            self.background.preload(models, self.session.world.settings.client)

    def _pausing_done(self) -> None:
        if self.runner is not None:
            self.runner.pausing = False

    def request_quit(self) -> None:
        self._quit = True
        app = self.prompt.app if self.prompt is not None else None
        if app is not None and app.is_running and not app.is_done:
            app.exit(exception=EOFError())

    # -- the prompt --------------------------------------------------------------------------
    def _make_prompt(self) -> PromptSession[str]:
        def world() -> World:
            if self.session is not None:
                return self.session.world
            assert self._world is not None
            return self._world

        return make_prompt(
            message=lambda: live_message(self.display),
            placeholder=self._placeholder,
            toolbar=self._toolbar,
            completer=ReplCompleter(world, lambda: self.session, self._stored).for_prompt(),
            key_bindings=self.keys.bindings(),
            history_file=self._history_file,
            color=self.color,
            input=self._input,
            output=self._output,
        )

    def _placeholder(self) -> StyleAndTextTuples:
        session = self.session
        world = session.world if session is not None else self._world
        waiting = self.approvals.waiting
        return placeholder(
            session,
            world,
            waiting=waiting.tool if waiting is not None else None,
            step_mode=self.step_mode,
        )

    def _toolbar(self) -> StyleAndTextTuples:
        session = self.session
        display = self.display
        if session is None or display is None:
            return [*starting_toolbar(self._world.name if self._world is not None else "rolecall")]
        waiting = self.approvals.waiting
        parts = status_parts(
            session,
            display,
            waiting=waiting.tool if waiting is not None else None,
            pausing=self.runner is not None and self.runner.pausing,
            jobs=self.jobs,
            armed=self.keys.armed,
            step_mode=self.step_mode,
        )
        return [*fit_toolbar(parts, self._width())]
