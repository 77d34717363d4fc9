"""The flow as text (flows.md, The flow view): speaker, reply target, loops, current step.

Pure: a flow (and, for a live session, its pointer and transcript) in, lines out. Used
by the REPL's ``/flow`` and by ``rolecall worlds show``.
"""

from __future__ import annotations

from collections.abc import Callable

from rolecall.flows.conditions import describe
from rolecall.flows.model import (
    Flow,
    ReplyTo,
    ReplyToMessage,
    ReplyToRole,
    ReplyToStep,
    Step,
)
from rolecall.session.state import FlowPointer, Transcript
from rolecall.world.targets import resolve_target

Paint = Callable[[str, str], str]  # (role id, text) -> text as shown


def _plain(_role: str, text: str) -> str:
    return text


def reply_text(reply_to: ReplyTo) -> str:
    """Whom a step answers, in words."""
    if reply_to == "previous":
        return "previous"
    if reply_to == "none":
        return "nobody"
    if isinstance(reply_to, ReplyToRole):
        return f"latest by {reply_to.role}"
    if isinstance(reply_to, ReplyToStep):
        return f"latest of step {reply_to.step}"
    if isinstance(reply_to, ReplyToMessage):
        return reply_to.message
    raise TypeError(f"not a reply target: {reply_to!r}")


def _then(step: Step) -> str:
    if isinstance(step.next, str):
        return f"  then {step.next}"
    if isinstance(step.next, list):
        return "  then " + ", ".join(
            f"{b.goto} if {describe(b.when)}" if b.when is not None else b.goto for b in step.next
        )
    return ""


def flow_lines(
    flow: Flow,
    *,
    pointer: FlowPointer | None = None,
    transcript: Transcript | None = None,
    current: str | None = None,
    paint: Paint = _plain,
) -> list[str]:
    """One head line, then one line per step: mark, id, speaker → reply target, loop.

    With a ``pointer`` (a live session) each step shows how often it ran and each loop
    its counter (n/max); without one (a world file) loops show their max.

    ``current`` marks the step that runs next (▶); with a ``transcript`` that step's
    reply target is resolved to the message it will answer. Steps already run get ✓.
    """
    counts = pointer.exec_counts if pointer is not None else {}
    head = f"flow (start {flow.start_id}"
    if flow.stop:
        head += "; stop when " + " or ".join(describe(c) for c in flow.stop)
    lines = [head + ")"]
    width = max(len(st.id) for st in flow.steps)
    speakers = [st.speaker for st in flow.steps] + ([flow.final.speaker] if flow.final else [])
    swidth = max(len(s) for s in speakers)
    targets = [reply_text(st.reply_to) for st in flow.steps]
    twidth = max(len(t) for t in targets)
    for st, target in zip(flow.steps, targets, strict=True):
        n = counts.get(st.id, 0)
        mark = "▶" if st.id == current else ("✓" if n else " ")
        speaker = paint(st.speaker, f"{st.speaker:<{swidth}}")
        line = f"  {mark} {st.id:<{width}}  {speaker} → {target:<{twidth}}"
        if pointer is not None:
            line += f"  ran {n}×"
        if st.loop is not None:
            counter = f"{n}/{st.loop.max}" if pointer is not None else f"max {st.loop.max}"
            line += f"  loop → {st.loop.to} ({counter})"
            if st.loop.until is not None:
                line += f" until {describe(st.loop.until)}"
        line += _then(st)
        if st.id == current and transcript is not None:
            message, _ = resolve_target(st.reply_to, transcript, st.speaker)
            line += f"  (answers {message.id} by {message.sender})" if message else ""
        lines.append(line.rstrip())
    if flow.final is not None:
        final = flow.final
        speaker = paint(final.speaker, f"{final.speaker:<{swidth}}")
        lines.append(
            f"    {final.id:<{width}}  {speaker} → {reply_text(final.reply_to)}"
            "  (final step, once the flow stops)"
        )
    return lines
