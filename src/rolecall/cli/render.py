"""The one terminal renderer: how a bus event becomes lines, for every terminal display.

:class:`Renderer` is what `run`'s display (:class:`rolecall.cli.display.TerminalDisplay`)
and the REPL's (:class:`rolecall.cli.repl.display.ReplDisplay`) are made of. It shows each
event with its control characters made visible (:func:`shown`), keeps what a later line
needs (a message's text for the ``↩`` quote of a reply, a tool call's arguments for its
result line, the passages a turn was given for its citations) and hands the event to
the display's ``on_<kind>`` method, one per kind of event (:data:`HANDLERS`). A display
writes its lines its own way (streamed or held, to a file or above a prompt) and leaves
out the kinds it does not show; the words of a line common to both come from here.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from collections.abc import Callable

    from pydantic import BaseModel

    from rolecall.bus import (
        ConditionEvent,
        Envelope,
        RespondEvent,
        SelectionEvent,
        SummaryEvent,
        ToolResultEvent,
    )

_E = TypeVar("_E", bound="BaseModel")


@cache
def handlers() -> dict[type[BaseModel], str]:
    """Each event class and the name of the method that shows it (``on_message``, ...).

    Built on first use: the REPL draws its prompt before the event classes load."""
    from rolecall.bus import EVENT_KINDS

    return {cls: "on_" + tag.replace("/", "_") for tag, cls in EVENT_KINDS.items()}


class Renderer:
    """Dispatches bus events to ``on_<topic>_<type>`` methods (``on_sse_start``,
    ``on_messages_message``, ``on_world_stop``, ...); an event whose method the display
    does not define is not shown."""

    def __init__(self) -> None:
        self.said: dict[str, str] = {}  # message id -> its text, shortened (for ↩ quotes)
        self.calls: dict[str, str] = {}  # a tool call's id -> "tool(short arguments)"
        self._asked: dict[str, tuple[str, dict[str, Any]]] = {}  # ... -> the model's call
        # message id -> the passages its turn was given (system/knowledge), by id (k1..)
        self.sources: dict[str, dict[str, dict[str, Any]]] = {}
        self.chosen: dict[str, str] = {}  # speaker -> why it was chosen (system/selection)

    def render(self, envelope: Envelope) -> None:
        """Show one event (an ESC in a reply is shown as ␛, never obeyed)."""
        from rolecall.bus import (
            KnowledgeEvent,
            MessageEvent,
            SelectionEvent,
            ToolApprovalEvent,
            ToolCallEvent,
        )
        from rolecall.export.common import edited_note, short_arguments, snippet

        event = shown(envelope.event)
        if isinstance(event, MessageEvent):  # what a later reply's header may quote
            self.said[event.message_id] = snippet(event.content)
        elif isinstance(event, ToolCallEvent):  # tools.md: one line per call, when it ends
            self.calls[event.call_id] = f"{event.tool}({short_arguments(event.arguments)})"
            self._asked[event.call_id] = (event.tool, event.arguments)
        elif isinstance(event, ToolApprovalEvent) and event.call_id in self._asked:
            tool, asked = self._asked.pop(event.call_id)
            if event.arguments:  # a person's edit: the line shows what ran, and says so
                call = {"arguments": event.arguments, "asked": asked}
                self.calls[event.call_id] = (
                    f"{tool}({short_arguments(event.arguments)}){edited_note(call)}"
                )
        elif isinstance(event, SelectionEvent) and event.chosen is not None:
            self.chosen[event.chosen] = selection_note(event)
        elif isinstance(event, KnowledgeEvent) and event.message_id is not None:
            self.sources[event.message_id] = {p["id"]: p for p in event.passages}
        name = handlers().get(type(event))
        method: Callable[[Envelope, Any], None] | None = getattr(self, name, None) if name else None
        if method is not None:
            method(envelope, event)

    # -- the words both displays use ------------------------------------------------
    def answering(self, reply_to: str | None) -> str | None:
        """``↩ m7 "…"``: the message a reply answers, quoted when it was seen."""
        from rolecall.export.common import answered

        return answered(reply_to, self.said.get(reply_to)) if reply_to else None

    def citations(self, message_id: str, content: str) -> list[str]:
        """Under a message that cites ``[kN]``: each cited passage's source."""
        from rolecall.export.citations import cited

        return [f"  {c.label}" for c in cited(content, self.sources.pop(message_id, None))]

    def why_chosen(self, sender: str) -> str:
        """`` · chosen by ...`` for the header of a speaker a rule chose, else ``""``."""
        note = self.chosen.pop(sender, None)
        return f" · {note}" if note else ""

    def tool_result(self, event: ToolResultEvent) -> str:
        return tool_line(self.calls.pop(event.call_id, event.tool), event)


def shown(event: _E) -> _E:
    """``event`` with the control characters of its texts shown as symbols (``␛`` for
    ESC, see :func:`~rolecall.export.common.visible`): a model's reply printed on a
    terminal cannot move its cursor, retitle or clear it. ``event`` itself when it has
    none (the usual case: one regex search per text field)."""
    from rolecall.export.common import CONTROLS, visible

    changed = {
        name: visible(value)
        for name, value in event.__dict__.items()
        if isinstance(value, str) and CONTROLS.search(value)
    }
    return event.model_copy(update=changed) if changed else event


def tool_line(call: str, event: ToolResultEvent) -> str:
    """One line per tool call: the tool, short arguments, the duration (and the error)."""
    from rolecall.export.common import snippet

    line = f"  ⚙ {call} · {event.duration_ms} ms"
    if event.is_error:
        line += f" · error: {snippet(event.content)}"
    return line


def summary_lines(event: SummaryEvent, *, text: bool = False) -> list[str]:
    """A role's older messages folded into its running summary (knowledge.md, Long
    sessions), as one line; ``text``: the summary under it."""
    from rolecall.export.common import summary_lines as lines

    return lines(event.role, event.from_id, event.to_id, event.text, full=text)


def respond_note(event: RespondEvent) -> str:
    """An agent's decision on a message that addressed nobody, as one line."""
    verb = "will answer" if event.respond else "stays quiet"
    return f"({event.agent} {verb} {event.message_id}: {event.reason})"


def selection_note(event: SelectionEvent) -> str:
    """Who chose the speaker and why, for its header line (selection.md)."""
    from rolecall.export.common import chosen_note

    return chosen_note(event.by, event.answer, event.model is not None)


def nobody_note(event: SelectionEvent) -> str:
    """A choice with no candidate at all, as one line."""
    return "(nobody may speak next: every role just spoke or is at its turn limit)"


def condition_line(event: ConditionEvent) -> str:
    """A flow condition as checked (shown with -v)."""
    mark = "✓" if event.result else "·"
    return f"  {mark} {event.context} {event.condition}: {event.detail}"


def cut_note(event: Any) -> str:
    """The mark under a live reply whose end, already shown, was cut (a ``system/trim``
    with ``shown``): what the stored message leaves out."""
    what = {"repetition": "repeated text", "other_speaker": "another participant's turn"}
    kind = what.get(event.kind, event.kind)
    return f"✂ cut ({kind}): the last {event.shown} characters above are not part of the message"
