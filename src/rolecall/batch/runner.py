"""Running a batch in one process: K sessions in flight, every run recorded.

One task group of ``concurrency`` workers, each taking the next run when its last one
ended: that many sessions run at once, and memory does not grow with the batch.
Each run is an ordinary stored session (one store and one set of memory files serve
them all); its result row is stored in the batch tables when it ends. A run that fails
(the model failed after its retries, the store refused a write) is recorded with its
error and never stops the others. Ctrl-C (:meth:`BatchRunner.interrupt`) pauses the runs
in flight, keeps whatever they said, and starts no new one: ``--resume`` goes on.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Container, Iterable, Iterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import anyio.lowlevel

from rolecall.api.session import Session
from rolecall.api.tuning import tune_gc
from rolecall.batch.plan import BatchPlan, RunSpec, recorded_values
from rolecall.batch.results import RunResult
from rolecall.batch.tables import BatchTables
from rolecall.bus import Envelope, ErrorEvent, EventBus
from rolecall.errors import RolecallError
from rolecall.llm.registry import ModelRegistry
from rolecall.log import get_logger
from rolecall.memory import MemoryFiles
from rolecall.storage.port import SessionStore
from rolecall.tools.approval import Approver

log = get_logger(__name__)

Listener = Callable[[RunResult], None]


@dataclass
class BatchContext:
    """What every run of the batch shares."""

    store: SessionStore
    memory: MemoryFiles
    models: ModelRegistry
    model_override: str | None = None
    world_source: str | None = None
    # called with every event of every run (the JSON stream of ``--json``)
    on_event: Callable[[Envelope], None] | None = None
    sessions: dict[str, Session] = field(default_factory=dict)  # the runs in flight
    # answers the tool calls a role must ask for (--approve auto|deny; None: refused)
    approver: Approver | None = None


@asynccontextmanager
async def open_run(
    ctx: BatchContext, spec: RunSpec, plan: BatchPlan, session_id: str | None
) -> AsyncIterator[Session]:
    """The run's stored session: a new one, or its stored session restored.

    Opened as every session is (:func:`rolecall.api.entry.open_live`): everything a
    run needs of a session (store, memory files, the event sink) is said here and
    nowhere else.
    """
    from rolecall.api.entry import open_live
    from rolecall.api.opening import HandlerSink, Opening

    doc = await ctx.store.load(session_id) if session_id is not None else None
    world = doc.world_model() if doc is not None else plan.worlds[spec.combination]
    sinks = [HandlerSink(ctx.on_event, name="batch-json")] if ctx.on_event is not None else []
    opening = Opening(
        store=ctx.store,
        memory=ctx.memory,
        models=ctx.models,
        model_override=ctx.model_override,
        doc=doc,
        world_source=ctx.world_source,
        sinks=sinks,
        bus=batch_bus,
        approver=ctx.approver,
    )
    async with open_live(world, opening) as session:
        yield session


# A batch's sessions keep no bus history (the bus's default is 5,000 events, for
# debugging a session from Python): nothing reads it in a batch, the store holds every
# event, and with 100 runs in flight the histories were most of the process's memory
# (100 sessions x 100 turns: 253 MB with them, 93 MB without; docs/performance.md).
BUS_HISTORY = 0


def batch_bus(session_id: str, first_seq: int) -> EventBus:
    """The in-process bus of a batch run: no history kept."""
    return EventBus(session_id, first_seq=first_seq, history_size=BUS_HISTORY)


class BatchRunner:
    def __init__(
        self,
        name: str,
        plan: BatchPlan,
        ctx: BatchContext,
        tables: BatchTables,
        *,
        concurrency: int,
        listener: Listener | None = None,
    ) -> None:
        self.name = name
        self.plan = plan
        self.ctx = ctx
        self.tables = tables
        self.concurrency = concurrency
        self.listener = listener
        self.results: list[RunResult] = []
        self.interrupted = False

    async def run(
        self,
        todo: Iterable[RunSpec],
        sessions: Mapping[int, str],
        skip: Container[int] = (),
    ) -> list[RunResult]:
        """Run ``todo`` but the runs in ``skip`` (``sessions``: the stored session of a
        run to resume); the results.

        ``concurrency`` workers take the runs from ``todo`` one at a time, so memory
        holds the runs in flight, not the batch (a task per run waiting its turn was
        1.9 GB for ``--runs 300000``), and a run is planned only when a worker is free.
        """
        tune_gc()  # many sessions at once: collect less often (api/tuning.py)
        specs = iter(todo)
        async with anyio.create_task_group() as tg:
            for _ in range(self.concurrency):
                tg.start_soon(self._worker, specs, sessions, skip)
        return self.results

    async def _worker(
        self, specs: Iterator[RunSpec], sessions: Mapping[int, str], skip: Container[int]
    ) -> None:
        skipped = 0
        for spec in specs:
            if self.interrupted:
                return
            if spec.run in skip:
                skipped += 1
                if skipped % 1024 == 0:  # a resume passing many done runs still hears Ctrl-C
                    await anyio.lowlevel.checkpoint()
                continue
            await self._one(spec, sessions.get(spec.run))

    def interrupt(self) -> None:
        """Ctrl-C: pause the runs in flight (a generation is cut, kept as a draft)."""
        self.interrupted = True
        for session in list(self.ctx.sessions.values()):
            session.interrupt()

    async def _one(self, spec: RunSpec, session_id: str | None) -> None:
        started = time.monotonic()
        begun = getattr(self.listener, "started", None)  # a progress bar's runs in flight
        if begun is not None:
            begun(spec.run)
        errors: list[str] = []
        session: Session | None = None
        failure: str | None = None
        try:
            async with open_run(self.ctx, spec, self.plan, session_id) as session:
                self.ctx.sessions[session.session_id] = session
                if session_id is None:
                    await self.tables.set_session(self.name, spec.run, session.session_id)
                if self.interrupted:  # Ctrl-C while it opened: left for --resume, not run
                    self.ctx.sessions.pop(session.session_id, None)
                    return
                try:
                    errors = await run_to_end(session)
                finally:
                    self.ctx.sessions.pop(session.session_id, None)
        except RolecallError as exc:
            failure = str(exc)
            log.info("batch_run_failed", batch=self.name, run=spec.run, error=failure)
        ended = session.result if session is not None else None
        if (
            self.interrupted
            and ended is not None
            and ended.state == "paused"
            and ended.pause_reason in ("interrupted", "cancelled")
        ):
            return  # left for --resume
        result = result_of(
            self.name, spec.run, spec.values, session, failure, errors,
            time.monotonic() - started,
        )  # fmt: skip
        await self.tables.set_result(result)
        self.results.append(result)
        if self.listener is not None:
            self.listener(result)


async def run_to_end(session: Session) -> list[str]:
    """Run ``session`` until it finishes or pauses; the errors it reported meanwhile."""
    errors: list[str] = []
    sub = session.bus.subscribe(
        lambda e: errors.append(str(getattr(e.event, "error", ""))),
        "system",
        filter=lambda e: isinstance(e.event, ErrorEvent),
        name="batch-errors",
    )
    try:
        await session.run()
    finally:
        sub.close()
    return errors


def result_of(
    batch: str,
    run: int,
    values: dict[str, str],
    session: Session | None,
    failure: str | None,
    errors: list[str],
    seconds: float,
) -> RunResult:
    """The result row of a run; a run that did not finish failed (with its last error)."""
    ended = session.result if session is not None else None
    if failure is None and ended is not None and ended.state != "finished":
        failure = errors[-1] if errors else f"paused ({ended.pause_reason or 'unknown'})"
    return RunResult(
        batch=batch,
        run=run,
        session_id=ended.session_id if ended is not None else None,
        values=recorded_values(values),
        stop_reason=ended.stop_reason if ended is not None and failure is None else None,
        turns=ended.turns if ended is not None else 0,
        input_tokens=ended.input_tokens if ended is not None else 0,
        output_tokens=ended.output_tokens if ended is not None else 0,
        cost_usd=ended.cost if ended is not None else None,
        seconds=round(seconds, 3),
        error=failure,
    )
