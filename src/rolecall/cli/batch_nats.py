"""``rolecall batch WORLD --nats URL``: submit the runs as jobs; follow their results.

The plan is built and checked here first (bad ``--vary`` input is exit 2, nothing
submitted); each run becomes a job with its own session id. With ``--wait`` (the
default) the command shows the same progress bar and summary as a local batch, from the
result rows the workers publish, and writes ``--out``; with ``--json`` it prints every
run's events from the cluster's stream, then the summary line. ``--no-wait`` returns
once every job is stored in the work queue.

``rolecall batch --resume NAME --nats URL`` submits again the jobs of the runs that
failed (a worker continues each from its last committed turn in the stream: nothing is
generated twice) and waits for them like a new batch.
"""

from __future__ import annotations

import secrets
import sys
import time
from collections.abc import AsyncIterator, Iterable
from contextlib import aclosing, asynccontextmanager
from typing import TYPE_CHECKING, Any

import anyio

from rolecall.batch.plan import BatchPlan
from rolecall.batch.results import RunResult
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.cli.options import BatchOptions
    from rolecall.nats.link import Link
    from rolecall.nats.readback import Reorder


def jobs_of(name: str, doc: dict[str, Any], plan: BatchPlan) -> list[Any]:
    from rolecall.cluster.jobs import Job
    from rolecall.session.ids import new_session_id
    from rolecall.storage.document import world_dict

    worlds = [world_dict(w) for w in plan.worlds]
    ids: set[str] = set()
    jobs = []
    for spec in plan.runs:
        sid = new_session_id()
        while sid in ids:  # many runs are planned within one second
            sid = new_session_id()
        ids.add(sid)
        jobs.append(
            Job(
                batch=name,
                run=spec.run,
                session_id=sid,
                values=spec.values,
                world=worlds[spec.combination],
                world_source=doc["source"],
                model_override=doc.get("model_override"),
                approve=doc.get("approve"),
            )
        )
    return jobs


async def submit_batch(
    opts: BatchOptions, name: str, doc: dict[str, Any], plan: BatchPlan, url: str
) -> int:
    from nats.js.errors import NotFoundError

    from rolecall.cli.batch_report import finish
    from rolecall.cluster.jobs import BatchPlanMessage, plan_subject, submit
    from rolecall.nats.link import RESULTS_STREAM, connect

    started = time.monotonic()
    async with connect(url, name="rolecall-batch") as link:
        try:
            await link.js.get_last_msg(RESULTS_STREAM, plan_subject(name))
        except NotFoundError:
            pass
        else:
            raise UsageError(
                f"a batch named {name!r} was already submitted to {url}; choose another --name"
            )
        jobs = jobs_of(name, doc, plan)
        async with json_events(link, name, enabled=opts.json and opts.wait) as events:
            await submit(
                link, BatchPlanMessage(batch=name, runs=plan.total, world=plan.worlds[0].name), jobs
            )
            if not opts.quiet:
                print(f"batch {name}: submitted {plan.total} runs to {url}", file=sys.stderr)
            if not opts.wait:
                print(
                    f"`rolecall watch --batch {name} --nats {url}` follows it; workers run it "
                    f"(`rolecall worker --nats {url}`)",
                    file=sys.stderr,
                )
                return 0
            results = await wait_for(opts, link, name, plan.total, {j.run for j in jobs}, [], 0)
            await events.settle(results.values())
    return finish(opts, name, plan.total, list(results.values()), False, started, nats=url)


async def resume_batch(opts: BatchOptions, name: str, url: str) -> int:
    """Submit the failed runs of batch ``name`` again and wait for every run to end."""
    from rolecall.cli.batch_report import finish
    from rolecall.cluster.jobs import queued_jobs, resubmit, stored_batch
    from rolecall.nats.link import connect

    started = time.monotonic()
    async with connect(url, name="rolecall-batch") as link:
        stored = await stored_batch(link, name)
        if stored.plan is None:
            raise UsageError(f"no batch named {name!r} was submitted to {url}")
        total = stored.plan.runs
        if len(stored.jobs) < total:
            raise UsageError(
                f"batch {name!r} on {url} was submitted without a copy of its jobs (an older "
                "rolecall); it cannot be resumed: submit it again under another --name"
            )
        failed = [stored.jobs[r.run] for r in stored.results.values() if not r.ok]
        queued = await queued_jobs(link, name)
        missing = [job for run, job in stored.jobs.items() if run not in stored.results]
        lost = missing if queued == 0 else []  # gone from the queue without a result
        again = sorted([*failed, *lost], key=lambda j: j.run)
        earlier = [r for r in stored.results.values() if r.ok]
        waiting = {j.run for j in again} | {j.run for j in missing}
        if not opts.quiet:
            print(
                f"batch {name}: {len(earlier)} of {total} runs finished; submitting "
                f"{len(again)} again"
                + (f"; {len(missing) - len(lost)} still queued or running" if queued else ""),
                file=sys.stderr,
            )
        async with json_events(link, name, enabled=opts.json) as events:
            await resubmit(link, again, secrets.token_hex(4))
            results = await wait_for(opts, link, name, total, waiting, earlier, stored.last_seq)
            await events.settle(results.values())
    every = {r.run: r for r in earlier} | results
    return finish(opts, name, total, list(every.values()), False, started, nats=url)


async def wait_for(
    opts: BatchOptions,
    link: Link,
    name: str,
    total: int,
    runs: set[int],
    earlier: list[RunResult],
    after: int,
) -> dict[int, RunResult]:
    """The result rows of ``runs`` published after the results stream's message
    ``after``, with the progress bar on a terminal."""
    from rolecall.cluster.jobs import follow_results

    results: dict[int, RunResult] = {}
    progress = None
    if not opts.json and not opts.quiet and sys.stdout.isatty():
        from rolecall.batch.progress import TerminalProgress

        progress = TerminalProgress(name, total, earlier)
        progress.__enter__()
    try:
        if runs:
            async with aclosing(follow_results(link, name, after=after)) as stream:
                async for item in stream:
                    if not isinstance(item, RunResult) or item.run not in runs:
                        continue
                    if item.run not in results and progress is not None:
                        progress(item)
                    results[item.run] = item
                    if len(results) >= len(runs):
                        break
    finally:
        if progress is not None:
            progress.__exit__(None, None, None)
    return results


class BatchEvents:
    """Prints every event of the batch's runs from the stream (``--json``), each session's
    in ``seq`` order, as the stream stores them."""

    QUIET_S = 1.0  # a failed run may have no event at all: this long without one ends it
    SETTLE_S = 30.0

    def __init__(self, name: str) -> None:
        self.name = name
        self.orders: dict[str, Reorder] = {}
        self.finals: set[str] = set()
        self._seen = anyio.Event()

    async def run(self, link: Link, after: int) -> None:
        from rolecall.nats.link import H_BATCH, log_filter
        from rolecall.nats.readback import Fence, Reorder, follow, is_final

        feed_of = follow(link, log_filter(None), from_start=after == 0, after=after)
        fence = Fence()  # a worker that lost a run's session may still have appended to it
        async with aclosing(feed_of) as feed:
            async for event in feed:
                if not fence.admits(event) or event.headers.get(H_BATCH) != self.name:
                    continue
                order = self.orders.get(event.session_id)
                if order is None:
                    order = self.orders[event.session_id] = Reorder(event.seq)
                for ready in order.push(event):
                    print(ready.line, flush=True)
                    if is_final(ready.record):
                        self.finals.add(ready.session_id)
                self._seen.set()
                self._seen = anyio.Event()

    async def settle(self, results: Iterable[RunResult]) -> None:
        """Return once every run that ran has printed its final event (a run that failed
        without any: once the stream has been quiet for a moment)."""
        rows = list(results)
        ran = {r.session_id for r in rows if r.session_id and (r.ok or r.turns)}
        with anyio.move_on_after(self.SETTLE_S):
            while not ran <= self.finals:
                await self._seen.wait()
        if {r.session_id for r in rows if r.session_id} <= self.finals:
            return
        while True:
            with anyio.move_on_after(self.QUIET_S) as quiet:
                await self._seen.wait()
            if quiet.cancelled_caught:
                return


class _NoEvents:
    async def settle(self, results: Iterable[RunResult]) -> None:
        return None


@asynccontextmanager
async def json_events(link: Link, name: str, *, enabled: bool) -> AsyncIterator[Any]:
    """With ``enabled``, print the batch's events from now until :meth:`BatchEvents.settle`."""
    if not enabled:
        yield _NoEvents()
        return
    from rolecall.nats.link import EVENTS_STREAM

    mark = int((await link.js.stream_info(EVENTS_STREAM)).state.last_seq)
    events = BatchEvents(name)
    async with anyio.create_task_group() as tg:
        tg.start_soon(events.run, link, mark)
        yield events
        tg.cancel_scope.cancel()
