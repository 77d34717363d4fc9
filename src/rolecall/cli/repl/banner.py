"""What the REPL says when it opens a session (repl.md): the world's banner, and for a
session loaded or resumed, where it stands and its last message."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from rolecall.cli.palette import Palette, header
from rolecall.cli.repl.views import _count, _shorten
from rolecall.cli.wrap import wrap_line

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.world.models import World


def world_banner(world: World, p: Palette, *, step_mode: bool) -> list[str]:
    """The world's name and title, topic, agents, how its flow or mode runs, the keys;
    then an empty line. The first three lines are the title, topic and agents (the
    topic's line only if it has one)."""
    title = world.title or world.description or world.name
    lines = [p.bold(f"rolecall · {world.name}") + (f" — {title}" if title != world.name else "")]
    if world.topic:
        lines.append(p.dim("topic: ") + world.topic)
    lines.append(p.dim("agents: ") + "  ".join(p.role(r.id, "@" + r.id) for r in world.roles))
    if world.flow is not None or world.mode is not None:
        steps = len(world.flow.steps) if world.flow else 0
        noun = "step" if steps == 1 else "steps"
        what = f"a flow of {steps} {noun}" if world.flow else f"{world.mode} mode"
        enter = " (or Enter)" if step_mode else ""
        lines.append(p.dim(f"{what}: /run runs it, /next{enter} one turn, /flow shows where it is"))
    lines.append(
        p.dim("type a message · @agent for one agent · /help · Ctrl-C cancels · Ctrl-D quits")
    )
    lines.append("")
    return lines


def session_banner(
    session: Session,
    display: ReplDisplay,
    *,
    width: Callable[[], int],
    loaded: bool,
    hint: bool,
    step_mode: bool,
) -> None:
    """The world's banner on ``display``; for a session ``loaded`` (or one that has
    messages) its state and last message after the first three lines, and with ``hint``
    how to continue it if it waits."""
    p = display.palette
    lines = world_banner(session.world, p, step_mode=step_mode)
    for line in lines[:3]:
        display.emit(line)
    said = session.result.messages
    if loaded or said:
        st = session.status
        state = st.state + (f" ({st.pause_reason})" if st.pause_reason else "")
        if st.stop_reason:
            state += f" ({st.stop_reason})"
        display.emit(
            p.dim(f"session {session.session_id}: ") + f"{_count(said, 'message')}, {state}"
        )
        last = session.transcript[-1] if said else None
        if last is not None:
            display.emit(header(p, last.sender, last.target, last.step_id, last.loop_iteration))
            for line in wrap_line(_shorten(last.content, 400), width() - 3):
                display.emit(p.bar(last.sender) + line)
        paused = not session.chat and st.state == "paused" and not session.finished
        if hint and (st.pending or paused):
            display.note("/resume continues where it stopped")
    for line in lines[3:]:
        display.emit(line)
