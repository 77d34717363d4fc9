"""The REPL's prompt: a prompt-toolkit ``PromptSession`` (repl.md, The screen).

:func:`make_prompt` builds it: history in a file, multi-line input, completion, the
display's live region drawn just above the input line (:func:`live_message`), a
placeholder saying what the empty line does (:func:`placeholder`) and the bottom
toolbar. :class:`FirstPrompt` runs the first prompt while the session still opens;
:class:`StoredSessions` lists the stored sessions for ``/load``'s completion.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from prompt_toolkit.completion import Completer
    from prompt_toolkit.formatted_text import StyleAndTextTuples
    from prompt_toolkit.input import Input
    from prompt_toolkit.key_binding import KeyBindings
    from prompt_toolkit.output import Output
    from prompt_toolkit.shortcuts import PromptSession

    from rolecall.api.session import Session
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.world.models import World

Lines = Callable[[], "StyleAndTextTuples"]

STYLE = {
    "prompt": "bold",
    "continuation": "#888888",
    "placeholder": "#888888 italic",
    "bottom-toolbar": "noreverse bg:#303030 #d0d0d0",
    "bottom-toolbar.key": "bold",
    "bottom-toolbar.state": "bold",
    "bottom-toolbar.hint": "#a0a0a0",
}
STYLE_PLAIN = {"bottom-toolbar": "reverse", "placeholder": "italic"}


class FirstPrompt:
    """The first prompt, started before the session exists (see ``Repl.booting``)."""

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


class StoredSessions:
    """The stored sessions (newest first) for ``/load`` completion, read at most 1/s."""

    def __init__(self, data_dir: Path) -> None:
        self._data_dir = data_dir
        self._cache: tuple[float, list[tuple[str, str]]] | None = None

    def __call__(self) -> list[tuple[str, str]]:
        now = time.monotonic()
        if self._cache is None or now - self._cache[0] > 1.0:
            from rolecall.paths import db_path
            from rolecall.storage.catalog import recent_ids

            self._cache = (now, recent_ids(db_path(self._data_dir)))
        return self._cache[1]


def live_message(display: ReplDisplay | None) -> StyleAndTextTuples:
    """The prompt's message: the display's live lines (if any), then ``› ``."""
    from prompt_toolkit.application import get_app_or_none
    from prompt_toolkit.formatted_text import ANSI, to_formatted_text

    app = get_app_or_none()
    prompt: StyleAndTextTuples = [("class:prompt", "› ")]
    if display is None or (app is not None and app.is_done):
        return prompt
    lines = display.live_lines()
    if not lines:
        return prompt
    return to_formatted_text(ANSI("\n".join(lines) + "\n")) + prompt


def placeholder(
    session: Session | None, world: World | None, *, waiting: str | None, step_mode: bool
) -> StyleAndTextTuples:
    """What the empty line says it does: answer the call ``waiting`` (a tool's name),
    nothing more (a finished session), the next turn (step mode), else a message."""
    from prompt_toolkit.application import get_app_or_none

    app = get_app_or_none()
    if app is not None and app.is_done:
        return []  # not left behind in the scrollback
    if session is not None and waiting is not None:
        return [
            (
                "class:placeholder",
                f"{waiting} waits: y runs it · n refuses it · e {{...}} runs it with these "
                "arguments · Ctrl-C refuses",
            )
        ]
    if session is not None and session.finished:
        return [("class:placeholder", "the session has finished · /load another · /quit")]
    if step_mode and world is not None and (world.flow or world.mode):
        return [("class:placeholder", "Enter runs the next turn · a message · /help")]
    return [("class:placeholder", "message the agents · @ for one · / for commands")]


def make_prompt(
    *,
    message: Lines,
    placeholder: Lines,
    toolbar: Lines,
    completer: Completer,
    key_bindings: KeyBindings,
    history_file: Path,
    color: bool,
    input: Input | None = None,
    output: Output | None = None,
) -> PromptSession[str]:
    """The prompt; ``message``, ``placeholder`` and ``toolbar`` are read on every redraw.

    The history is kept in ``history_file`` (in memory if it cannot be written).
    """
    from prompt_toolkit.auto_suggest import AutoSuggestFromHistory
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory
    from prompt_toolkit.shortcuts import PromptSession
    from prompt_toolkit.styles import Style

    history: History
    try:
        history_file.parent.mkdir(parents=True, exist_ok=True)
        history = FileHistory(str(history_file))
    except OSError:
        history = InMemoryHistory()

    def continuation(width: int, line_number: int, wrap_count: int) -> StyleAndTextTuples:
        return [("class:continuation", "… ".rjust(width))]

    style = Style.from_dict(STYLE if color else STYLE_PLAIN)
    return PromptSession(
        message=message,
        multiline=True,
        completer=completer,
        complete_while_typing=True,
        auto_suggest=AutoSuggestFromHistory(),
        history=history,
        bottom_toolbar=toolbar,
        placeholder=placeholder,
        prompt_continuation=continuation,
        key_bindings=key_bindings,
        style=style,
        include_default_pygments_style=False,
        reserve_space_for_menu=6,
        input=input,
        output=output,
    )
