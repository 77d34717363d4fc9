"""What the REPL prints, and where: above the prompt while the human types.

:class:`Screen` prints the display's finished lines above the prompt, in batches
(:meth:`Screen.pump`, woken by :meth:`Screen.changed`), and before each new prompt
(:meth:`Screen.flush`); redraws the live region while a reply streams
(:meth:`Screen.ticker`); and patches the terminal (:meth:`Screen.terminal`) so what
else is printed or logged lands above the prompt too.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.repl.live import _logs_above_prompt

if TYPE_CHECKING:
    from prompt_toolkit.shortcuts import PromptSession

    from rolecall.cli.repl.display import ReplDisplay


class Screen:
    """The terminal under the prompt.

    ``prompt`` and ``display`` give the prompt and the display (``None`` before they are
    up); ``sink`` takes the printed text instead of the terminal (tests); without
    ``patch_output`` the terminal is left as it is; ``verbose`` is ``-v``'s count (below
    it only errors are logged above the prompt).
    """

    def __init__(
        self,
        *,
        prompt: Callable[[], PromptSession[str] | None],
        display: Callable[[], ReplDisplay | None],
        sink: Callable[[str], None] | None = None,
        patch_output: bool = True,
        verbose: int = 0,
    ) -> None:
        self._prompt = prompt
        self._display = display
        self._sink = sink
        self._patch_output = patch_output
        self._verbose = verbose
        self._wake = anyio.Event()

    def changed(self) -> None:
        """Something shown changed: print the new lines soon, redraw the prompt."""
        self._wake.set()
        prompt = self._prompt()
        if prompt is not None:
            prompt.app.invalidate()

    def print(self, text: str) -> None:
        """``text`` on the terminal as it is (above the prompt while one runs)."""
        if not text:
            return
        if self._sink is not None:
            self._sink(text)
            return
        prompt = self._prompt()
        try:
            if prompt is None:
                sys.stdout.write(text)
                sys.stdout.flush()
            else:
                prompt.app.output.write_raw(text)
                prompt.app.output.flush()
        except OSError:  # the terminal is gone (SIGHUP): nothing left to show
            pass

    async def flush(self) -> None:
        """Print the display's finished lines now, above the prompt."""
        from prompt_toolkit.application import in_terminal

        display = self._display()
        if display is None or not display.outbox:
            return
        async with in_terminal():
            self.print(display.take_output())

    async def pump(self) -> None:
        """Print the display's finished lines above the prompt, in batches."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self.flush()
            await anyio.sleep(0.03)

    async def ticker(self) -> None:
        """Redraw the spinner and elapsed time while a generation runs."""
        while True:
            await anyio.sleep(0.1)
            prompt = self._prompt()
            display = self._display()
            if prompt is not None and display is not None and display.active:
                prompt.app.invalidate()

    @contextmanager
    def terminal(self) -> Iterator[None]:
        """Prints and console logs above the prompt while inside (``patch_output``)."""
        if not self._patch_output:
            yield
            return
        from prompt_toolkit.patch_stdout import patch_stdout

        with patch_stdout(raw=True), _logs_above_prompt(self._verbose):
            yield
