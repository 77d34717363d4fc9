"""The REPL's bottom toolbar: what it says (:func:`status_parts`, read from the session
on every redraw) and how it fits the terminal's width (:func:`fit_toolbar`, pure,
measured with wcwidth).

World · session · status · step and its counters · model override · tokens · hint. What
must stay visible is the status, the tokens and the hint; when the line is too wide the
step counters are shortened first, then dropped, then the session id is cut to a prefix
(prefixes are accepted wherever an id is), then the world name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rolecall.cli.wrap import width_of
from rolecall.money import money

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.repl.display import ReplDisplay

SEP = " │ "

Fragments = list[tuple[str, str]]


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` columns, ending with ``…`` when cut."""
    if width_of(text) <= width:
        return text
    out, used = "", 0
    for ch in text:
        w = max(width_of(ch), 0)
        if used + w > width - 1:
            break
        out, used = out + ch, used + w
    return out + "…"


@dataclass
class ToolbarParts:
    world: str
    session: str
    status: str
    step: str = ""
    counters: str = ""
    model: str = ""
    tokens: str = ""
    hint: str = "/help"

    def fragments(self) -> Fragments:
        sep = ("class:bottom-toolbar.hint", SEP)
        out: Fragments = [("class:bottom-toolbar.key", f" {self.world}")]
        if self.session:
            out += [sep, ("", self.session)]
        out += [sep, ("class:bottom-toolbar.state", self.status)]
        if self.step:
            out += [sep, ("", self.step)]
            if self.counters:
                out.append(("class:bottom-toolbar.hint", "  " + self.counters))
        if self.model:
            out += [sep, ("class:bottom-toolbar.state", self.model)]
        if self.tokens:
            out += [sep, ("", self.tokens)]
        out += [sep, ("class:bottom-toolbar.hint", self.hint + " ")]
        return out

    def width(self) -> int:
        return sum(width_of(text) for _, text in self.fragments())


def fit_toolbar(parts: ToolbarParts, columns: int) -> Fragments:
    """``parts`` as toolbar fragments at most ``columns`` wide, shortening the least
    important parts first (status, tokens and hint are kept whole)."""
    columns = max(columns - 1, 20)  # the last column would wrap on some terminals
    over = parts.width() - columns
    if over > 0 and parts.counters:
        keep = width_of(parts.counters) - over
        parts.counters = clip(parts.counters, keep) if keep >= 8 else ""
        over = parts.width() - columns
    if over > 0 and parts.session:
        keep = width_of(parts.session) - over
        parts.session = clip(parts.session, keep) if keep >= 9 else ""
        over = parts.width() - columns
    if over > 0 and parts.model:
        parts.model = clip(parts.model, max(width_of(parts.model) - over, 8))
        over = parts.width() - columns
    if over > 0:
        parts.world = clip(parts.world, max(width_of(parts.world) - over, 4))
    return parts.fragments()


def starting_toolbar(world: str) -> Fragments:
    """The toolbar while the session still opens."""
    return [("class:bottom-toolbar.key", f" {world}"), ("", " │ starting…")]


def status_parts(
    session: Session,
    display: ReplDisplay,
    *,
    waiting: str | None,
    pausing: bool,
    jobs: int,
    armed: bool,
    step_mode: bool,
) -> ToolbarParts:
    """What the toolbar says of ``session`` now.

    ``waiting``: the tool whose call waits for y / n / e; ``pausing``: a pause is asked
    for while a turn still runs; ``jobs``: how many jobs run; ``armed``: a second Ctrl-C
    would quit; ``step_mode``: Enter runs the next turn.
    """
    st = session.status  # a copy, and the result: a few microseconds each redraw
    if waiting is not None:
        return ToolbarParts(
            world=session.world.name,
            session=session.session_id,
            status=f"a call waits: {waiting} (y / n / e)",
        )
    if pausing and (jobs or session.busy):
        status = "pausing…"
    elif display.active and session.generating:
        status = "generating"
    elif jobs:
        status = "running"
    elif st.state in ("created", "running"):
        status = "ready"  # nothing runs: waiting for you
    else:
        status = st.state
    if st.state == "paused" and st.pause_reason and not jobs:
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
    if armed:
        parts.hint = "Ctrl-C again to quit"
    elif step_mode and flow is not None and not session.finished:
        parts.hint = "Enter: next turn · /help"
    else:
        parts.hint = "/help"
    return parts
