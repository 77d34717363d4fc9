"""``rolecall worker``: pull batch runs from ``ROLECALL_JOBS`` and run them.

Every worker shares one durable pull consumer of the work queue, so each job goes to one
worker at a time. A job is acknowledged only once its session has ended and every one of
its events is stored in the stream; meanwhile the worker tells JetStream it is still
working on it (in-progress acknowledgements, three per ack wait). A worker that dies
leaves its job unacknowledged: after the ack wait another worker takes it and continues
the session from its last checkpoint in ``ROLECALL_EVENTS`` (the session id is part of
the job), so no committed turn is generated again. A run that fails (its world invalid,
the model failing after its retries) is recorded as failed and acknowledged: a failure
is never redelivered.

A worker that is alive but silent for longer than the ack wait (paused, cut off from the
server) loses its job the same way. Every run claims its session's lease before it
starts (:meth:`~rolecall.nats.bus.Publisher.claim`), so of two workers holding one job
only the last to claim it can append to the session: the other's next publish is
refused, and it stops the run without reporting or acknowledging it (the holder does).
Before every model request and every tool call (whatever the model) the run checks that
it still holds the lease (:meth:`~rolecall.nats.bus.Publisher.hold`): a worker that
wakes after losing its session asks nothing and runs no tool for it.
A job delivered again to the worker that runs it waits for that run's end.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
from nats.errors import Error as NatsError
from pydantic import ValidationError

from rolecall.batch.plan import recorded_values
from rolecall.batch.results import RunResult
from rolecall.batch.runner import BatchContext, result_of, run_to_end
from rolecall.cluster.jobs import WORKERS, Job, publish_result, workers_consumer
from rolecall.errors import RolecallError
from rolecall.llm.registry import ModelRegistry
from rolecall.log import get_logger
from rolecall.nats.bus import LeaseLost, NatsBus
from rolecall.nats.link import JOBS_STREAM, answered, log_filter
from rolecall.nats.readback import SessionLog, session_logs
from rolecall.nats.transport import Transport

if TYPE_CHECKING:
    from rolecall.api.session import Session
    from rolecall.storage.document import SessionDocument

log = get_logger(__name__)


RETRY_S = 0.5  # between attempts to reach a server that is not answering
ACK_S = 5.0  # how long an acknowledgement of a job waits for the server's answer
ACK_ATTEMPTS = 6  # then the job is left to the ack wait (a redelivered run that ended ends)


def problem_of_batch(batch: str) -> str | None:
    """Why results of ``batch`` cannot be published, or None."""
    from rolecall.errors import UsageError
    from rolecall.nats.link import subject_token

    try:
        subject_token(batch, "batch name")
    except UsageError as exc:
        return str(exc)
    if not batch:
        return "the job names no batch"
    return None


def job_problem(job: Job) -> str | None:
    """Why no worker can run ``job`` (its batch name or session id), or None."""
    from rolecall.errors import UsageError
    from rolecall.nats.link import subject_token
    from rolecall.paths import safe_id

    problem = problem_of_batch(job.batch)
    if problem is not None:
        return f"the job cannot be run: {problem}"
    if not job.session_id:
        return "the job cannot be run: it has no session id (an empty session_id)"
    try:
        subject_token(safe_id(job.session_id, "session id"), "session id")
    except UsageError as exc:
        return f"the job cannot be run: {exc}"
    return None


def failed(job: Job, error: str) -> RunResult:
    """The result row of a run of ``job`` that failed with ``error``."""
    return RunResult(
        batch=job.batch,
        run=job.run,
        session_id=job.session_id or None,
        values=recorded_values(job.values),
        error=error,
    )


@dataclass
class WorkerStats:
    jobs: int = 0
    resumed: int = 0
    failed: int = 0
    lost: int = 0  # runs another worker claimed while this one ran them


class Worker:
    def __init__(
        self, ctx: BatchContext, transport: Transport, *, concurrency: int, ack_wait: float
    ) -> None:
        self.ctx = ctx
        self.transport = transport
        self.slots = anyio.Semaphore(concurrency)  # acquired by the puller, released per job
        self.ack_wait = ack_wait  # asked for; once bound, the one in force on the consumer
        self.stats = WorkerStats()
        # session id -> (set once its run here ends, the job message's stream sequence)
        self.running: dict[str, tuple[anyio.Event, str]] = {}

    async def run(self, ready: Callable[[], None]) -> None:
        """Take jobs until cancelled; ``ready()`` once subscribed (``ack_wait`` is then
        the ack wait in force on the shared consumer, which may differ from the one
        asked for: the worker that created the consumer set it)."""
        link = self.transport.link
        self.ack_wait = await workers_consumer(link, self.ack_wait)
        # another worker claims a session only after half the ack wait without a word from
        # its holder: a renewal stored within a quarter of it vouches for the lease
        self.transport.publisher.fence_s = self.ack_wait / 4
        pull = await answered(
            link.url,
            "subscribing to the work queue",
            lambda: link.js.pull_subscribe_bind(WORKERS, JOBS_STREAM),
        )
        ready()
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._renew_leases)
                while True:
                    await self.slots.acquire()
                    try:
                        msgs = await pull.fetch(1, timeout=2)
                    except TimeoutError:
                        self.slots.release()
                        continue
                    except NatsError as exc:  # the server restarting, a leader moving
                        self.slots.release()
                        log.warning("work_queue_retry", error=repr(exc))
                        await anyio.sleep(RETRY_S)
                        continue
                    tg.start_soon(self._take, msgs[0])
        finally:
            with anyio.CancelScope(shield=True), suppress(Exception):
                await pull.unsubscribe()

    async def _renew_leases(self) -> None:
        """The leases of the sessions running here renewed every third of the ack wait
        (with the in-progress acknowledgements): another worker given one of their jobs
        again sees the session alive and leaves it (:meth:`_stored`)."""
        while True:
            await anyio.sleep(self.ack_wait / 3)
            self.transport.publisher.renew()

    async def _take(self, msg: Any) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._keep_alive, msg)
                await self._job(msg)
                tg.cancel_scope.cancel()
        finally:
            self.slots.release()

    async def _keep_alive(self, msg: Any) -> None:
        """An in-progress acknowledgement every third of the ack wait in force on the
        consumer (not the one this worker asked for: the consumer's is what JetStream
        counts down)."""
        while True:
            await anyio.sleep(self.ack_wait / 3)
            try:
                await msg.in_progress()
            except NatsError as exc:  # a long outage filled nats-py's buffer: next time
                log.info("job_progress_unsent", error=repr(exc))

    async def _job(self, msg: Any) -> None:
        """Run the job of ``msg``; whatever happens, its result is recorded and the job
        acknowledged (a job no worker can run is failed, never redelivered: a worker
        never exits for a job)."""
        from nats.errors import NotJSMessageError

        try:
            job = Job.model_validate_json(msg.data)
        except ValidationError as exc:
            log.error("job_unreadable", error=str(exc).splitlines()[0])
            await self._settle(msg, None)  # never redelivered: no worker could run it
            return
        try:
            attempt = str(msg.metadata.sequence.stream)
        except (NotJSMessageError, ValueError, AttributeError):
            attempt = ""
        problem = job_problem(job)
        if problem is not None:
            await self._end(msg, job, failed(job, problem), attempt)
            return
        here = self.running.get(job.session_id)
        if here is not None:  # delivered again while this worker runs it (paused, a copy)
            log.info("job_running_here", batch=job.batch, run=job.run)
            await here[0].wait()  # kept alive meanwhile
            if here[1] != attempt or not attempt:  # another message of the same run: its
                await self._job(msg)  # own result, from the session as it ended here
            return  # the same message: the run here acknowledged it (or lost it)
        self.running[job.session_id] = (anyio.Event(), attempt)
        try:
            try:
                result = await self.run_job(job)
            except Exception as exc:  # anything but cancellation: the run failed, not the worker
                log.error("job_crashed", batch=job.batch, run=job.run, error=repr(exc))
                result = failed(job, f"the worker could not run the job: {exc!r}")
            await self._end(msg, job, result, attempt)
        finally:
            self.running.pop(job.session_id)[0].set()

    async def _end(self, msg: Any, job: Job, result: RunResult, attempt: str) -> None:
        """Report the run's result and acknowledge its job, unless another worker claimed
        the session meanwhile (that worker does both)."""
        publisher = self.transport.publisher
        await publisher.flush(job.session_id)  # every event of the run stored before the ack
        lost = publisher.release(job.session_id)
        if lost is not None:
            self.stats.lost += 1
            log.warning("job_lost", batch=job.batch, run=job.run, error=lost)
            return
        self.stats.jobs += 1
        if not result.ok:
            self.stats.failed += 1
        await self._settle(msg, result, attempt)
        log.info("job_done", batch=job.batch, run=job.run, ok=result.ok, error=result.error)

    async def _settle(self, msg: Any, result: RunResult | None, attempt: str = "") -> None:
        """Publish ``result`` (none: a job that names no batch it could go to), then
        acknowledge the job, each again until the server stores it: a server restarting
        meanwhile neither loses the result nor stops the worker. A result row carries a
        message id of the job's delivery, so one sent twice is stored once."""
        stored = result is None or problem_of_batch(result.batch) is not None
        if result is not None and stored:
            log.error("job_refused", batch=result.batch, run=result.run, error=result.error)
        acks = 0
        while True:
            try:
                if not stored:
                    assert result is not None
                    await publish_result(self.transport.link, result, attempt)
                    stored = True
                if result is None:
                    await msg.term()  # unreadable: nothing to run again, whoever takes it
                else:
                    acks += 1
                    await msg.ack_sync(timeout=ACK_S)
                return
            except (NatsError, TimeoutError) as exc:
                if acks >= ACK_ATTEMPTS:  # an acknowledgement whose answer was lost is
                    log.warning("job_ack_unanswered", error=repr(exc))  # not answered again
                    return
                log.warning("job_settle_retry", error=repr(exc))
                await anyio.sleep(RETRY_S)

    async def run_job(self, job: Job) -> RunResult:
        """Run ``job`` to its end; a failure of the run is in the result."""
        from rolecall.world.models import World

        started = time.monotonic()
        try:
            world = World.model_validate(job.world)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'world'}: {e['msg']}"
                for e in exc.errors()[:5]
            )
            return failed(job, f"the world is invalid: {problems}")
        live: list[Session] = []
        errors: list[str] = []
        failure: str | None = None
        epoch = secrets.token_hex(3)  # this run of the session: its lease, its message ids
        try:
            doc = await self._stored(job.session_id, epoch)
            async with self._session(job, world, doc, epoch, live.append) as session:
                errors = await run_to_end(session)
        except LeaseLost as exc:  # claimed by another worker: it reports the run
            self.transport.publisher.lost.setdefault(job.session_id, str(exc))
            failure = str(exc)
        except RolecallError as exc:
            failure = str(exc)
        return result_of(
            job.batch,
            job.run,
            job.values,
            live[0] if live else None,
            failure,
            errors,
            time.monotonic() - started,
        )

    async def _stored(self, session_id: str, epoch: str) -> SessionDocument | None:
        """The session as the stream holds it (a run taken over from a dead worker), its
        lease claimed for ``epoch``: LeaseLost when another worker appended to it since
        it was read."""
        link = self.transport.link

        async def read() -> dict[str, SessionLog]:
            return await session_logs(link, log_filter(session_id))

        # a server restarting answers nothing for a while: waited for, never a failed run
        found = (await answered(link.url, "reading the session", read)).get(session_id)
        if found is not None and found.holder is not None and found.state != "finished":
            # a worker ran it: alive (its job given again, a copy), it renews its lease
            # every third of the ack wait; the session is left to it if it did meanwhile
            await anyio.sleep(self.ack_wait / 2)
            again = (await answered(link.url, "reading the session", read)).get(session_id)
            if again is None or again.stream_seq != found.stream_seq:
                raise LeaseLost(
                    f"session {session_id} is running on another worker (its lease renewed "
                    "within half the ack wait): left to it"
                )
        await self.transport.publisher.claim(session_id, epoch, found.stream_seq if found else 0)
        doc = found.document() if found is not None else None
        if doc is not None:
            self.stats.resumed += 1
            log.info("job_resumed", session=session_id, messages=len(doc.messages))
        return doc

    @asynccontextmanager
    async def _session(
        self,
        job: Job,
        world: Any,
        doc: SessionDocument | None,
        epoch: str,
        created: Callable[[Session], None],
    ) -> AsyncIterator[Session]:
        """The job's session, through the one opener: on the cluster's bus, stored here,
        with memory files; the one the stream holds when ``doc`` is given."""
        from rolecall.api.entry import open_live
        from rolecall.api.opening import Opening
        from rolecall.tools.approval import flag_approver

        def bus(session_id: str, first_seq: int) -> NatsBus:
            return self.transport.bus(
                session_id, first_seq, batch=job.batch, run=job.run, epoch=epoch
            )

        world = doc.world_model() if doc is not None else world
        models = self.ctx.models
        if any(r.transport == "nats" for r in world.roles):  # its own remote agents
            models = ModelRegistry(
                offline_delay=models.offline_delay, scripted_delay=models.scripted_delay
            )
        store = self.ctx.store
        if doc is not None and await store.has(doc.session_id):
            # the stream is the truth: this store may hold less, or more
            await store.delete(doc.session_id)
        opening = Opening(
            store=store,
            memory=self.ctx.memory,
            models=models,
            approver=flag_approver(job.approve) if job.approve else None,  # tools.md
            model_override=job.model_override,
            session_id=job.session_id,
            doc=doc,
            world_source=job.world_source,
            transport=self.transport,
            bus=bus,
        )
        async with open_live(world, opening, on_created=created) as session:
            yield session
