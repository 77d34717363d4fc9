"""The session a library user holds: run, step, say, pause, stop, its events and result.

:class:`Session` wraps the runtime's session (``rolecall.runtime.Dialogue``, internal)
inside the task group of :func:`rolecall.open_session`. ``events()`` is an async
iterator over the session's typed events in ``seq`` order; it ends with the session
(finished, or the run it drives returned, or the ``async with`` block left) and never
drops an event: what was published before it starts or ends is read out first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Literal

from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict

from rolecall import runtime
from rolecall.bus import Envelope, Event, StopEvent
from rolecall.session.state import Message

Mode = Literal["auto", "step"]


def _is_stop(envelope: Envelope) -> bool:
    return isinstance(envelope.event, StopEvent)


class Result(BaseModel):
    """How a session ended (or stands): the reason, what was said, what it cost."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    session_id: str
    state: str  # created, running, paused or finished
    stop_reason: str | None  # flows.md's stop reasons; None while not finished
    stop_detail: str = ""
    pause_reason: str | None = None
    messages: int  # messages in the transcript (agents, human and system)
    input_tokens: int
    output_tokens: int
    cost: float | None  # in US dollars; None when a model's price is unknown

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Session:
    """A live session (see :func:`rolecall.open_session`)."""

    def __init__(self, inner: runtime.Dialogue, tg: TaskGroup, mode: Mode) -> None:
        self._inner = inner
        self._tg = tg
        self._mode = mode
        self._driving = False  # a run started by events() is under way
        self._closed = False
        # where the next events() starts: the first event of this opening, then just
        # after the last event an events() iterator gave
        self._next_seq = inner.bus.last_seq + 1

    # -------------------------------------------------------------- reading
    @property
    def session_id(self) -> str:
        return self._inner.session_id

    @property
    def runtime(self) -> runtime.Dialogue:
        """The runtime session underneath (internal API: it may change between versions)."""
        return self._inner

    @property
    def transcript(self) -> list[Message]:
        """Every message so far, in order (agents', the human's, system messages)."""
        return list(self._inner.state.transcript.messages)

    @property
    def result(self) -> Result:
        state = self._inner.state
        transcript = state.transcript
        return Result(
            session_id=self.session_id,
            state=state.state,
            stop_reason=state.stop_reason,
            stop_detail=state.stop_detail,
            pause_reason=state.pause_reason,
            messages=len(transcript),
            input_tokens=transcript.input_tokens,
            output_tokens=transcript.output_tokens,
            cost=transcript.cost_usd,
        )

    @property
    def finished(self) -> bool:
        return self._inner.finished

    # -------------------------------------------------------------- driving
    async def run(self) -> Result:
        """Run until the session finishes or pauses; a chat answers what is due."""
        inner = self._inner
        if inner.engine is None and inner.director is None:
            await inner.settle()
        else:
            await inner.run()
        return self.result

    async def step(self) -> bool:
        """Exactly one turn; False when there was nothing to run."""
        return await self._inner.step()

    async def say(self, text: str) -> Message:
        """A human message: stored, seen by every agent, routed; the replies due follow.

        :class:`rolecall.UsageError` when the session is finished (after ``stop()``, or
        its flow ended): nothing is added, as the command line ignores such a line.
        """
        return await self._inner.say(text)

    def pause(self, reason: str = "manual") -> None:
        """Pause after the current turn (at once when no turn is running)."""
        self._inner.pause(reason)
        self._persist()

    def stop(self) -> None:
        """Finish the session (stop reason ``manual``): after the current turn, or at once."""
        self._inner.stop()
        self._persist()

    def set_flag(self, name: str) -> None:
        """Set flag ``name`` for ``{flag: NAME}`` conditions (the REPL's ``/flag``), stored
        at once (a turn running stores it itself)."""
        self._inner.set_flag(name)
        self._persist()

    def _persist(self) -> None:
        """Store the change at once (a turn running stores it itself, when it ends)."""
        if not self._closed:
            self._tg.start_soon(self._inner.persist, name=f"persist {self.session_id}")

    # --------------------------------------------------------------- events
    async def events(self) -> AsyncIterator[Event]:
        """The session's typed events, in ``seq`` order, until the session ends.

        The first ``events()`` starts with the first event of this opening (``created``
        and the agents joining for a new session) even when it is called after
        ``step()`` or ``say()``: what was published before the call is read first (from
        the bus's history of the last 5,000 events). A later ``events()`` starts after
        the last event an earlier one gave, so nothing is read twice.

        In ``auto`` mode, iterating the events of a flow (or mode) world runs it: the
        iterator ends when that run returns (finished or paused). Otherwise it ends when
        the session finishes or the ``async with`` block is left.
        """
        async for envelope in self.envelopes():
            yield envelope.event

    async def envelopes(self) -> AsyncIterator[Envelope]:
        """Like :meth:`events`, each event in its envelope (``seq``, ``session_id``, ``ts``)."""
        bus = self._inner.bus
        with bus.open_stream(until=_is_stop, since=self._next_seq) as stream:
            if self._closed or self._inner.finished:
                bus.end_streams()
            elif self._mode == "auto" and not self._driving and self._drives_itself():
                self._driving = True
                self._tg.start_soon(self._drive, name=f"run {self.session_id}")
            async for envelope in stream:
                self._next_seq = max(self._next_seq, envelope.seq + 1)
                yield envelope

    def _drives_itself(self) -> bool:
        inner = self._inner
        return (inner.engine is not None or inner.director is not None) and not inner.busy

    async def _drive(self) -> None:
        try:
            await self._inner.run()
        finally:
            self._driving = False
            self._inner.bus.end_streams()

    async def _close(self) -> None:
        """The ``async with`` block is left: a run still going pauses (``interrupted``), a
        running session between turns (a chat, step mode) pauses (``closed``); readers end.
        """
        self._closed = True
        inner = self._inner
        if self._driving:
            inner.cancel_generation()
            inner.pause("interrupted")
        elif inner.state.state == "running":
            inner.pause("closed")
        self._inner.bus.end_streams()
