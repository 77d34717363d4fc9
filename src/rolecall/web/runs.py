"""Sessions the web server runs itself: started from the page, driven by its buttons.

Each one is an ordinary :func:`rolecall.open_session` (stored in the server's data
directory like any other session), held open in the server's task group until it
finishes or the server stops. Its events go to an :class:`~rolecall.web.live.EventLog`
that the live page follows. What the page asks (a human message, pause, resume, next,
stop) goes through the public session API: the page adds no logic of its own.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import anyio
from anyio.abc import TaskGroup, TaskStatus

from rolecall.api.entry import open_served
from rolecall.api.session import Session
from rolecall.bus import Bus
from rolecall.errors import UsageError
from rolecall.llm.offline import OfflineModel
from rolecall.llm.pacing import env_stream_delay
from rolecall.llm.protocol import ChatModel
from rolecall.llm.scripted import ScriptedModel
from rolecall.log import get_logger
from rolecall.tools.approval import Decision, PendingCall
from rolecall.web.live import EventLog, start_soon

if TYPE_CHECKING:
    from rolecall.nats.transport import Transport

log = get_logger(__name__)

AGAIN_TURNS = 4  # a retry: deciding the forked step, the answer; more is a flow saying nothing
Action = Literal["pause", "resume", "next", "stop"]
ACTIONS: tuple[Action, ...] = ("pause", "resume", "next", "stop")


@dataclass
class Waiting:
    """A call held for a person's answer on the session page (tools.md, Approval)."""

    call: PendingCall
    answered: anyio.Event = field(default_factory=anyio.Event)
    decision: Decision | None = None


@dataclass
class LiveRun:
    """One session the server holds open."""

    session: Session
    events: EventLog
    chat: bool  # a chat world: the page's message box drives it
    closing: anyio.Event = field(default_factory=anyio.Event)
    busy: bool = False  # a run, step or reply is under way
    driving: int = 0  # how many of them (a message said while agents answer is one more)
    idle: anyio.Event = field(default_factory=anyio.Event)  # set while not busy
    done: anyio.Event = field(default_factory=anyio.Event)  # its session is closed
    error: str | None = None
    # `approve: ask` calls held until someone answers on the page (however long that is:
    # tools.md holds the call until a person answers), by call id
    waiting: dict[str, Waiting] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.idle.set()

    async def ask(self, call: PendingCall) -> Decision:
        """The session's approver: the call waits until :meth:`answer` (the page's
        Approve or Deny), or a stop or the server's end refuses it."""
        held = self.waiting[call.call_id] = Waiting(call)
        self.events.nudge()  # its viewers see that it waits for them
        try:
            await held.answered.wait()
        finally:
            self.waiting.pop(call.call_id, None)
        assert held.decision is not None
        return held.decision

    def answer(self, call_id: str, decision: Decision) -> None:
        """A person's answer to a waiting call (UsageError if none waits by that id)."""
        held = self.waiting.get(call_id)
        if held is None or held.answered.is_set():
            waits = ", ".join(self.waiting) or "none"
            raise UsageError(
                f"no call {call_id} waits for an answer in session {self.session_id} "
                f"(waiting: {waits}); it may have been answered already"
            )
        held.decision = decision
        held.answered.set()

    def refuse_waiting(self, why: str, by: str) -> None:
        """Every waiting call refused: the person stopped the session (``human``), or
        the server ends (``rolecall web``)."""
        for held in list(self.waiting.values()):
            if not held.answered.is_set():
                held.decision = Decision("deny", by, why)
                held.answered.set()

    @property
    def session_id(self) -> str:
        return self.session.session_id

    def shown_state(self) -> str:
        """What it does now, as its page and the list say it (JSON for the page's
        ``rest`` events): ``busy`` (a turn under way), ``asking`` (a call waits for a
        person's answer), ``status`` (the words: ``waiting for you`` for a chat whose
        replies are all in, else empty: the session's own state says it)."""
        status = ""
        if self.waiting:
            tools = ", ".join(sorted({w.call.tool for w in self.waiting.values()}))
            status = f"a call waits for you ({tools})"
        elif self.chat and not self.busy and self.session.result.state in ("created", "running"):
            status = "waiting for you"
        return json.dumps({"busy": self.busy, "asking": bool(self.waiting), "status": status})

    def at_rest(self) -> bool:
        """Paused (or finished) with nothing under way: its stream ends there."""
        return not self.busy and self.session.result.state in ("paused", "finished")


async def _come_to_rest(run: LiveRun, failure: Exception | None) -> None:
    """After a run, a step or a reply. A failure the session did not handle itself is
    shown (``system/error``) and pauses the session (reason ``error``): it is never
    left ``running``. Whatever changed since its last turn (that pause, or one asked
    for) is stored, and sent on to the NATS stream with ``--nats``."""
    if failure is not None:
        run.session.pause(error=failure, source="web")
    try:
        await run.session.save()
    except Exception as exc:  # the store's own failure: the session is paused all the same
        log.warning("web_checkpoint_failed", session=run.session_id, error=str(exc))


class _LogSink:
    def __init__(self, events: EventLog) -> None:
        self.events = events

    def attach(self, bus: Bus) -> None:
        bus.subscribe(self.events.append, name="web")


def paced_models() -> dict[str, ChatModel]:
    """The built-in models paced by ``ROLECALL_STREAM_DELAY`` (seconds between words), as
    in the terminal: demos, and tests that watch tokens arrive."""
    delay = env_stream_delay()
    if delay is None:
        return {}
    return {"offline": OfflineModel(delay=delay), "scripted": ScriptedModel(delay=delay)}


class LiveRuns:
    """The sessions this server runs, by id."""

    def __init__(
        self, tg: TaskGroup, data_dir: Path, store: Any, transport: Transport | None = None
    ) -> None:
        self.tg = tg
        self.data_dir = data_dir
        self.store = store
        self.transport = transport  # rolecall web --nats: the sessions run on it
        self.runs: dict[str, LiveRun] = {}
        self.models = paced_models()
        self._opening: dict[str, anyio.Event] = {}  # stored sessions being reopened

    def get(self, session_id: str) -> LiveRun | None:
        return self.runs.get(session_id)

    async def start(
        self, world: Any, *, topic: str | None = None, model: str | None = None
    ) -> LiveRun:
        """Open a new session of ``world`` (a loaded world) and start it."""
        if topic:
            world = world.model_copy(update={"topic": topic})
        remote = [role.id for role in world.roles if role.transport == "nats"]
        if remote and self.transport is None:
            raise UsageError(
                f"world '{world.name}' has roles generated over NATS (transport: nats: "
                f"{', '.join(remote)}), and this web view has no NATS connection: start it "
                "with --nats URL, and `rolecall agent ROLE --world W --nats URL` for each"
            )
        run: LiveRun = await self.tg.start(self._hold, world, model, None)
        if not run.chat:
            self._drive(run, "run")
        return run

    async def reopen(self, session_id: str) -> LiveRun:
        """A stored session, live again in this server (to talk to it or resume it)."""
        while (opening := self._opening.get(session_id)) is not None:
            await opening.wait()  # a request a moment earlier opens it: the same run
        existing = self.runs.get(session_id)
        if existing is not None:
            return existing
        self._opening[session_id] = opened = anyio.Event()
        try:
            run: LiveRun = await self.tg.start(self._hold, None, None, session_id)
        finally:
            del self._opening[session_id]
            opened.set()
        return run

    async def _hold(
        self,
        world: Any,
        model: str | None,
        session_id: str | None,
        *,
        task_status: TaskStatus[LiveRun],
    ) -> None:
        events = EventLog()
        sinks = (_LogSink(events),)
        run: LiveRun | None = None

        async def ask(call: PendingCall) -> Decision:
            """tools.md: an `ask` call waits for the page (turns run once it is held)."""
            assert run is not None
            return await run.ask(call)

        manager = open_served(
            world,
            session=session_id,
            data_dir=self.data_dir,
            store=self.store,
            model=model,
            models=self.models,
            sinks=sinks,
            transport=self.transport,
            approver=ask,
        )
        try:
            async with manager as session:
                run = LiveRun(session=session, events=events, chat=session.chat)
                self.runs[session.session_id] = run
                task_status.started(run)
                await run.closing.wait()
                if run.busy:  # the server stops during a turn: pause there
                    session.interrupt()
                    run.refuse_waiting(
                        "the web server stopped before anyone answered", "rolecall web"
                    )
                    with anyio.move_on_after(5):
                        await run.idle.wait()
        finally:
            events.close()
            if run is not None:
                # released: its page and the API read it from the store from now on
                if self.runs.get(run.session_id) is run:
                    del self.runs[run.session_id]
                run.done.set()

    # ----------------------------------------------------------------- driving
    def _drive(
        self, run: LiveRun, what: str, text: str = "", audience: list[str] | None = None
    ) -> None:
        async def go() -> None:
            try:
                if what == "say":  # answered as it is said (a pause holds the rest)
                    await run.session.say(text, audience=audience)
                elif what == "next":
                    await run.session.step()
                elif what == "again":  # a retry's branch: the turns until its new answer
                    before = len(run.session.transcript)
                    for _ in range(AGAIN_TURNS):
                        if not await run.session.step() or run.session.finished:
                            break
                        if len(run.session.transcript) > before:
                            break
                    if not run.chat and not run.session.finished:
                        run.session.pause("fork")  # as a fork waits: Resume goes on
                else:
                    await run.session.run()
            except Exception as exc:
                run.error = str(exc)
                await _come_to_rest(run, exc)
                raise
            else:
                await _come_to_rest(run, None)
            finally:
                run.driving -= 1
                if not run.driving:  # the last of them: at rest
                    run.busy = False
                    run.idle.set()
                if run.session.finished:
                    run.closing.set()
                run.events.nudge()  # its viewers see it at rest (a paused one's stream ends)

        run.busy = True  # from now: a control arriving before the task starts sees it
        run.driving += 1
        if run.driving == 1:
            run.idle = anyio.Event()
        start_soon(self.tg, go, name=f"web {what} {run.session_id}")

    def say(self, run: LiveRun, text: str, audience: list[str] | None = None) -> None:
        """A human message, then the replies it is owed; ``audience``: only those roles
        hear it (audiences.md)."""
        if not text.strip():
            raise UsageError("the message is empty")
        if run.session.finished:
            raise UsageError(f"session {run.session_id} is finished")
        if audience is not None:
            roles = run.session.world.role_ids
            unknown = [a for a in audience if a not in roles]
            if unknown or not audience:
                names = ", ".join(repr(a) for a in unknown) or "nobody"
                raise UsageError(
                    f"audience: no role {names} (roles: {', '.join(roles)}); "
                    "the message was not added"
                )
        self._drive(run, "say", text, audience)

    def ask_again(self, run: LiveRun) -> None:
        """A retry's branch, just forked: ask the speaker again (Retry on the page)."""
        self._drive(run, "again")

    def control(self, run: LiveRun, action: str) -> None:
        if action not in ACTIONS:
            raise UsageError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
        if run.session.finished:
            raise UsageError(f"session {run.session_id} is finished")
        if action == "pause":
            run.session.pause()  # stored at once when idle, else when its turn ends
        elif action == "stop":
            run.session.stop()
            run.refuse_waiting("the session was stopped before anyone answered", "human")
            if not run.busy:
                run.closing.set()
        elif run.busy:
            raise UsageError(f"session {run.session_id} is already running a turn")
        else:
            self._drive(run, "next" if action == "next" else "run")

    def set_flag(self, run: LiveRun, name: str) -> list[str]:
        """Set a flag for ``{flag: NAME}`` conditions; the flags set now, sorted."""
        if run.session.finished:
            raise UsageError(f"session {run.session_id} is finished")
        run.session.set_flag(name)
        return sorted(run.session.flags)

    def close_all(self) -> None:
        for run in self.runs.values():
            run.closing.set()

    async def wait_closed(self) -> None:
        for run in list(self.runs.values()):
            await run.done.wait()
