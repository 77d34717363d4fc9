"""``rolecall batch WORLD --nats URL``: submit the runs as jobs; follow their results.

The plan is built and checked here first (bad ``--vary`` input is exit 2, nothing
submitted); each run becomes a job with its own session id. With ``--wait`` (the
default) the command shows the same progress bar and summary as a local batch, from the
result rows the workers publish, and writes ``--out``; ``--no-wait`` returns once every
job is stored in the work queue.
"""

from __future__ import annotations

import argparse
import sys
import time
from contextlib import aclosing
from typing import Any

from rolecall.batch.plan import BatchPlan
from rolecall.batch.results import RunResult
from rolecall.errors import UsageError


def jobs_of(name: str, doc: dict[str, Any], plan: BatchPlan) -> list[Any]:
    from rolecall.nats.jobs import Job
    from rolecall.runtime import new_session_id
    from rolecall.session.document import world_dict

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
            )
        )
    return jobs


async def submit_batch(
    args: argparse.Namespace, name: str, doc: dict[str, Any], plan: BatchPlan, url: str
) -> int:
    from nats.js.errors import NotFoundError

    from rolecall.cli.batch_report import finish
    from rolecall.nats.jobs import BatchPlanMessage, follow_results, plan_subject, submit
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
        await submit(
            link, BatchPlanMessage(batch=name, runs=plan.total, world=plan.worlds[0].name), jobs
        )
        if not args.quiet:
            print(f"batch {name}: submitted {plan.total} runs to {url}", file=sys.stderr)
        if not args.wait:
            print(
                f"`rolecall watch --batch {name} --nats {url}` follows it; workers run it "
                f"(`rolecall worker --nats {url}`)",
                file=sys.stderr,
            )
            return 0
        results: dict[int, RunResult] = {}
        progress = None
        if not args.json and not args.quiet and sys.stdout.isatty():
            from rolecall.batch.progress import TerminalProgress

            progress = TerminalProgress(name, plan.total, [])
            progress.__enter__()
        try:
            async with aclosing(follow_results(link, name)) as stream:
                async for item in stream:
                    if not isinstance(item, RunResult) or item.run in results:
                        continue
                    results[item.run] = item
                    if progress is not None:
                        progress(item)
                    if len(results) >= plan.total:
                        break
        finally:
            if progress is not None:
                progress.__exit__(None, None, None)
    return finish(args, name, plan, list(results.values()), False, started, nats=url)
