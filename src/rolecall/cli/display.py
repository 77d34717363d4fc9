"""Showing a session: the terminal display and the JSON event stream (events.md).

Both are bus subscribers. The terminal display prints ``speaker → target`` headers,
streams text as it arrives, shows ``↑in ↓out`` tokens per message and a session total,
with one colour per role on a terminal (plain text when stdout is not a terminal or
``NO_COLOR`` is set). The JSON sink writes every event as one line, nothing else.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TextIO, TypeVar

from pydantic import BaseModel

from rolecall.badges import NONE, Labels
from rolecall.bus import (
    Bus,
    ConditionEvent,
    Envelope,
    ErrorEvent,
    Event,
    KnowledgeEvent,
    MessageEvent,
    PassEvent,
    RespondEvent,
    SessionEvent,
    StopEvent,
    StreamChunk,
    StreamEnd,
    StreamError,
    StreamStart,
    ToolCallEvent,
    ToolResultEvent,
    TurnLimitEvent,
    WarningEvent,
)
from rolecall.bus.soon import call_soon
from rolecall.cli.palette import Palette, header, terminal_width, tokens, use_color
from rolecall.export.citations import cited
from rolecall.export.common import CONTROLS, answered, short_arguments, snippet, visible
from rolecall.money import money

_E = TypeVar("_E", bound=BaseModel)

if TYPE_CHECKING:
    from rolecall.cli.wrap import StreamWrap
    from rolecall.session.state import Message


class JsonSink:
    """Every event as one JSON object per line (``--json``).

    Lines are flushed when the event loop next idles (a burst of streamed chunks is one
    write to the pipe; a model's chunks arriving over the network still go out one by
    one), and at once for a ``world`` event (the session's state, its end) or when no
    event loop runs. When the reader goes away (``| head``), writing stops quietly; the
    session goes on and is stored as usual.
    """

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.closed = False
        self._flush_due = False

    def __call__(self, envelope: Envelope) -> None:
        if self.closed:
            return
        try:
            self.out.write(envelope.to_json() + "\n")
        except OSError as exc:
            self._failed(exc)
            return
        if envelope.event.topic == "world":
            self.flush()
        elif not self._flush_due:
            if call_soon(self.flush):
                self._flush_due = True
            else:  # no event loop here: now
                self.flush()

    def flush(self) -> None:
        self._flush_due = False
        if self.closed:
            return
        try:
            self.out.flush()
        except OSError as exc:
            self._failed(exc)

    def _failed(self, exc: OSError) -> None:
        self.closed = True
        if isinstance(exc, BrokenPipeError):
            silence_stdout()
        else:  # a full disk, /dev/full: the command will exit 1
            stdout_failed(exc)

    def attach(self, bus: Bus) -> None:
        bus.subscribe(self, name="json")


class TerminalDisplay:
    """Human-readable live transcript."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        role_order: list[str],
        color: bool | None = None,
        show_conditions: bool = False,
        quiet: bool = False,
        live: bool | None = None,
        labels: Labels = NONE,
        turns: int = 0,
        earlier: Mapping[str, Message] | None = None,
    ) -> None:
        """``live``: stream text as it arrives (default: when ``out`` is a terminal);
        otherwise each message is shown once, as published. ``labels``: chat-style
        ``#turn BADGE · Name`` headers (a debate); ``turns``: agent messages so far;
        ``earlier``: the messages said before (a resumed session's), by id, for the
        quotes of the replies that answer them."""
        self.earlier = earlier or {}
        self.labels = labels
        self.turns = turns
        self.out = out
        isatty = getattr(out, "isatty", None)
        self.live = bool(isatty and isatty()) if live is None else live
        self._streamed: list[str] = []
        self.err = err
        self.color = use_color(out) if color is None else color
        self.palette = Palette(role_order, color=self.color)
        self.colors = self.palette.colors
        self.show_conditions = show_conditions
        self.quiet = quiet
        self.total_in = 0
        self.total_out = 0
        self.cost: float | None = 0.0  # USD of the agent messages; None once one is unknown
        self._open_line = False
        self.closed = False
        self._wrap: StreamWrap | None = None  # live on a terminal: word-wrapped
        self.said: dict[str, str] = {}  # message id -> its text, shortened (for ↩ quotes)
        self._calls: dict[str, str] = {}  # a tool call's id -> "tool(short arguments)"
        # message id -> the passages its turn was given (system/knowledge), by id (k1..)
        self.sources: dict[str, dict[str, dict[str, Any]]] = {}

    def attach(self, bus: Bus) -> None:
        bus.subscribe(self, name="terminal")

    def paint(self, who: str, text: str) -> str:
        return self.palette.paint(who, text)

    def dim(self, text: str) -> str:
        return self.palette.dim(text)

    def header(
        self,
        sender: str,
        target: str | None,
        step: str | None,
        iteration: int | None,
        turn: int | None = None,
        reply_to: str | None = None,
    ) -> str:
        answering = None
        if reply_to:
            quoted = self.said.get(reply_to)
            if quoted is None and reply_to in self.earlier:
                quoted = self.said[reply_to] = snippet(self.earlier[reply_to].content)
            answering = answered(reply_to, quoted)
        label = self.labels.label(sender, turn)
        return header(self.palette, sender, target, step, iteration, answering, label=label)

    def _stream(self, event: StreamStart | StreamChunk | StreamEnd) -> None:
        """Live: the header, then the text as it arrives, then the token line."""
        if isinstance(event, StreamStart):
            self._streamed = []
            self._wrap = None
            if self.live:  # wcwidth's tables load only for a terminal (--json never wraps)
                from rolecall.cli.wrap import StreamWrap

                self._wrap = StreamWrap(terminal_width(self.out) - 1)
            self._line(
                self.header(
                    event.sender,
                    event.target,
                    event.step_id,
                    event.loop_iteration,
                    self.turns + 1,
                    event.reply_to,
                )
            )
        elif isinstance(event, StreamChunk):
            self._streamed.append(event.delta)
            text = event.delta if self._wrap is None else self._wrap.feed(event.delta)
            self.out.write(text)
            self.out.flush()
            self._open_line = True
        else:
            if self._wrap is not None:
                self.out.write(self._wrap.end())
                self._wrap = None
            self.total_in += event.input_tokens
            self.total_out += event.output_tokens
            self._line()
            self._citations(event.message_id, "".join(self._streamed))
            if not self.quiet:
                self._line(self.dim(tokens(event.input_tokens, event.output_tokens)))
                self._line()

    def _agent_message(self, event: MessageEvent) -> None:
        """An agent's message as published (pass tags removed, auto-mention added)."""
        if self.cost is not None:
            self.cost = None if event.cost_usd is None else self.cost + event.cost_usd
        self.turns = max(self.turns, event.turn)
        if self.live:
            if event.content != "".join(self._streamed):
                self._line(self.dim(f"(published as: {event.content})"))
                self._line()
            return
        self.total_in += event.input_tokens
        self.total_out += event.output_tokens
        self._line(
            self.header(
                event.sender,
                event.target,
                event.step_id,
                event.loop_iteration,
                event.turn,
                event.reply_to,
            )
        )
        self._line(event.content)
        self._citations(event.message_id, event.content)
        if not self.quiet:
            self._line(self.dim(tokens(event.input_tokens, event.output_tokens)))
        self._line()

    def _citations(self, message_id: str, content: str) -> None:
        """Under a message that cites ``[kN]``: each cited passage's source."""
        for citation in cited(content, self.sources.pop(message_id, None)):
            self._line(self.dim(f"  {citation.label}"))

    def _line(self, text: str = "", *, err: bool = False) -> None:
        if self._open_line:
            self.out.write("\n")
            self._open_line = False
        stream = self.err if err else self.out
        stream.write(text + "\n")
        stream.flush()

    def __call__(self, envelope: Envelope) -> None:
        if self.closed:
            return
        try:
            self._show(envelope, shown(envelope.event))
        except BrokenPipeError:
            self.closed = True
            silence_stdout()

    def _show(self, envelope: Envelope, event: Event) -> None:
        if isinstance(event, MessageEvent):  # what a later reply's header may quote
            self.said[event.message_id] = snippet(event.content)
        if isinstance(event, StreamStart | StreamChunk | StreamEnd):
            if self.live:
                self._stream(event)
        elif isinstance(event, StreamError):
            self._line(f"[generation of {event.message_id} stopped: {event.error}]", err=True)
        elif isinstance(event, MessageEvent) and event.sender in ("human", "system"):
            self._line(f"{self.paint(event.sender, event.sender)}: {event.content}")
            self._line()
        elif isinstance(event, MessageEvent):
            self._agent_message(event)
        elif isinstance(event, ToolCallEvent):
            self._calls[event.call_id] = f"{event.tool}({short_arguments(event.arguments)})"
        elif isinstance(event, ToolResultEvent):
            self._line(self.dim(tool_line(self._calls.pop(event.call_id, event.tool), event)))
        elif isinstance(event, KnowledgeEvent):
            if event.message_id is not None:
                self.sources[event.message_id] = {p["id"]: p for p in event.passages}
        elif isinstance(event, PassEvent):
            self._line(self.dim(f"({event.agent} passes the floor to the human)"))
        elif isinstance(event, RespondEvent):
            self._line(self.dim(respond_note(event)))
        elif isinstance(event, TurnLimitEvent):
            pass  # the system message says it
        elif isinstance(event, WarningEvent):
            self._line(f"warning: {event.message}", err=True)
        elif isinstance(event, ErrorEvent) and event.source == "store":
            # a write failed: the command's own message says what and how to go on, and
            # nothing after it (the pause it brings) is shown
            self.closed = True
        elif isinstance(event, ErrorEvent):
            if not event.source.startswith("model:"):  # the stream error said it already
                self._line(f"error: {event.error}", err=True)
        elif isinstance(event, ConditionEvent) and self.show_conditions:
            mark = "✓" if event.result else "·"
            self._line(self.dim(f"  {mark} {event.context} {event.condition}: {event.detail}"))
        elif isinstance(event, SessionEvent) and event.state == "paused":
            self._line(
                f"session {envelope.session_id} paused ({event.reason or 'paused'})", err=True
            )
        elif isinstance(event, StopEvent):
            detail = f" ({event.detail})" if event.detail else ""
            self._line(f"stopped: {event.reason}{detail}")
            cost = f" · {money(self.cost)}" if self.cost else ""  # known and not free
            self._line(f"session total {tokens(self.total_in, self.total_out)}{cost}")


def shown(event: _E) -> _E:
    """``event`` with the control characters of its texts shown as symbols (``␛`` for
    ESC, see :func:`~rolecall.export.common.visible`): a model's reply printed on a
    terminal cannot move its cursor, retitle or clear it. ``event`` itself when it has
    none (the usual case: one regex search per text field)."""
    changed = {
        name: visible(value)
        for name, value in event.__dict__.items()
        if isinstance(value, str) and CONTROLS.search(value)
    }
    return event.model_copy(update=changed) if changed else event


def tool_line(call: str, event: ToolResultEvent) -> str:
    """One line per tool call: the tool, short arguments, the duration (and the error)."""
    line = f"  ⚙ {call} · {event.duration_ms} ms"
    if event.is_error:
        line += f" · error: {snippet(event.content)}"
    return line


_STDOUT_ERRORS: list[OSError] = []


def stdout_failed(exc: OSError | None = None) -> OSError | None:
    """Note that writing to stdout failed (not EPIPE); the first such error, if any.

    Standard output is then pointed at /dev/null, so nothing more fails on it.
    """
    if exc is not None:
        if not _STDOUT_ERRORS:
            _STDOUT_ERRORS.append(exc)
        silence_stdout()
    return _STDOUT_ERRORS[0] if _STDOUT_ERRORS else None


def silence_stdout() -> None:
    """After EPIPE, point stdout at /dev/null so the interpreter's final flush is quiet."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def display_sink(
    *,
    json_mode: bool,
    role_order: list[str],
    quiet: bool,
    verbose: int,
    totals: tuple[int, int] = (0, 0),
    cost: float | None = 0.0,
    labels: Labels = NONE,
    turns: int = 0,
    earlier: Mapping[str, Message] | None = None,
) -> JsonSink | TerminalDisplay:
    """The JSON sink or the terminal display; ``totals`` and ``cost`` are already spent."""
    if json_mode:
        return JsonSink(sys.stdout)
    display = TerminalDisplay(
        sys.stdout,
        sys.stderr,
        role_order=role_order,
        quiet=quiet,
        show_conditions=verbose > 0,
        labels=labels,
        turns=turns,
        earlier=earlier,
    )
    display.total_in, display.total_out = totals
    display.cost = cost
    return display


def attach_display(bus: Bus, **options: Any) -> None:
    """Attach :func:`display_sink` (same keywords) to ``bus``."""
    display_sink(**options).attach(bus)


def respond_note(event: RespondEvent) -> str:
    """An agent's decision on a message that addressed nobody, as one line."""
    verb = "will answer" if event.respond else "stays quiet"
    return f"({event.agent} {verb} {event.message_id}: {event.reason})"
