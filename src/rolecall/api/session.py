"""The session a library user holds: run, step, say, pause, stop, its events and result.

:class:`Session` wraps the runtime's session (``rolecall.runtime.Dialogue``, internal)
inside the task group of :func:`rolecall.open_session`. ``events()`` is an async
iterator over the session's typed events in ``seq`` order; it ends with the session
(finished, or the run it drives returned, or the ``async with`` block left) and never
drops an event: what was published before it starts or ends is read out first.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import TYPE_CHECKING, Any, Literal

from anyio.abc import TaskGroup
from pydantic import BaseModel, ConfigDict

from rolecall import runtime
from rolecall.bus import Bus, Envelope, Event, StopEvent
from rolecall.errors import StorageError, UsageError
from rolecall.session.audience import seen
from rolecall.session.state import Draft, TranscriptMessage
from rolecall.storage.document import StateDoc, state_doc
from rolecall.world.models import Role, World

if TYPE_CHECKING:
    from pathlib import Path

    from rolecall.memory import MemoryFiles
    from rolecall.storage.document import SessionDocument
    from rolecall.tools.approval import Approver

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
    turns: int  # the agents' messages: the turns taken
    input_tokens: int
    output_tokens: int
    cost: float | None  # in US dollars; None when a model's price is unknown

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


class Session:
    """A live session (see :func:`rolecall.open_session`)."""

    def __init__(self, inner: runtime.Dialogue, mode: Mode, tg: TaskGroup) -> None:
        self._inner = inner
        self._tg = tg  # open_live's: the session's runs and stores run in it
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
    def world(self) -> World:
        """The world this session runs (its roles, flow, settings)."""
        return self._inner.world

    @property
    def bus(self) -> Bus:
        """The session's event bus (``rolecall.bus.protocol.Bus``): what a sink's
        ``attach(bus)`` is given, to subscribe a handler after the session is open."""
        return self._inner.bus

    @property
    def chat(self) -> bool:
        """A chat world (no flow, no mode): nothing runs by itself, ``say()`` is answered."""
        return self._inner.chat

    @property
    def status(self) -> StateDoc:
        """The control state now, as the session's stored document holds it: ``state``,
        ``stop_reason``, ``pause_reason``, the flow ``pointer``, ``flags``,
        ``turn_counts``, the replies due (``pending``)... A copy: changing it changes
        nothing."""
        return state_doc(self._inner.state)

    @property
    def flags(self) -> frozenset[str]:
        """The flags set (``set_flag()``, a step's ``set_flag``) for ``{flag: NAME}``."""
        return frozenset(self._inner.state.flags)

    def model_name(self, role: Role | str) -> str:
        """The model a role's turns use (its own or the world's; ``model=`` replaces every
        one but ``scripted``). UsageError for a role the world does not have."""
        world = self._inner.world
        if isinstance(role, str):
            if role not in world.role_ids:
                raise UsageError(
                    f"world {world.name!r} has no role {role!r} "
                    f"(roles: {', '.join(world.role_ids)})"
                )
            role = world.role(role)
        return self._inner.model_name(role)

    @property
    def model_override(self) -> str | None:
        """The model every role's turns use but ``scripted`` (``model=``, the REPL's
        ``/model``); None: each role's own. Set it to change the next turns' model."""
        return self._inner.model_override

    @model_override.setter
    def model_override(self, name: str | None) -> None:
        self._inner.model_override = name

    @property
    def approver(self) -> Approver | None:
        """What answers the tool calls a role must ask for (``approve: ask``, tools.md):
        called with each call, it returns whether to run it. None: such calls are refused."""
        return self._inner.approver

    @approver.setter
    def approver(self, approver: Approver | None) -> None:
        self._inner.approver = approver

    @property
    def transcript(self) -> list[TranscriptMessage]:
        """Every message so far, in order (agents', the human's, system messages)."""
        return list(self._inner.state.transcript.messages)

    @property
    def drafts(self) -> list[Draft]:
        """The replies that did not complete (cut by :meth:`interrupt`, or failed), in
        order: their text so far, outside the transcript. A copy."""
        return list(self._inner.state.drafts)

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
            turns=transcript.agent_turns,
            input_tokens=transcript.input_tokens,
            output_tokens=transcript.output_tokens,
            cost=transcript.cost_usd,
        )

    @property
    def finished(self) -> bool:
        return self._inner.finished

    @property
    def busy(self) -> bool:
        """A turn is under way (a reply being generated, or stored)."""
        return self._inner.busy

    @property
    def generating(self) -> bool:
        """A reply is being generated now (what :meth:`interrupt` would cut)."""
        return self._inner.generator.busy

    # -------------------------------------------------------------- driving
    async def begin(self, *, running: bool = False) -> None:
        """Publish and store the opening events (``created``, the agents joining) now,
        before the first turn or message: a reader sees the session before anything is
        said. ``running``: the state ``running`` too (a resumed session going on).
        ``run()``, ``step()`` and ``say()`` do this themselves."""
        await self._inner.begin(running=running)

    async def run(self) -> Result:
        """Run until the session finishes or pauses; a chat answers what is due."""
        if self.chat:
            await self._inner.settle()
        else:
            await self._inner.run()
        return self.result

    async def step(self) -> bool:
        """Exactly one turn; False when there was nothing to run."""
        return await self._inner.step()

    async def say(self, text: str, *, audience: Sequence[str] | None = None) -> TranscriptMessage:
        """A human message: stored, seen by every agent, routed; the replies due follow.

        ``audience``: role ids; only they (and the human) see the message, and only they
        may answer it; their replies stay private to them (audiences.md).

        :class:`rolecall.UsageError` when the session is finished (after ``stop()``, or
        its flow ended), or the audience names a role the world lacks: nothing is added,
        as the command line ignores such a line.
        """
        return await self._inner.say(text, audience)

    def seen_by(self, role: str) -> list[TranscriptMessage]:
        """The messages ``role`` saw, in order (audiences.md); ``"human"``: all of them."""
        inner = self._inner
        if role != "human" and role not in inner.role_ids:
            raise UsageError(
                f"no role {role!r} in world {inner.world.name} (roles: {', '.join(inner.role_ids)})"
            )
        return seen(inner.state.transcript.messages, role, limit=inner.limits.get(role))

    def pause(
        self,
        reason: str | None = None,
        *,
        now: bool = False,
        error: BaseException | str | None = None,
        source: str = "api",
    ) -> None:
        """Pause with ``reason`` (``manual``; ``error`` with ``error``): after the current
        turn, at once when no turn runs; a session already paused keeps its reason. Stored
        when it takes effect. A finished session stays finished.

        ``now=True``: at once, even mid-turn (stored with that turn), and a session already
        paused takes ``reason`` instead of its own, a ``world/session paused`` event saying
        so (the REPL quitting: ``pause("quit", now=True)``).

        ``error``: a failure your program caught around ``run()``, ``step()`` or ``say()``:
        said first as a ``system/error`` event from ``source``, the pause reason ``error``
        in place of a pause asked for. It can be resumed.
        """
        said = None
        if error is not None:
            said = error if isinstance(error, str) else str(error) or type(error).__name__
        if reason is None:
            reason = "manual" if error is None else "error"
        self._inner.pause(reason, now=now, error=said, source=source)
        self._persist()

    def interrupt(self, reason: str = "interrupted") -> bool:
        """Ctrl-C: cut the reply being generated, its text so far kept as a draft (its
        turn pauses the session, reason ``cancelled``), and pause with ``reason`` after the
        current turn (at once when none runs). True when a reply was cut. Stored as
        :meth:`pause` is."""
        cut = self._inner.interrupt(reason)
        self._persist()
        return cut

    def cancel_pause(self) -> bool:
        """Withdraw a :meth:`pause` asked for while a turn runs: the run goes on after
        that turn. True when a pause was waiting for the turn to end."""
        return self._inner.cancel_pause()

    def stop(self) -> None:
        """Finish the session (stop reason ``manual``): after the current turn, or at once."""
        self._inner.stop()
        self._persist()

    def set_flag(self, name: str) -> None:
        """Set flag ``name`` for ``{flag: NAME}`` conditions (the REPL's ``/flag``), stored
        at once (a turn running stores it itself)."""
        self._inner.set_flag(name)
        self._persist()

    def annotate(self, key: str, value: Any) -> None:
        """Keep ``value`` (JSON: a dict, a list, a string, a number...) with the session
        under ``key``: ``status.extra[key]`` reads it back, here and in the stored
        document (``state.extra``), so a resumed session has it too; ``None`` removes it.
        Your program's own notes: the command line keeps there the mode a session was run
        in (``run_mode``). Stored with the session's next change (a turn, a pause, a
        stop...). UsageError for a key the runtime keeps its own state under (a mode's
        name, ``undecided``, ``fork``...)."""
        self._inner.annotate(key, value)

    async def settle(self) -> None:
        """Do what is owed, and nothing more: the replies due, one at a time (a chat's,
        an interjection's; a paused flow stays paused), or, when none is due, the
        decision of a flow step whose message is stored but whose next step is not (a
        fork made at that step's message, sessions.md): its hooks run and the next step
        is chosen, without speaking."""
        inner = self._inner
        state = inner.state
        if not state.pending and state.undecided is not None and not inner.finished:
            await inner.step()
        else:
            await inner.settle()

    def forget(self, agent: str) -> None:
        """Clear ``agent``'s memory of this session (the REPL's ``/clear``): its later
        prompts start after the messages so far, and its turn count since the human last
        spoke is 0 again; stored as :meth:`pause` is. The memory file, when the session
        has one, is the caller's (``rolecall.memory.MemoryFiles.clear`` archives it).
        UsageError for a role the world does not have."""
        world = self._inner.world
        if agent not in world.role_ids:
            raise UsageError(
                f"world {world.name!r} has no role {agent!r} (roles: {', '.join(world.role_ids)})"
            )
        self._inner.forget(agent)
        self._persist()

    def drop_replies(self) -> list[str]:
        """Drop the replies due (not one being generated): nobody gives them. A log event
        says so (``dropped N replies due``), stored as :meth:`pause` is. Who would have
        answered, in order; empty when none was due (nothing is published)."""
        dropped = self._inner.drop_replies()
        if dropped:
            self._persist()
        return dropped

    def request_reply(self, agent: str, message_id: str) -> None:
        """Make ``agent``'s reply to message ``message_id`` the one reply due (replies
        due before are dropped): the next ``run()``, ``step()`` or ``say()`` answers it
        first (a chat's reply; in a flow or a mode an interjection's answer) and stores
        it with that turn. Retry (the REPL's ``/retry``, the web view's) is this on a
        fork made just before the answer asked again.

        UsageError for a finished session, an unknown agent or message.
        """
        self._inner.request_reply(agent, message_id)

    async def save(self) -> None:
        """Store now what changed since the last turn (a pause, a stop, a flag, an error).
        ``pause()``, ``stop()`` and ``set_flag()`` start this themselves; await it to know
        the change is stored. A turn under way stores the change with its own."""
        await self._inner.persist()

    async def flush(self) -> None:
        """Store every event published so far, now, a turn under way included (nothing
        without a store): what reads the store right after (the REPL's ``/fork``,
        ``/branch``, ``/export``) finds this session as it stands."""
        from rolecall.api.compose import flush

        await flush(self._inner)

    async def save_to(self, path: Path, memory: MemoryFiles) -> SessionDocument:
        """Write the session's document (as stored, plus ``memory``'s files) to ``path``
        atomically (``/save``, ``/export json``); a usage error without a store."""
        from rolecall.api.compose import recorder_of, save_to_file

        recorder = recorder_of(self._inner)
        if recorder is None:
            raise UsageError("a session kept in memory has no stored document to save")
        return await save_to_file(self._inner, recorder.store, memory, path)

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
        return not self.chat and not self._inner.busy

    async def _drive(self) -> None:
        try:
            await self._inner.run()
        finally:
            self._driving = False
            self._inner.bus.end_streams()

    async def _close(self, failure: BaseException | None = None) -> None:
        """The ``async with`` block is left: a run still going pauses (``interrupted``), a
        running session between turns (a chat, step mode) pauses (``closed``); readers end.
        Left by a failed write (``failure`` a StorageError), the session is paused with
        reason ``error`` by the composition that stores it (api/compose.py), not here.
        """
        self._closed = True
        inner = self._inner
        if self._driving:
            self.interrupt()
        elif inner.state.state == "running" and not isinstance(failure, StorageError):
            inner.pause("closed")
        self._inner.bus.end_streams()
