"""Batch runs as jobs on a NATS cluster: submitted, pulled by workers, their results.

* A job is one run of a batch: one message on ``rolecall_jobs.<batch>`` in the
  ``ROLECALL_JOBS`` work-queue stream, holding the run's world document (the varied
  values applied), the values, and the session id the run will have, chosen when it is
  submitted, so whichever worker takes it (again) finds the session in the stream.
* ``ROLECALL_RESULTS`` keeps, per batch, its plan (``rolecall_results.<batch>.plan``: how
  many runs) and one result row per run that ended (``rolecall_results.<batch>.run``).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from typing import Any

from pydantic import BaseModel, Field

from rolecall.batch.results import RunResult
from rolecall.nats.link import RESULTS_STREAM, Link

WORKERS = "rolecall-workers"  # the one durable pull consumer every worker shares


def job_subject(batch: str) -> str:
    return f"rolecall_jobs.{batch}"


def plan_subject(batch: str) -> str:
    return f"rolecall_results.{batch}.plan"


def result_subject(batch: str) -> str:
    return f"rolecall_results.{batch}.run"


class Job(BaseModel):
    batch: str
    run: int
    session_id: str
    values: dict[str, str] = Field(default_factory=dict)
    world: dict[str, Any]
    world_source: str | None = None
    model_override: str | None = None


class BatchPlanMessage(BaseModel):
    batch: str
    runs: int
    world: str


async def submit(link: Link, plan: BatchPlanMessage, jobs: Sequence[Job]) -> None:
    """Publish the plan, then every job, each acknowledged (stored) by JetStream.

    Message ids (the batch and run) make a second submission of the same job a no-op.
    """
    import anyio

    with anyio.fail_after(30):
        await link.js.publish(
            plan_subject(plan.batch),
            plan.model_dump_json().encode(),
            headers={"Nats-Msg-Id": f"{plan.batch}:plan"},
        )
        pending = [
            await link.js.publish_async(
                job_subject(job.batch),
                job.model_dump_json().encode(),
                headers={"Nats-Msg-Id": f"{job.batch}:{job.run}"},
            )
            for job in jobs
        ]
        for future in pending:
            await future


async def publish_result(link: Link, result: RunResult) -> None:
    await link.js.publish(result_subject(result.batch), result.model_dump_json().encode())


async def follow_results(link: Link, batch: str) -> AsyncGenerator[RunResult | BatchPlanMessage]:
    """The batch's plan and result rows, the stored ones first, then as they come."""
    from nats.js.api import DeliverPolicy

    sub = await link.js.subscribe(
        f"rolecall_results.{batch}.*",
        stream=RESULTS_STREAM,
        ordered_consumer=True,
        deliver_policy=DeliverPolicy.ALL,
    )
    try:
        async for msg in sub.messages:
            if msg.subject.endswith(".plan"):
                yield BatchPlanMessage.model_validate_json(msg.data)
            else:
                yield RunResult.model_validate_json(msg.data)
    finally:
        import anyio

        with anyio.CancelScope(shield=True):
            await sub.unsubscribe()
