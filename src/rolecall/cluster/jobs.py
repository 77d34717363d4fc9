"""Batch runs as jobs on a NATS cluster: submitted, pulled by workers, their results.

* A job is one run of a batch: one message on ``rolecall_jobs.<batch>`` in the
  ``ROLECALL_JOBS`` work-queue stream, holding the run's world document (the varied
  values applied), the values, and the session id the run will have, chosen when it is
  submitted, so whichever worker takes it (again) finds the session in the stream.
* ``ROLECALL_RESULTS`` keeps, per batch, its plan (``rolecall_results.<batch>.plan``: how
  many runs), a copy of every job (``rolecall_results.<batch>.job``: the work queue
  forgets a job once it is done, ``batch --resume`` submits it again) and one result row
  per run that ended (``rolecall_results.<batch>.run``; a run submitted again adds a
  newer row, and the newest counts).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from rolecall.batch.results import RunResult
from rolecall.nats.link import (
    JOB_SUBJECTS,
    JOBS_STREAM,
    RESULTS_STREAM,
    Link,
    answered,
    subject_token,
)

if TYPE_CHECKING:
    from nats.js.api import ConsumerInfo

SUBMIT_DEADLINE_S = 30.0
WORKERS = "rolecall-workers"  # the one durable pull consumer every worker shares
ACK_WAIT_S = 30.0  # the ack wait of the workers' consumer when a worker asks for none
ACK_WAIT_RANGE = (1.0, 86_400.0)  # what --ack-wait accepts: a second to a day
_CONSUMER_EXISTS = 10148  # JetStream's err_code: "consumer already exists" (with another config)


def job_subject(batch: str) -> str:
    return f"rolecall_jobs.{subject_token(batch, 'batch name')}"


def plan_subject(batch: str) -> str:
    return f"rolecall_results.{subject_token(batch, 'batch name')}.plan"


def result_subject(batch: str) -> str:
    return f"rolecall_results.{subject_token(batch, 'batch name')}.run"


def job_copy_subject(batch: str) -> str:
    return f"rolecall_results.{subject_token(batch, 'batch name')}.job"


class Job(BaseModel):
    batch: str
    run: int
    session_id: str
    values: dict[str, str] = Field(default_factory=dict)
    world: dict[str, Any]
    world_source: str | None = None
    model_override: str | None = None
    approve: Literal["auto", "deny"] | None = None  # --approve: `ask` tool calls (tools.md)


class BatchPlanMessage(BaseModel):
    batch: str
    runs: int
    world: str


async def submit(link: Link, plan: BatchPlanMessage, jobs: Sequence[Job]) -> None:
    """Publish the plan, then every job (and its kept copy), each acknowledged (stored) by
    JetStream.

    Message ids (the batch and run) make a second submission of the same job a no-op.
    """

    fit(link, jobs)  # before the plan: a batch refused here has not taken its name

    async def once() -> None:
        await link.js.publish(
            plan_subject(plan.batch),
            plan.model_dump_json().encode(),
            headers={"Nats-Msg-Id": f"{plan.batch}:plan"},
        )
        await _publish_jobs(link, jobs, "")

    await _until_stored(link, once)


def fit(link: Link, jobs: Sequence[Job]) -> None:
    """UsageError naming the first job larger than the server accepts in one message
    (its ``max_payload``): a job carries its run's whole world."""
    from rolecall.errors import UsageError
    from rolecall.nats.bus import message_size, too_large

    limit = link.nc.max_payload
    for job in jobs:
        size = message_size(job.model_dump_json().encode(), {"Nats-Msg-Id": f"{job.batch}:x"})
        if size > limit:
            raise UsageError(
                too_large(f"the job of run {job.run} of batch {job.batch} (its world)", size, link)
                + "; nothing was submitted"
            )


async def _until_stored(link: Link, publish: Callable[[], Awaitable[None]]) -> None:
    """Run ``publish`` until JetStream acknowledges all of it, for at most 30 s: a server
    restarting meanwhile times the acknowledgements out, and the message ids make the
    messages sent again no-ops for those already stored."""
    import anyio
    from nats.errors import TimeoutError as NatsTimeout

    from rolecall.errors import RuntimeFailure

    with anyio.move_on_after(SUBMIT_DEADLINE_S):
        while True:
            try:
                await publish()
                return
            except NatsTimeout:
                await anyio.sleep(0.2)
    raise RuntimeFailure(
        f"the NATS server at {link.url} did not store the batch's jobs within "
        f"{SUBMIT_DEADLINE_S:g} s (is it overloaded, or restarting?)"
    )


async def resubmit(link: Link, jobs: Sequence[Job], attempt: str) -> None:
    """Put ``jobs`` in the work queue again (``batch --resume``); ``attempt`` makes their
    message ids new, so JetStream does not drop them as duplicates."""
    fit(link, jobs)
    await _until_stored(link, lambda: _publish_jobs(link, jobs, f":{attempt}", copies=False))


async def _publish_jobs(link: Link, jobs: Sequence[Job], suffix: str, copies: bool = True) -> None:
    pending = []
    for job in jobs:
        body = job.model_dump_json().encode()
        key = f"{job.batch}:{job.run}"
        pending.append(
            await link.js.publish_async(
                job_subject(job.batch), body, headers={"Nats-Msg-Id": key + suffix}
            )
        )
        if copies:
            pending.append(
                await link.js.publish_async(
                    job_copy_subject(job.batch), body, headers={"Nats-Msg-Id": f"{key}:job"}
                )
            )
    for future in pending:
        await future


@dataclass
class StoredBatch:
    """What the results stream holds of a batch: its plan, its jobs, its newest results."""

    plan: BatchPlanMessage | None = None
    jobs: dict[int, Job] = field(default_factory=dict)
    results: dict[int, RunResult] = field(default_factory=dict)
    last_seq: int = 0  # the results stream's last message when it was read


async def stored_batch(link: Link, batch: str) -> StoredBatch:
    """Read the batch's plan, job copies and result rows (the newest row of a run wins)."""
    from rolecall.nats.readback import read_stream

    info = await link.js.stream_info(RESULTS_STREAM)
    found = StoredBatch(last_seq=int(info.state.last_seq))
    async for item in read_stream(link, f"rolecall_results.{batch}.*", stream=RESULTS_STREAM):
        if item.subject.endswith(".plan"):
            found.plan = BatchPlanMessage.model_validate(item.record)
        elif item.subject.endswith(".job"):
            job = Job.model_validate(item.record)
            found.jobs[job.run] = job
        else:
            result = RunResult.model_validate(item.record)
            found.results[result.run] = result
    return found


async def queued_jobs(link: Link, batch: str) -> int:
    """How many of the batch's jobs the work queue still holds (waiting or running)."""
    from nats.js.api import StreamInfo

    info: StreamInfo = await link.js.stream_info(JOBS_STREAM, subjects_filter=job_subject(batch))
    return sum((info.state.subjects or {}).values())


async def workers_consumer(link: Link, ack_wait: float) -> float:
    """Make sure the workers' shared consumer exists; the ack wait in force on it.

    The consumer is created with ``ack_wait`` only when it does not exist yet, and then
    with JetStream's ``create`` action, which never changes an existing consumer: a
    worker starting at the same moment with another value cannot change the ack wait
    under a worker that keeps its jobs alive by the first one (JetStream applies a
    changed ack wait at once to the jobs in flight, so a shorter one would hand them to
    another worker). Whichever worker creates it sets it; every worker reads it back and
    keeps its jobs alive by it.
    """
    from nats.js.errors import NotFoundError

    async def info() -> ConsumerInfo | None:
        try:
            found: ConsumerInfo = await link.js.consumer_info(JOBS_STREAM, WORKERS)
        except NotFoundError:
            return None
        return found

    found = await answered(link.url, "reading the workers' consumer", info)
    if found is None:
        found = await _create_workers_consumer(link, ack_wait)
    if found is None:  # another worker created it meanwhile: its ack wait is in force
        found = await answered(link.url, "reading the workers' consumer", info)
    if found is None or found.config.ack_wait is None:
        from rolecall.errors import RuntimeFailure

        raise RuntimeFailure(
            f"the NATS server at {link.url} lost the workers' consumer {WORKERS} as it was "
            "created (was it deleted meanwhile?)"
        )
    return float(found.config.ack_wait)


async def _create_workers_consumer(link: Link, ack_wait: float) -> ConsumerInfo | None:
    """Create the workers' consumer with JetStream's ``create`` action (nats-py's
    ``add_consumer`` sends none: create or update); None if it exists already."""
    import json

    from nats.js.api import AckPolicy, ConsumerConfig, ConsumerInfo

    from rolecall.errors import RuntimeFailure

    config = ConsumerConfig(
        name=WORKERS,
        durable_name=WORKERS,
        ack_policy=AckPolicy.EXPLICIT,
        ack_wait=ack_wait,
        max_deliver=-1,
        filter_subject=JOB_SUBJECTS,
    )
    request = {"stream_name": JOBS_STREAM, "config": config.as_dict(), "action": "create"}
    reply = await answered(
        link.url,
        "creating the workers' consumer",
        lambda: link.nc.request(
            f"$JS.API.CONSUMER.CREATE.{JOBS_STREAM}.{WORKERS}",
            json.dumps(request).encode(),
            timeout=5,
        ),
    )
    answer = json.loads(reply.data)
    error = answer.get("error")
    if error is None:
        created: ConsumerInfo = ConsumerInfo.from_response(answer)
        return created
    if error.get("err_code") == _CONSUMER_EXISTS:
        return None
    raise RuntimeFailure(
        f"the NATS server at {link.url} refused the workers' consumer {WORKERS} on "
        f"{JOBS_STREAM}: {error.get('description') or error}"
    )


async def publish_result(link: Link, result: RunResult, attempt: str = "") -> None:
    """Store ``result``; ``attempt`` (the job message's stream sequence) makes its message
    id, so a row sent again (a server restarting meanwhile) is stored once."""
    headers = {"Nats-Msg-Id": f"{result.batch}:{result.run}:result:{attempt}"} if attempt else None
    await link.js.publish(
        result_subject(result.batch), result.model_dump_json().encode(), headers=headers
    )


async def follow_results(
    link: Link, batch: str, *, after: int = 0
) -> AsyncGenerator[RunResult | BatchPlanMessage]:
    """The batch's plan and result rows, the stored ones first (those after the results
    stream's message ``after``), then as they come."""
    from nats.js.api import DeliverPolicy

    from rolecall.nats.readback import ordered

    msgs = ordered(
        link,
        f"rolecall_results.{batch}.*",
        stream=RESULTS_STREAM,
        policy=DeliverPolicy.ALL,
        after=after,
        what="following the batch's results",
    )
    async with aclosing(msgs):
        async for msg in msgs:
            if msg.subject.endswith(".plan"):
                yield BatchPlanMessage.model_validate_json(msg.data)
            elif msg.subject.endswith(".run"):
                yield RunResult.model_validate_json(msg.data)
