"""A running session: flows, interjections and chat turns, one generation at a time.

:class:`Dialogue` (a session, live in this process; the public API wraps it in
:class:`rolecall.Session`) wires a world to the bus, the models, the pure flow engine and the
routing rules. Every turn runs under one lock, so exactly one generation happens at a
time whatever drives the session (auto run, step mode, chat, an API caller). State
changes are published as events; a message is handed to the commit hooks (storage)
before its ``messages/message`` event is published.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

import anyio

from rolecall import chat, turns
from rolecall.bus import (
    AgentEvent,
    Bus,
    ErrorEvent,
    Event,
    EventBus,
    LogEvent,
    MessageEvent,
    SessionEvent,
    StopEvent,
    WarningEvent,
    utc_now,
)
from rolecall.calls import RequestHook, call_model
from rolecall.errors import ConditionTimeout, UsageError
from rolecall.floor import Agent, Floor, respond
from rolecall.floor.selector import restore_usage
from rolecall.flows.conditions import ConditionContext
from rolecall.flows.engine import FlowEngine
from rolecall.generation import Generated, Generator
from rolecall.llm.hygiene import CUT_REASONS
from rolecall.llm.registry import ModelRegistry
from rolecall.log import get_logger
from rolecall.modes.install import install as install_modes
from rolecall.plans import Director, DriverSite, MessageHook, Next, Spoken, Stop, TurnPlan
from rolecall.routing import find_mentions
from rolecall.session import stalls
from rolecall.session.audience import can_see, latest_seen
from rolecall.session.ids import new_session_id
from rolecall.session.state import (
    Concluding,
    PendingReply,
    SenderKind,
    SessionState,
    State,
    TranscriptMessage,
)
from rolecall.tools.approval import Approver
from rolecall.tools.box import ToolBox
from rolecall.tools.turn import FenceHook
from rolecall.world.models import Role, World

if TYPE_CHECKING:  # imported when a world has knowledge (start-up stays lean)
    from rolecall.knowledge.base import KnowledgeBase
    from rolecall.knowledge.summary import Summary

log = get_logger(__name__)

CommitHook = Callable[[TranscriptMessage], Awaitable[None]]
TurnHook = Callable[["Dialogue"], Awaitable[None]]


CUT_FINISHES = ("length", *CUT_REASONS)  # a cut reply says why on its message


class TurnRecorder(Protocol):
    """What writes a session to its store as it runs, one transaction per turn
    (:class:`rolecall.storage.recorder.Recorder`, over any store)."""

    async def commit(self, session: Dialogue) -> None:
        """One transaction: the events stamped since the last one, new messages, state."""
        ...


class Dialogue:
    """One session of a world. Create it, then ``run()``, ``step()`` or ``say()``."""

    def __init__(
        self,
        world: World,
        *,
        state: SessionState | None = None,
        session_id: str | None = None,
        models: ModelRegistry | None = None,
        bus: Bus | None = None,
        model_override: str | None = None,
        clock: Callable[[], datetime] = utc_now,
        restored: bool = False,
    ) -> None:
        """``restored``: the session was stored before (its ``state`` read back), so
        opening it announces nothing (no ``created``, no agent ``joined``)."""
        self.world = world
        self.clock = clock
        self.state = state or SessionState(session_id or new_session_id(clock))
        self.bus: Bus = bus or EventBus(self.state.session_id, clock=clock)
        self.models = models or ModelRegistry()
        self.model_override = model_override
        self.engine = FlowEngine(world.flow) if world.flow is not None else None
        if self.engine is not None:
            _check_pointer(self.engine, self.state)
        self.generator = Generator(self.bus)
        # every role takes part through the bus; the floor grants them turns one at a time
        self.floor = Floor(world.role_ids)
        # audiences.md: each role's `sees:` list (roles without one are not in it)
        self.limits = {r.id: frozenset(r.sees) for r in world.roles if r.sees is not None}
        self.agents = {
            rid: Agent(
                rid,
                world.role_ids,
                self.floor,
                respond_check=self._respond_check(world.role(rid)),
                limit=self.limits.get(rid),
            )
            for rid in world.role_ids
        }
        for agent in self.agents.values():
            agent.attach(self.bus)
        self.ctx = ConditionContext(self.state.transcript, self.state.flags)
        self.commit_hooks: list[CommitHook] = []
        self.turn_hooks: list[TurnHook] = []
        # before a model is asked for a message (its prompt built; not for a repeatable
        # model, see ChatModel): the NATS transport waits there until the stream holds
        # every turn before it
        self.request_hooks: list[RequestHook] = []
        # before every model request and every tool call, whatever the model: the session
        # is still this process's to run (a NATS worker's lease, nats.md); raise otherwise
        self.fence_hooks: list[FenceHook] = []
        self.message_hooks: list[MessageHook] = []  # after a flow/director turn's message
        self.director: Director | None = None
        # a preset may word the closing step from what was said (e.g. message ids to cite)
        self.final_instruction: Callable[[DriverSite], str | None] | None = None
        self.recorder: TurnRecorder | None = None  # set by the composition root
        self.tools: ToolBox | None = None  # tools.md: set by the composition root
        self.approver: Approver | None = None  # answers `approve: ask` calls (None: deny)
        # the world's knowledge collections, indexed: set by the composition root
        # (api/compose.py) when the world has any (knowledge.md)
        self.knowledge: KnowledgeBase | None = None
        # each role's running summary (knowledge.md, Long sessions); a resumed session's
        # from its stored system/summary events
        self.summaries: dict[str, Summary] = {}
        self.ctx.judge_scores = self.state.judge_scores
        if restored:  # the selector's calls count in the totals (selection.md)
            restore_usage(self.state)
        self._lock = anyio.Lock()
        self._running = False
        self._pause_requested: str | None = None
        self._stop_requested = False
        self._opened = restored
        self._persisted = self.bus.last_seq  # every event up to it went through the turn hooks
        self.role_ids = world.role_ids  # computed once: the world is immutable
        self.system_texts: dict[str, str] = {}  # each role's system prompt, once built
        self.log = log.bind(session=self.state.session_id, world=world.name)
        if _uses_modes(world):
            install_modes(self)

    def _respond_check(self, role: Role) -> Callable[[str], Awaitable[bool]] | None:
        """The agent's own decision on messages that address nobody, when it asks for one."""
        if role.respond is None or not role.respond.ask_model:
            return None

        async def check(message_id: str) -> bool:
            if self.flow_active:  # a flow admits direct addresses only (flows.md)
                return False
            message = self.state.transcript.by_id[message_id]
            return await respond.decide(self, role, message)

        return check

    # ------------------------------------------------------------------ state
    def sees(self, role_id: str, message: TranscriptMessage) -> bool:
        """Whether ``role_id`` sees ``message`` (audiences.md; the human sees all)."""
        return can_see(role_id, message, self.limits.get(role_id))

    @property
    def session_id(self) -> str:
        return self.state.session_id

    @property
    def finished(self) -> bool:
        return self.state.state == "finished"

    @property
    def busy(self) -> bool:
        """A turn is in progress (generating or storing)."""
        return self._lock.locked()

    @property
    def chat(self) -> bool:
        """A chat world (no flow, no director): nothing runs by itself, messages are answered."""
        return self.engine is None and self.director is None

    @property
    def flow_active(self) -> bool:
        """A flow (or director) has started and not finished: human messages interject."""
        driven = self.engine is not None or self.director is not None
        return driven and self.state.pointer.started and not self.finished

    def open(self) -> None:
        """Announce a new session (``created``, agents joined); no-op when resumed."""
        for event in self._opening():
            self.bus.publish(event)

    def _opening(self) -> list[Event]:
        """The events announcing a new session, once (none for a resumed one)."""
        if self._opened:
            return []
        self._opened = True
        if self.state.state != "created" or self.bus.last_seq != 0:
            return []
        joined = [AgentEvent(agent=role.id, action="joined") for role in self.world.roles]
        return [SessionEvent(state="created"), *joined]

    async def begin(self, *, running: bool = False) -> None:
        """:meth:`open`, and the state ``running`` when ``running``, stored before anyone
        sees them (as a turn's events are): a crash during the first generation loses
        none of the events a reader already saw (sessions.md, How a turn is written)."""
        events = self._opening()
        if running and not self.finished and self.state.state != "running":
            self.state.state = "running"
            self.state.pause_reason = None
            events.append(SessionEvent(state="running"))
        if events:
            async with self._lock:
                await self.emit(events)

    def _set_state(self, new: State, reason: str | None = None) -> None:
        if self.state.state == new:
            return
        self.state.state = new
        self.state.pause_reason = reason if new == "paused" else None
        self.bus.publish(SessionEvent(state=new, reason=reason))

    def finish(self, reason: str, detail: str) -> None:
        """Finish the session: ``detail`` says which rule decided it (every stop has one)."""
        if self.finished:
            return
        self.state.stop_reason = reason
        self.state.stop_detail = detail
        self.state.pending.clear()
        self._set_state("finished", reason)
        self.bus.publish(StopEvent(reason=reason, detail=detail))
        self.log.info("session_finished", reason=reason, detail=detail)

    def pause_now(self, reason: str) -> None:
        """Pause at once, even mid-turn (a failed or cut generation, a pause asked for
        coming due); a session already paused keeps its reason, a finished one stays
        finished. The runtime's own: callers use :meth:`pause` (``now=True``)."""
        if not self.finished:
            self._set_state("paused", reason)

    def model_name(self, role: Role) -> str:
        name = self.world.model_for(role)
        if self.model_override and name != "scripted":
            return self.model_override
        return name

    # --------------------------------------------------------------- control
    def pause(
        self,
        reason: str = "manual",
        *,
        now: bool = False,
        error: str | None = None,
        source: str = "api",
    ) -> None:
        """Pause after the current turn (at once when no turn is running); a session
        already paused keeps its reason, a finished one stays finished.

        ``now``: at once, even mid-turn, and a session already paused takes ``reason``
        instead of its own (a ``world/session paused`` event says so). ``error``: a
        failure the caller caught, said first as a ``system/error`` event from
        ``source``; a pause asked for before gives way to this one.
        """
        if self.finished:
            return
        if error is not None:
            self._pause_requested = None
            self.bus.publish(ErrorEvent(error=error, source=source))
        if not now and (self._lock.locked() or self._running):
            self._pause_requested = reason
        elif self.state.state != "paused":
            self._set_state("paused", reason)
        elif now and self.state.pause_reason != reason:
            self.state.pause_reason = reason
            self.bus.publish(SessionEvent(state="paused", reason=reason))

    def interrupt(self, reason: str = "interrupted") -> bool:
        """Ctrl-C: cut the reply being generated (its text so far kept as a draft, the
        session paused by its turn with reason ``cancelled``) and pause with ``reason``
        after the current turn (at once when none runs). True when a reply was cut."""
        cut = self.generator.cancel()
        self.pause(reason)
        return cut

    def cancel_pause(self) -> bool:
        """Withdraw a pause asked for during the current turn; True if one was pending."""
        requested, self._pause_requested = self._pause_requested, None
        return requested is not None

    def stop(self, reason: str = "manual", detail: str = "stopped by the user") -> None:
        """Finish the session: after the current turn, or at once when idle.

        Stored with the turn, or by :meth:`persist` (which ``run``/``step``/``settle`` end
        with) when the session was idle: a caller outside a run awaits it.
        """
        if self._lock.locked() or self._running:
            self._stop_requested = True
        else:
            self.open()
            self.finish(reason, detail)

    def forget(self, agent: str) -> None:
        """Clear an agent's memory: later prompts start after this point; its turn count is 0."""
        self.world.role(agent)  # KeyError for an unknown agent
        self.state.memory_start[agent] = len(self.state.transcript)
        self.state.turn_counts.pop(agent, None)
        self.bus.publish(AgentEvent(agent=agent, action="edited"))
        self.bus.publish(LogEvent(message=f"memory of {agent} cleared", data={"agent": agent}))

    def set_flag(self, name: str) -> None:
        self.state.flags.add(name)
        self.bus.publish(LogEvent(message=f"flag {name} set", data={"flag": name}))

    def drop_replies(self) -> list[str]:
        """Drop the replies due (not one being generated), said by a log event; who
        would have answered them, in order (nothing is published when none was due)."""
        pending = self.state.pending
        dropped = [item.agent for item in pending]
        if dropped:
            pending.clear()
            self.bus.publish(
                LogEvent(message=f"dropped {len(dropped)} replies due", data={"agents": dropped})
            )
        return dropped

    def request_reply(self, agent: str, message_id: str) -> None:
        """Make ``agent``'s reply to ``message_id`` the one reply due (a chat's reply, in
        a flow or a mode an interjection's answer). UsageError for a finished session, an
        unknown agent or message."""
        if self.finished:
            raise UsageError(f"session {self.session_id} is finished: it owes no reply")
        if agent not in self.role_ids:
            raise UsageError(
                f"world {self.world.name!r} has no role {agent!r} "
                f"(roles: {', '.join(self.role_ids)})"
            )
        if message_id not in self.state.transcript.by_id:
            raise UsageError(f"session {self.session_id} has no message {message_id!r}")
        kind = "chat" if self.chat else "interjection"
        self.state.pending = [PendingReply(agent=agent, message_id=message_id, kind=kind)]

    def annotate(self, key: str, value: Any) -> None:
        """Keep the caller's ``value`` in ``state.extra[key]`` (``None`` removes it).
        UsageError for a key the runtime keeps its own state under."""
        from rolecall.mode_registry import BUILTIN
        from rolecall.storage.fork import TRANSIENT

        if key in TRANSIENT or key in BUILTIN:
            raise UsageError(f"{key!r} is the runtime's own key in the session's state.extra")
        if value is None:
            self.state.extra.pop(key, None)
        else:
            self.state.extra[key] = value

    # ------------------------------------------------------------------ runs
    async def run(self) -> None:
        """Auto mode: turns until the session finishes, pauses, or has nothing to do."""
        if self.finished:
            self.open()
            return
        self._pause_requested = None
        await self.begin(running=True)
        self._running = True
        try:
            while self.state.state == "running":
                if self._check_requests():
                    break
                if not await self._turn():
                    break
            self._check_requests()
        finally:
            self._running = False
        await self.persist()  # a stop or pause asked for during the last turn

    async def step(self) -> bool:
        """Step mode: exactly one turn. Returns False when there was nothing to run."""
        if self.finished:
            self.open()
            return False
        await self.begin(running=True)
        done = await self._turn()
        self._check_requests()
        await self.persist()
        return done

    async def settle(self) -> None:
        """Answer every reply that is due (chat), one at a time.

        A paused flow (or mode) stays paused: the replies due (an interjection) are
        answered, then it is paused again, with its reason, as nothing of it runs.
        """
        held = self.state.pause_reason if self.state.state == "paused" else None
        await self.begin(
            running=bool(self.state.pending) and self.state.state in ("created", "paused")
        )
        while self.state.pending and self.state.state == "running":
            if self._check_requests():
                break
            if not await self._turn(pending_only=True):
                break
        self._check_requests()  # a pause or stop asked for during the last reply
        flow = self.engine is not None or self.director is not None
        if held is not None and flow and self.state.state == "running":
            self.pause_now(held)
        await self.persist()

    def _check_requests(self) -> bool:
        if self._stop_requested:
            self._stop_requested = False
            self.finish("manual", "stopped by the user")
            return True
        if self._pause_requested:
            reason, self._pause_requested = self._pause_requested, None
            self.pause_now(reason)
            return True
        return False

    async def _turn(self, *, pending_only: bool = False) -> bool:
        """One turn: ask the drivers for the next node, then run plans until none follows."""
        async with self._lock:
            if self.finished:
                return False
            try:
                due, node = await self._next(pending_only=pending_only)
                if not due:
                    return False
                while node is not None:
                    if isinstance(node, Stop):
                        node = turns.conclude(self, node)
                        continue
                    spoken = await self.speak(node)
                    node = await node.then(spoken) if node.then is not None else None
            except ConditionTimeout:  # the world's pattern, not the turn: nothing is lost
                self.pause_now("error")
                await self._after_turn()
                raise
            await self._after_turn()
            return True

    async def _after_turn(self) -> None:
        """The turn hooks (the store, the session file, a transport's stream), under the lock."""
        self._persisted = self.bus.last_seq
        for hook in self.turn_hooks:
            await hook(self)

    async def persist(self) -> None:
        """Store now what changed since the last turn: a stop, a pause, a flag...

        Every transition is an event and is stored as it happens: a turn stores its own
        (and whatever was published while it ran), and a change made between turns (an
        idle ``stop()`` or ``pause()``, a run's last requests) is stored here, through the
        same turn hooks. Nothing is done when no event was published since, or while a
        turn runs (it stores the change with its own).
        """
        if self.bus.last_seq == self._persisted:
            return
        try:
            self._lock.acquire_nowait()
        except anyio.WouldBlock:
            return
        try:
            await self._after_turn()
        finally:
            self._lock.release()
        if not self._running and self._check_requests():  # asked for while the hooks ran
            await self.persist()

    def storage_failed(self, error: str) -> None:
        """A write failed (the store, a memory file, the session file): said as a
        ``system/error`` event, and the session paused with reason ``error`` (unless it
        finished), as a model failure does. The composition root stores both on the way
        out when the store itself can still be written."""
        self.bus.publish(ErrorEvent(error=error, source="store"))
        self.pause_now("error")

    async def _next(self, *, pending_only: bool) -> tuple[bool, Next]:
        """Whether a turn is due, and its first node: a due reply first, then the flow
        (an interrupted decision, the final step, the next step) or the director."""
        if self.state.pending:
            return True, await chat.next_pending(self)
        if pending_only:
            return False, None
        if self.engine is not None and (self.state.undecided or self.state.concluding):
            return True, await turns.resume_flow(self, self.engine)
        if self.director is not None:
            return True, turns.director_plan(self, self.director)
        if self.engine is not None:
            return True, await turns.flow_next(self, self.engine)
        return False, None

    # ------------------------------------------------------------- messages
    def _message(
        self,
        sender: str,
        kind: SenderKind,
        content: str,
        *,
        target: TranscriptMessage | None = None,
        step_id: str | None = None,
        loop_iteration: int | None = None,
        generated: Generated | None = None,
        audience: Sequence[str] | None = None,
    ) -> TranscriptMessage:
        transcript = self.state.transcript
        known = set(self.role_ids) | {"human", "all"}
        return TranscriptMessage(
            id=transcript.next_id(),
            sender=sender,
            kind=kind,
            content=content,
            reply_to=target.id if target else None,
            target=target.sender if target else None,
            mentions=[m for m in find_mentions(content) if m in known],
            step_id=step_id,
            loop_iteration=loop_iteration,
            turn=transcript.agent_turns + (1 if kind == "agent" else 0),
            input_tokens=generated.input_tokens if generated else 0,
            output_tokens=generated.output_tokens if generated else 0,
            cost_usd=generated.cost_usd if generated else None,
            seconds=generated.seconds if generated else 0.0,
            ts=self.clock(),
            tool_calls=generated.tool_calls if generated else [],
            audience=list(audience) if audience is not None else None,
            data=generated.data if generated else None,
            data_error=generated.data_error if generated else None,
            finish_reason=(
                generated.finish_reason
                if generated is not None and generated.finish_reason in CUT_FINISHES
                else None
            ),
        )

    async def speak(self, plan: TurnPlan) -> Spoken:
        """The one turn primitive: call (or take the plan's text), build, store, publish.

        ``plan.decide`` runs once the message is in the transcript (conditions see it)
        and returns the events of that decision; they are stored in the same
        transaction and published right after the message's event.
        """
        started = self.clock()
        generated: Generated | None = None
        text = plan.text
        target = plan.target
        private = target is not None and (target.audience is not None or self.limits)
        if private and target is not None and not self.sees(plan.speaker, target):
            # a message it never saw is not quoted to it (audiences.md): it answers the
            # latest message it did see
            seen = latest_seen(
                self.state.transcript.messages, plan.speaker, 1, limit=self.limits.get(plan.speaker)
            )
            target = seen[0] if seen else None
        audience = plan.audience
        if audience is None and plan.inherit and target is not None:
            audience = tuple(target.audience) if target.audience is not None else None
        if text is None:
            generated = await call_model(
                self,
                self.world.role(plan.speaker),
                target,
                step_id=plan.step_id,
                loop_iteration=plan.loop_iteration,
                instruction=plan.instruction,
                finish_on_budget=plan.finish_on_budget,
                audience=audience,
            )
            if generated is None:
                return Spoken(None, generated=False)
            text = generated.text if plan.shape is None else plan.shape(generated.text)
            if text is None:
                return Spoken(None, generated=True)
        kind: SenderKind = "agent"
        if plan.speaker == "human":
            kind = "human"
        elif plan.speaker == "system":
            kind = "system"
        message = self._message(
            plan.speaker,
            kind,
            text,
            target=target,
            step_id=plan.step_id,
            loop_iteration=plan.loop_iteration,
            generated=generated,
            audience=audience,
        )
        if plan.begin and plan.step_id is not None:
            self.state.pointer.begin(plan.step_id)
        # stalls watch what models write; a scripted role says its world's own lines,
        # and a repeat there is its author's (real-models.md, Stalls)
        watched = (
            generated is not None
            and plan.watched
            and kind == "agent"
            and self.model_name(self.world.role(plan.speaker)) != "scripted"
        )
        stall = stalls.assess(self.state.transcript.messages, message) if watched else None
        self.state.transcript.add(message)
        events: list[Event] = [MessageEvent.of(message.id, message)]
        if stall is not None:
            events.append(WarningEvent(message=self._stall_notice(stall)))
        if plan.decide is not None:
            events.extend(plan.decide(message, started))
        stalled = stall is not None and stall.stalled
        detail = stall.detail() if stall is not None and stall.stalled else ""
        if stalled and self.engine is not None and self.state.concluding is None:
            self.state.concluding = Concluding(stalls.STALLED, detail)  # after a final step
        await self.emit(events, message)
        if stalled and self.engine is None and self.director is not None:
            self.finish(stalls.STALLED, detail)
        return Spoken(message, generated=generated is not None, stalled=stalled)

    def _stall_notice(self, stall: stalls.Stall) -> str:
        """The ``system/warning`` of a near reply (real-models.md, Stalls)."""
        text = stall.near.describe()
        if not stall.stalled:
            return text
        if self.engine is not None or self.director is not None:
            return f"{text}; the second such reply in a row: the run stops ({stalls.STALLED})"
        return f"{text}; the second such reply in a row: the exchange ends, over to the human"

    async def emit(self, events: list[Event], message: TranscriptMessage | None = None) -> None:
        """Stamp; store (one transaction), then run the commit hooks (memory files); deliver.

        The store is the source of truth and goes first: a memory file that missed a
        stored message (disk full) is completed when the session is resumed.
        """
        envelopes = [self.bus.stamp(e) for e in events]
        if self.recorder is not None:
            await self.recorder.commit(self)
        if message is not None:
            for hook in self.commit_hooks:
                await hook(message)
        self.bus.deliver(*envelopes)

    async def say(self, text: str, audience: Sequence[str] | None = None) -> TranscriptMessage:
        """A human message: stored, seen by every agent (or only by ``audience``, role
        ids: audiences.md), routed among those who see it (chat.md / flows.md).

        A finished session takes no message: UsageError, the transcript untouched (also
        when the turn this call waited for finished it). So does an audience naming no
        role of the world.
        """
        self._refuse_finished()
        heard = self.check_audience(audience)
        # a chat runs from its first message on
        await self.begin(running=self.chat and self.state.state == "created")
        async with self._lock:
            self._refuse_finished()
            message = await chat.human_turn(self, text, heard)
        if not self._running:
            await self.settle()
            if self.state.concluding is not None and not self.finished:
                await self.step()  # a stop the human's message made hold
        return message

    def check_audience(self, audience: Sequence[str] | None) -> tuple[str, ...] | None:
        """``audience`` as a message stores it (each role once, in the order given), or
        UsageError naming what is not a role of the world."""
        if audience is None:
            return None
        if isinstance(audience, str):
            audience = [audience]
        named = tuple(dict.fromkeys(a.strip().removeprefix("@") for a in audience))
        if not named:
            raise UsageError("an audience names at least one role; the message was not added")
        unknown = [a for a in named if a not in self.role_ids]
        if unknown:
            raise UsageError(
                f"audience: no role {', '.join(repr(a) for a in unknown)} in world "
                f"{self.world.name} (roles: {', '.join(self.role_ids)}); "
                "the message was not added"
            )
        return named

    def _refuse_finished(self) -> None:
        if self.finished:
            raise UsageError(
                f"session {self.session_id} is finished ({self.state.stop_reason}): "
                "it takes no more messages; the message was not added"
            )


def _uses_modes(world: World) -> bool:
    if world.mode is not None or world.block("judge") is not None:
        return True
    return world.flow is not None and any(step.judge for step in world.flow.steps)


def _check_pointer(engine: FlowEngine, state: SessionState) -> None:
    """UsageError when a restored state names a step its flow lacks (a damaged file)."""
    named = [state.pointer.current]
    undecided = state.extra.get("undecided")
    if isinstance(undecided, list) and undecided:
        named.append(undecided[0])
    for step_id in named:
        if step_id is not None and step_id not in engine.steps:
            raise UsageError(
                f"session {state.session_id} is damaged: its state names step {step_id!r}, "
                f"which its flow does not have (steps: {', '.join(engine.steps)})"
            )
