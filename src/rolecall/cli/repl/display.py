""":class:`ReplDisplay`: bus events as lines plus a live region (streamed text, spinner)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rolecall.cli.palette import Palette, header, terminal_width, tokens
from rolecall.cli.render import (
    Renderer,
    condition_line,
    cut_note,
    nobody_note,
    respond_note,
    summary_lines,
)
from rolecall.cli.wrap import width_of, wrap_line, wrap_styled

if TYPE_CHECKING:  # the prompt is drawn before the event classes load
    from rolecall.bus import Envelope
    from rolecall.bus import events as ev

_SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

StreamMode = Literal["preview", "full"]
STREAM_MODES: tuple[StreamMode, ...] = ("preview", "full")


@dataclass
class _Live:
    """The generation being streamed."""

    message_id: str
    sender: str
    started: float
    partial: str = ""
    first_token: float | None = None
    out_tokens: int = 0
    header: str = ""
    parts: list[str] = field(default_factory=list)  # preview: the reply so far, held
    text: list[str] = field(default_factory=list)  # the whole reply so far (citations)


class ReplDisplay(Renderer):
    """Bus subscriber: finished lines go to an outbox printed above the prompt; the live
    region drawn just above the input shows the reply being streamed.

    ``stream="preview"`` (the default): while a reply streams, the live region holds one
    line (the speaker, elapsed time, its ↓ count and the latest words, cut to the
    width) and the reply is printed once, whole, when it completes, so nothing printed
    meanwhile can split it. ``"full"``: its lines are printed as they complete, and
    other output waits until the reply ends.

    Headless: call it with envelopes, read :meth:`take_output` and :meth:`live_lines`.
    """

    def __init__(
        self,
        palette: Palette,
        *,
        width: Callable[[], int] = terminal_width,
        quiet: bool = False,
        verbose: int = 0,
        clock: Callable[[], float] = time.monotonic,
        on_change: Callable[[], None] | None = None,
        totals: Callable[[], tuple[int, int]] | None = None,
        stream: StreamMode = "preview",
    ) -> None:
        super().__init__()
        self.palette = palette
        self.stream: StreamMode = stream
        # full mode: other output while a reply streams (each line, and whether it wraps)
        self._held: list[tuple[str, bool]] = []
        self.width = width
        self.quiet = quiet
        self.verbose = verbose
        self.clock = clock
        self.on_change = on_change or (lambda: None)
        self.totals = totals
        self.outbox: list[str] = []
        self.live: _Live | None = None
        self._seen_in = 0
        self._seen_out = 0
        self.waiting: str | None = None  # the tool a call waits for the person to approve
        self._blank = True  # the last line printed was blank (or nothing was printed)

    # -- output -----------------------------------------------------------------------
    def emit(self, line: str = "", *, wrap: bool = True) -> None:
        """A line for the scrollback; in full mode, held while a reply streams.
        ``wrap=False``: never broken (a command to paste whole)."""
        if self.stream == "full" and self.live is not None:
            self._held.append((line, wrap))
            self.on_change()
            return
        self._put(line, wrap=wrap)

    def _put(self, line: str = "", *, wrap: bool = True) -> None:
        # broken between words to the width, as replies are: a terminal would cut an
        # id in a notice in two (not to be pasted)
        self.outbox.extend(wrap_styled(line, max(self.width() - 1, 20)) if wrap else [line])
        self._blank = line == ""
        self.on_change()

    def _release(self) -> None:
        held, self._held = self._held, []
        for line, wrap in held:
            self._put(line, wrap=wrap)

    def gap(self) -> None:
        """A blank line, unless the last one was blank already."""
        if not self._blank:
            self._put()

    def info(self, text: str) -> None:
        for line in text.split("\n"):
            self.emit(line)

    def note(self, text: str, *, wrap: bool = True) -> None:
        self.emit(self.palette.dim(text), wrap=wrap)

    def warn(self, text: str) -> None:
        self.emit(self.palette.yellow(f"⚠ {text}"))

    def error(self, text: str) -> None:
        self.emit(self.palette.red(f"✗ {text}"))

    def take_output(self) -> str:
        """Everything not printed yet, as text ending with a newline (or '')."""
        lines, self.outbox = self.outbox, []
        return "".join(line + "\n" for line in lines)

    @property
    def active(self) -> bool:
        return self.live is not None

    def live_out_tokens(self) -> int:
        return self.live.out_tokens if self.live else 0

    def live_lines(self, now: float | None = None) -> list[str]:
        """The live region: lines not printed yet (at most 3), the streamed line, a status."""
        lines = self.outbox[-3:]
        live = self.live
        if live is None:
            return lines
        now = self.clock() if now is None else now
        if live.partial:
            lines.append(self.palette.bar(live.sender) + live.partial)
        frame = _SPINNER[int(now * 10) % len(_SPINNER)]
        elapsed = f"{now - live.started:.1f}s"
        name = self.palette.role(live.sender)
        if self.waiting is not None:  # nothing runs: the call waits for the person
            asks = f"waits for you: run {self.waiting}? y / n / e {{...}} · Ctrl-C refuses"
            status = f"⏸ {name} {self.palette.dim(asks)}"
        elif live.first_token is None:
            status = f"{frame} {name} {self.palette.dim('is thinking · ' + elapsed)}"
        else:
            facts = f"· {elapsed} · ↓{live.out_tokens:,}"
            status = f"{frame} {name} " + self.palette.dim(facts)
            if live.parts:  # preview: the latest words, on this one line
                used = 3 + width_of(live.sender) + width_of(facts) + 3
                status += " " + self.palette.dim(_tail(live.parts, self.width() - used))
        lines.append(status)
        return lines

    # -- streaming --------------------------------------------------------------------
    def _body(self, sender: str, line: str) -> None:
        for piece in wrap_line(line, self.width() - 3):
            self._put(self.palette.bar(sender) + piece)

    def _feed(self, live: _Live, delta: str) -> None:
        live.partial += delta
        while "\n" in live.partial:
            line, live.partial = live.partial.split("\n", 1)
            self._body(live.sender, line)
        limit = max(self.width() - 3, 10)
        while len(live.partial) > limit:
            cut = live.partial.rfind(" ", 0, limit + 1)
            if cut <= 0:
                cut = limit
            self._put(self.palette.bar(live.sender) + live.partial[:cut].rstrip(" "))
            live.partial = live.partial[cut:].lstrip(" ")

    def _end_live(self) -> _Live | None:
        """The reply ends: what is left of it is printed (in preview mode: all of it,
        under its header), then whatever waited for it."""
        live, self.live = self.live, None
        if live is not None and live.header:  # preview: the reply, whole, at once
            self.gap()
            self._put(live.header)
            for line in "".join(live.parts).split("\n"):
                self._body(live.sender, line)
        if live is not None and live.partial:
            self._put(self.palette.bar(live.sender) + live.partial)
            live.partial = ""
        self._release()
        return live

    def _session_totals(self) -> tuple[int, int]:
        return self.totals() if self.totals else (self._seen_in, self._seen_out)

    # -- events (Renderer's dispatch) -------------------------------------------------
    def __call__(self, envelope: Envelope) -> None:
        self.render(envelope)

    def on_sse_chunk(self, envelope: Envelope, event: ev.StreamChunk) -> None:
        live = self.live
        if live is None or live.message_id != event.message_id:
            return
        if live.first_token is None:
            live.first_token = self.clock()
        live.out_tokens = event.output_tokens
        live.text.append(event.delta)
        if live.header:  # preview: held until the reply is complete
            live.parts.append(event.delta)
        else:
            self._feed(live, event.delta)
        self.on_change()

    def on_sse_start(self, envelope: Envelope, event: ev.StreamStart) -> None:
        self._end_live()
        answering = self.answering(event.reply_to)
        p = self.palette
        head = header(
            p,
            event.sender,
            event.target,
            event.step_id,
            event.loop_iteration,
            answering,
            audience=event.audience,
        )
        head += p.dim(self.why_chosen(event.sender))
        self.live = _Live(event.message_id, event.sender, self.clock())
        if self.stream == "full":
            self.gap()
            self._put(head)
        else:
            self.live.header = head

    def on_sse_end(self, envelope: Envelope, event: ev.StreamEnd) -> None:
        p = self.palette
        live = self._end_live()
        if live is not None:  # under a reply citing [kN]: each cited source
            for line in self.citations(live.message_id, "".join(live.text)):
                self.emit(p.dim(line))
        self._seen_in += event.input_tokens
        self._seen_out += event.output_tokens
        if not self.quiet:
            took = f" · {self.clock() - live.started:.1f}s" if live else ""
            self.emit(p.dim(f"  {tokens(event.input_tokens, event.output_tokens)}{took}"))
        self.emit()

    def on_sse_error(self, envelope: Envelope, event: ev.StreamError) -> None:
        self._end_live()
        # named by its draft id: the message id it streamed under goes to the next message
        name = f" ({event.draft_id})" if event.draft_id else ""
        if event.error == "cancelled":
            self.error(
                f"cancelled: {event.sender}'s reply is kept as an incomplete draft{name}, "
                "outside the history"
            )
        else:
            self.error(f"{event.sender}'s reply{name} failed: {event.error}")

    def on_messages_message(self, envelope: Envelope, event: ev.MessageEvent) -> None:
        if event.sender == "system":
            self.gap()
            self.emit(self.palette.yellow(f"⚑ system: {event.content}"))
        elif event.data is not None:  # a structured reply, readably (selection.md)
            from rolecall.export.common import pretty_data

            for line in pretty_data(event.data).splitlines():
                self.emit(self.palette.dim(f"  {line}"))

    def on_messages_tool_result(self, envelope: Envelope, event: ev.ToolResultEvent) -> None:
        self.note(self.tool_result(event))

    def on_system_trim(self, envelope: Envelope, event: ev.TrimEvent) -> None:
        """Text shown and then cut from the live reply (real-models.md): taken back when
        it is still held (a preview, the line not yet printed), else marked."""
        live = self.live
        if live is None or live.message_id != event.message_id or not event.shown:
            return
        text = "".join(live.text)
        live.text = [text[: max(0, len(text) - event.shown)]]
        if live.header:  # preview: shown whole when it ends, as the message
            held = "".join(live.parts)
            live.parts = [held[: max(0, len(held) - event.shown)]]
            return
        if event.shown <= len(live.partial):  # not printed yet
            live.partial = live.partial[: len(live.partial) - event.shown]
            return
        live.partial = ""  # the rest of the cut text
        self._put(self.palette.bar(live.sender) + self.palette.dim(cut_note(event)))

    def on_system_pass(self, envelope: Envelope, event: ev.PassEvent) -> None:
        self.note(f"  ({event.agent} passes the floor to you)")

    def on_system_summary(self, envelope: Envelope, event: ev.SummaryEvent) -> None:
        for line in summary_lines(event, text=self.verbose > 0):
            self.note(line)

    def on_system_respond(self, envelope: Envelope, event: ev.RespondEvent) -> None:
        self.note(f"  {respond_note(event)}")

    def on_system_selection(self, envelope: Envelope, event: ev.SelectionEvent) -> None:
        if event.chosen is None:  # a chosen speaker's reason is on its header line
            self.note(f"  {nobody_note(event)}")

    def on_system_warning(self, envelope: Envelope, event: ev.WarningEvent) -> None:
        self.warn(event.message)

    def on_system_error(self, envelope: Envelope, event: ev.ErrorEvent) -> None:
        if not event.source.startswith("model:"):  # the stream error says it already
            self.error(event.error)

    def on_world_session(self, envelope: Envelope, event: ev.SessionEvent) -> None:
        if event.state == "paused" and event.reason != "quit":
            self.emit(
                self.palette.yellow(f"⏸ paused ({event.reason or 'paused'}) · /resume continues")
            )

    def on_world_stop(self, envelope: Envelope, event: ev.StopEvent) -> None:
        p = self.palette
        self._end_live()
        detail = f" ({event.detail})" if event.detail else ""
        total = tokens(*self._session_totals())
        self.gap()
        self.emit(p.bold(f"■ finished: {event.reason}{detail}") + p.dim(f" · session {total}"))

    def on_system_judge(self, envelope: Envelope, event: ev.JudgeEvent) -> None:
        scores = ", ".join(f"{k} {v:g}" for k, v in event.scores.items())
        invalid = "" if event.valid else " (invalid)"
        self.note(f"  ⚖ {event.judge}: {scores or 'no scores'}{invalid}")

    def on_system_mode(self, envelope: Envelope, event: ev.ModeEvent) -> None:
        self.note(f"  ◆ {event.mode}: {event.name}")

    def on_system_condition(self, envelope: Envelope, event: ev.ConditionEvent) -> None:
        if self.verbose:
            self.note(condition_line(event))

    def on_system_step(self, envelope: Envelope, event: ev.StepEvent) -> None:
        if self.verbose:
            self.note(f"  ↳ #{event.execution_order} {event.step_id}: {event.result}")


def _tail(parts: list[str], width: int) -> str:
    """The end of the text in ``parts`` on one line, at most ``width`` columns (``…``
    before it when cut). Reads only the last pieces: a long reply costs nothing more."""
    width = max(width, 8)
    recent: list[str] = []
    chars = 0
    for piece in reversed(parts):
        recent.append(piece)
        chars += len(piece)
        if chars > 2 * width:
            break
    flat = " ".join("".join(reversed(recent)).split())
    if width_of(flat) <= width and len(recent) == len(parts):
        return flat
    out: list[str] = []
    used = 1  # the ellipsis
    for ch in reversed(flat):
        used += max(width_of(ch), 0)
        if used > width:
            break
        out.append(ch)
    return "…" + "".join(reversed(out))
