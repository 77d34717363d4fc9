"""The REPL's keys (repl.md, Keys): what Ctrl-C and Ctrl-D do, and the prompt's bindings.

Ctrl-C refuses a tool call that waits, else cancels the reply being generated, else
pauses a run after its turn, else clears the line; at an idle, empty prompt it arms
quitting, and a second Ctrl-C within :data:`QUIT_WINDOW` seconds quits. Ctrl-D at an
empty prompt quits; while a reply streams it asks first. Enter sends (or takes the
completion, or continues a line ending in ``\\``), Esc-Enter inserts a newline, Esc
closes the completion menu.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from prompt_toolkit.buffer import Buffer
    from prompt_toolkit.key_binding import KeyBindings

    from rolecall.api.session import Session
    from rolecall.cli.repl.approvals import Approvals
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.cli.repl.runner import CommandRunner

QUIT_WINDOW = 2.0  # seconds within which a second Ctrl-C (or Ctrl-D while busy) quits


class KeyHost(Protocol):
    """What the keys act on: the REPL's session, display and runner now (``None`` while
    booting), how many jobs run, and quitting."""

    session: Session | None
    display: ReplDisplay | None
    runner: CommandRunner | None

    @property
    def jobs(self) -> int: ...

    def request_quit(self) -> None: ...


class Keys:
    """Ctrl-C and Ctrl-D on ``host``; a call that waits in ``approvals`` is refused first."""

    def __init__(self, host: KeyHost, approvals: Approvals) -> None:
        self._host = host
        self._approvals = approvals
        self._armed = False
        self._armed_at = 0.0
        self._eof_at = -QUIT_WINDOW

    @property
    def armed(self) -> bool:
        """A Ctrl-C now would quit (the toolbar says so)."""
        return self._armed and time.monotonic() - self._armed_at <= QUIT_WINDOW

    def disarm(self) -> None:
        """A line was sent (or a session served): the next Ctrl-C does not quit."""
        self._armed = False

    def interrupt(self, buffer: Buffer | None) -> str:
        """Ctrl-C: cancel the generation; else pause a run; else clear; twice quits."""
        host = self._host
        session = host.session
        display = host.display
        if session is None or display is None:  # still booting
            if buffer is not None and buffer.text:
                buffer.reset()
                return "cleared"
            host.request_quit()
            return "quit"
        if self._approvals.waiting is not None:  # a tool call waits: Ctrl-C refuses it, as `n`
            self._approvals.refuse()
            if buffer is not None:
                buffer.reset()
            self._armed = False
            return "refused"
        if session.generating:
            session.interrupt()  # the session pauses itself (reason cancelled)
            self._armed = False
            return "cancelled"
        if host.jobs:
            session.pause("interrupted")
            if host.runner is not None:
                host.runner.pausing = True
            display.note("pausing after the current turn")
            self._armed = False
            return "pausing"
        if buffer is not None and buffer.text:
            buffer.reset()
            self._armed = False
            return "cleared"
        now = time.monotonic()
        if self._armed and now - self._armed_at <= QUIT_WINDOW:
            host.request_quit()
            return "quit"
        self._armed, self._armed_at = True, now
        display.note(
            f"(press Ctrl-C again to quit, within {QUIT_WINDOW:g} s; the session is kept · "
            "Ctrl-D quits too)"
        )
        return "armed"

    def end_of_input(self, buffer: Buffer | None) -> str:
        """Ctrl-D at an empty prompt: quit; while a reply is generated, ask first."""
        display = self._host.display
        session = self._host.session
        busy = session is not None and session.generating  # a reply streams
        now = time.monotonic()
        if busy and display is not None and now - self._eof_at > QUIT_WINDOW:
            self._eof_at = now
            display.note(
                f"a reply is being generated: Ctrl-D again within {QUIT_WINDOW:g} s quits "
                "(the reply is kept as a draft, the session paused) · Ctrl-C cancels the reply"
            )
            return "asked"
        self._host.request_quit()
        return "quit"

    def bindings(self) -> KeyBindings:
        """The prompt's key bindings."""
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
