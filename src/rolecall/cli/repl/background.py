"""The REPL's background work, in the task group of the session it serves.

:meth:`Background.spawn` starts a job a typed line asked for (a message's replies,
``/run``, ``/next``, ``/retry``...) while the prompt stays up; :attr:`Background.count`
says how many run (Ctrl-C, Ctrl-D, quitting and the toolbar look at it) and
:meth:`Background.settle` waits for them. :meth:`Background.preload` loads litellm in a
thread ahead of the first reply that needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

from rolecall.log import get_logger

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.cli.repl.runner import Job

log = get_logger("rolecall.cli.repl")


class Background:
    """Jobs started from the prompt, counted; a failed one is said on the display.

    ``display`` gives the display (``None`` while none is up); ``changed`` asks for a
    redraw (the toolbar counts the jobs); ``on_idle`` runs when the last job ends.
    """

    def __init__(
        self,
        *,
        display: Callable[[], ReplDisplay | None],
        changed: Callable[[], None],
        on_idle: Callable[[], None],
    ) -> None:
        self._display = display
        self._changed = changed
        self._on_idle = on_idle
        self.count = 0
        self._idle = anyio.Event()
        self._preloading = False
        self.tg: TaskGroup | None = None  # the serving session's; None between sessions

    def spawn(self, name: str, job: Job) -> None:
        """Start ``job`` in the task group; the prompt does not wait for it."""
        assert self.tg is not None
        if self.count == 0:
            self._idle = anyio.Event()
        self.count += 1
        self._changed()

        async def run() -> None:
            try:
                await job()
            except Exception as exc:
                log.warning("repl_job_failed", job=name, exc_info=exc)
                display = self._display()
                if display is not None:
                    display.error(f"{name} failed: {exc}")
            finally:
                self.count -= 1
                if self.count == 0:
                    self._idle.set()
                    self._on_idle()
                self._changed()

        self.tg.start_soon(run, name=f"repl-{name}")

    async def settle(self) -> None:
        """Wait until no job runs."""
        if self.count:
            await self._idle.wait()

    def preload(self, models: list[str], client: str) -> None:
        """Load litellm in a thread if one of ``models`` needs it (once)."""
        from rolecall.llm.registry import needs_litellm

        if self._preloading or self.tg is None:
            return
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
                display = self._display()
                if display is not None:
                    display.warn(f"could not load litellm: {exc}")

        self.tg.start_soon(load, name="repl-preload-litellm")
