"""Showing a session: the terminal display and the JSON event stream (events.md).

Both are bus subscribers. The terminal display prints ``speaker → target`` headers,
streams text as it arrives, shows ``↑in ↓out`` tokens per message and a session total,
with one colour per role on a terminal (plain text when stdout is not a terminal or
``NO_COLOR`` is set). The JSON sink writes every event as one line, nothing else.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from rolecall.badges import NONE, Labels
from rolecall.bus import Bus, Envelope
from rolecall.bus import events as ev
from rolecall.bus.soon import call_soon
from rolecall.cli.palette import Palette, header, terminal_width, tokens, use_color
from rolecall.cli.render import (
    Renderer,
    condition_line,
    cut_note,
    nobody_note,
    respond_note,
    summary_lines,
)
from rolecall.cli.stdout import silence_stdout, stdout_failed
from rolecall.money import money
from rolecall.session.audience import audience_label

if TYPE_CHECKING:
    from rolecall.cli.wrap import StreamWrap
    from rolecall.session.state import TranscriptMessage


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


class TerminalDisplay(Renderer):
    """Human-readable live transcript (the events as :class:`Renderer` dispatches them)."""

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
        earlier: Mapping[str, TranscriptMessage] | None = None,
    ) -> None:
        """``live``: stream text as it arrives (default: when ``out`` is a terminal);
        otherwise each message is shown once, as published. ``labels``: chat-style
        ``#turn BADGE · Name`` headers (a debate); ``turns``: agent messages so far;
        ``earlier``: the messages said before (a resumed session's), by id, for the
        quotes of the replies that answer them."""
        super().__init__()
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
        audience: Sequence[str] | None = None,
    ) -> str:
        answering = None
        if reply_to:
            from rolecall.export.common import answered, snippet  # only a reply quotes

            quoted = self.said.get(reply_to)
            if quoted is None and reply_to in self.earlier:
                quoted = self.said[reply_to] = snippet(self.earlier[reply_to].content)
            answering = answered(reply_to, quoted)
        label = self.labels.label(sender, turn)
        head = header(
            self.palette, sender, target, step, iteration, answering, label=label, audience=audience
        )
        return head + self.dim(self.why_chosen(sender))

    def _stream(self, event: ev.StreamStart | ev.StreamChunk | ev.StreamEnd) -> None:
        """Live: the header, then the text as it arrives, then the token line."""
        if isinstance(event, ev.StreamStart):
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
                    event.audience,
                )
            )
        elif isinstance(event, ev.StreamChunk):
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

    def _agent_message(self, event: ev.MessageEvent) -> None:
        """An agent's message as published (pass tags removed, auto-mention added)."""
        if self.cost is not None:
            self.cost = None if event.cost_usd is None else self.cost + event.cost_usd
        self.turns = max(self.turns, event.turn)
        if self.live:
            if event.content != "".join(self._streamed):
                self._line(self.dim(f"(published as: {event.content})"))
                self._line()
            if event.data is not None:  # a structured reply, readably (selection.md)
                from rolecall.export.common import pretty_data

                self._line(pretty_data(event.data))
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
                event.audience,
            )
        )
        if event.data is None:
            self._line(event.content)
        else:
            from rolecall.export.common import pretty_data

            self._line(pretty_data(event.data))
        self._citations(event.message_id, event.content)
        if not self.quiet:
            self._line(self.dim(tokens(event.input_tokens, event.output_tokens)))
        self._line()

    def _citations(self, message_id: str, content: str) -> None:
        for line in self.citations(message_id, content):
            self._line(self.dim(line))

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
            self.render(envelope)
        except BrokenPipeError:
            self.closed = True
            silence_stdout()

    # -- the events shown (Renderer's dispatch) -------------------------------------
    def on_sse_start(
        self, envelope: Envelope, event: ev.StreamStart | ev.StreamChunk | ev.StreamEnd
    ) -> None:
        if self.live:  # otherwise each message is shown once, as published
            self._stream(event)

    on_sse_chunk = on_sse_end = on_sse_start

    def on_sse_error(self, envelope: Envelope, event: ev.StreamError) -> None:
        self._line(f"[generation of {event.message_id} stopped: {event.error}]", err=True)

    def on_messages_message(self, envelope: Envelope, event: ev.MessageEvent) -> None:
        if event.sender in ("human", "system"):
            private = ""
            if event.audience is not None:  # a whisper (audiences.md)
                private = " " + self.palette.yellow(f"({audience_label(event.audience)})")
            self._line(f"{self.paint(event.sender, event.sender)}{private}: {event.content}")
            self._line()
        else:
            self._agent_message(event)

    def on_messages_tool_result(self, envelope: Envelope, event: ev.ToolResultEvent) -> None:
        self._line(self.dim(self.tool_result(event)))

    def on_system_pass(self, envelope: Envelope, event: ev.PassEvent) -> None:
        self._line(self.dim(f"({event.agent} passes the floor to the human)"))

    def on_system_trim(self, envelope: Envelope, event: ev.TrimEvent) -> None:
        """Live: text already shown and then cut from the reply (real-models.md) is
        marked; otherwise only the message is shown, and nothing needs saying."""
        if not self.live or not event.shown:
            return
        streamed = "".join(self._streamed)
        self._streamed = [streamed[: max(0, len(streamed) - event.shown)]]
        self._line(self.dim(cut_note(event)))

    def on_system_respond(self, envelope: Envelope, event: ev.RespondEvent) -> None:
        self._line(self.dim(respond_note(event)))

    def on_system_summary(self, envelope: Envelope, event: ev.SummaryEvent) -> None:
        for line in summary_lines(event, text=self.show_conditions):
            self._line(self.dim(line))

    def on_system_selection(self, envelope: Envelope, event: ev.SelectionEvent) -> None:
        if event.chosen is None:  # a chosen speaker's reason is on its header line
            self._line(self.dim(nobody_note(event)))

    def on_system_warning(self, envelope: Envelope, event: ev.WarningEvent) -> None:
        self._line(f"warning: {event.message}", err=True)

    def on_system_error(self, envelope: Envelope, event: ev.ErrorEvent) -> None:
        if event.source == "store":
            # a write failed: the command's own message says what and how to go on, and
            # nothing after it (the pause it brings) is shown
            self.closed = True
        elif not event.source.startswith("model:"):  # the stream error said it already
            self._line(f"error: {event.error}", err=True)

    def on_system_condition(self, envelope: Envelope, event: ev.ConditionEvent) -> None:
        if self.show_conditions:
            self._line(self.dim(condition_line(event)))

    def on_world_session(self, envelope: Envelope, event: ev.SessionEvent) -> None:
        if event.state == "paused":
            self._line(
                f"session {envelope.session_id} paused ({event.reason or 'paused'})", err=True
            )

    def on_world_stop(self, envelope: Envelope, event: ev.StopEvent) -> None:
        detail = f" ({event.detail})" if event.detail else ""
        self._line(f"stopped: {event.reason}{detail}")
        cost = f" · {money(self.cost)}" if self.cost else ""  # known and not free
        self._line(f"session total {tokens(self.total_in, self.total_out)}{cost}")


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
    earlier: Mapping[str, TranscriptMessage] | None = None,
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
