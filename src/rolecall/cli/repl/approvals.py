"""Tool calls that wait for the person at the REPL (tools.md, Approval: ``approve: ask``).

:meth:`Approvals.ask` is the session's approver: it shows the call and holds it until
the next typed line answers it (:meth:`Approvals.answer`: ``y`` runs it, ``n`` refuses
it, ``e {...}`` runs it with these arguments) or Ctrl-C refuses it
(:meth:`Approvals.refuse`). While a call waits, :attr:`Approvals.waiting` is that call:
the toolbar and the placeholder say so, and the next line goes to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio

if TYPE_CHECKING:
    from rolecall.cli.repl.display import ReplDisplay
    from rolecall.tools.approval import Decision, PendingCall


class Approvals:
    """The call that waits for an answer (at most one: a turn asks one at a time).

    ``display`` gives the display to show the call and the answers' errors on (``None``
    while none is up); ``changed`` asks for a redraw (the toolbar and the placeholder).
    """

    def __init__(
        self, display: Callable[[], ReplDisplay | None], changed: Callable[[], None]
    ) -> None:
        self._display = display
        self._changed = changed
        # the call, its event, the answer
        self._asking: tuple[PendingCall, anyio.Event, list[Decision]] | None = None

    @property
    def waiting(self) -> PendingCall | None:
        """The call that waits for y / n / e, if one does."""
        return self._asking[0] if self._asking is not None else None

    async def ask(self, call: PendingCall) -> Decision:
        """A call the role must ask for (tools.md, Approval): shown, then held until the
        next line: ``y`` runs it, ``n`` refuses it, ``e {...}`` runs it with these
        arguments (JSON)."""
        from rolecall.tools.approval import Decision

        display = self._display()
        answered: anyio.Event = anyio.Event()
        self._asking = (call, answered, [])
        if display is not None:
            display.waiting = call.tool  # the live line says it waits for you, not "thinking"
            display.warn(
                f"{call.sender} wants to call {call.tool} with "
                f"{json.dumps(call.arguments, ensure_ascii=False)} — "
                "y: run it · n: refuse it · e {...}: run it with these arguments (JSON)"
            )
        self._changed()
        try:
            await answered.wait()
        finally:
            got = self._asking[2] if self._asking is not None else []
            self._asking = None
            if display is not None:
                display.waiting = None
            self._changed()
        if got:
            decision: Decision = got[0]
            return decision
        return Decision("deny", "human", "no answer")

    def answer(self, text: str) -> None:
        """The line typed while a tool call waits: y, n, or e and the arguments."""
        from rolecall.tools.approval import Decision

        assert self._asking is not None
        call, answered, got = self._asking
        display = self._display()
        word = text.strip()
        decision: Decision | None = None
        if word.lower() in ("y", "yes"):
            decision = Decision("allow", "human")
        elif word.lower() in ("n", "no"):
            decision = Decision("deny", "human", f"the person refused {call.tool}")
        elif word[:1].lower() == "e":
            try:
                arguments = json.loads(word[1:].strip() or "null")
            except ValueError as exc:
                arguments, problem = None, f"not JSON ({exc})"
            else:
                problem = "" if isinstance(arguments, dict) else "not a JSON object"
            if isinstance(arguments, dict):
                decision = Decision("allow", "human", arguments=arguments)
            elif display is not None:
                display.error(f"e: the arguments are {problem}; the call still waits")
        elif display is not None:
            display.error("the tool call waits: y, n, or e {...} with its arguments")
        if decision is not None:
            got.append(decision)
            answered.set()

    def refuse(self) -> None:
        """Ctrl-C while a call waits: refused, as ``n``."""
        from rolecall.tools.approval import Decision

        assert self._asking is not None
        call, answered, got = self._asking
        if not answered.is_set():
            got.append(Decision("deny", "human", f"the person refused {call.tool} (Ctrl-C)"))
            answered.set()
            display = self._display()
            if display is not None:
                display.note(f"refused {call.tool} (Ctrl-C)")
