"""``rolecall batch WORLD``: run a world many times and gather the results (batch.md)."""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from rolecall.cli.options import BatchOptions
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from anyio.abc import TaskStatus

    from rolecall.batch.plan import BatchPlan
    from rolecall.batch.runner import BatchRunner
    from rolecall.batch.tables import BatchTables, StoredRun

EXAMPLES = [
    "rolecall batch debate --vary topic=@topics.txt --runs 2 --out results.jsonl",
    "rolecall batch panel --vary model=openai/gpt-4o-mini,openai/gpt-4o --vary "
    "role.critic.persona='a harsh critic,a kind mentor' --concurrency 16",
    "rolecall batch classroom --vary settings.memory_window=4,12 --name sweep1",
    "rolecall batch --resume sweep1 --out results.jsonl",
    "rolecall sessions list --batch sweep1",
    "rolecall batch debate --vary topic=@topics.txt --nats nats://127.0.0.1:4222",
]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.batch import KEYS_HELP
    from rolecall.cli.flags import add_common_flags, add_nats_flag

    p = add_command(
        sub,
        "batch",
        description=(
            "Run a world many times: every combination of the --vary values, --runs times "
            "each, --concurrency sessions at once. Every run is a stored session."
        ),
        examples=EXAMPLES,
    )
    p.add_argument(
        "world", metavar="WORLD", nargs="?", help="a folder, a world.yaml path, or a name"
    )
    p.add_argument(
        "--vary",
        action="append",
        default=[],
        metavar="KEY=V1,V2",
        help=f"repeatable; the batch is the cross product. KEY: {KEYS_HELP}; "
        "a value starting with [, { or a quote runs to its close, commas included; "
        "KEY=@FILE reads the values one per line",
    )
    p.add_argument("--runs", type=int, default=1, metavar="N", help="runs of each combination")
    p.add_argument(
        "--concurrency", type=int, default=8, metavar="K", help="sessions in flight (default 8)"
    )
    p.add_argument("--name", metavar="NAME", help="the batch id (default generated)")
    p.add_argument("--resume", metavar="NAME", help="finish the batch NAME: nothing is regenerated")
    p.add_argument("--out", metavar="FILE", help="results as JSON Lines, one line per run")
    add_nats_flag(p)
    p.add_argument(
        "--wait",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --nats: wait until every run is done (default), or return once submitted",
    )
    add_common_flags(p, topic_help="replace the world's topic in every run")


def _check_args(opts: BatchOptions) -> None:
    if opts.concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, got {opts.concurrency}")
    if opts.resume:
        given = [
            flag
            for flag, value in (
                ("WORLD", opts.world),
                ("--vary", opts.vary),
                ("--name", opts.name),
                ("--topic", opts.topic),
                ("--max-turns", opts.max_turns),
                ("--model", opts.model),
            )
            if value
        ]
        if given or opts.runs != 1:
            given += ["--runs"] if opts.runs != 1 else []
            raise UsageError(
                f"--resume {opts.resume} runs the batch as it was planned; leave out "
                + ", ".join(given)
            )
    elif not opts.world:
        raise UsageError("batch needs a WORLD (or --resume NAME)")
    if opts.session_file:
        raise UsageError("--session-file is for one session; export batch runs afterwards")
    if opts.out:
        from rolecall.cli.flags import file_to_write

        file_to_write(opts.out, "--out")  # written at the end: refused before anything runs


def _raw_world(opts: BatchOptions) -> dict[str, Any]:
    """A new batch's plan document: the world file as written plus the overrides."""
    import yaml

    from rolecall.cli.manage import role_library
    from rolecall.paths import read_text
    from rolecall.world.loader import load_world

    assert opts.world is not None  # _check_args: a new batch has its WORLD
    loaded = load_world(opts.world, role_library(opts))  # every problem, exit 2
    for warning in loaded.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    assert loaded.path is not None
    raw = yaml.safe_load(read_text(loaded.path))
    if opts.topic:
        raw["topic"] = opts.topic
    if opts.max_turns is not None:
        if opts.max_turns < 1:
            raise UsageError(f"--max-turns must be at least 1, got {opts.max_turns}")
        raw["settings"] = {**(raw.get("settings") or {}), "max_turns": opts.max_turns}
    model = opts.model or os.environ.get("ROLECALL_MODEL") or None
    return {
        "world": raw,
        "source": str(loaded.path),
        "vary": list(opts.vary),
        "runs": opts.runs,
        "model_override": model,
        "approve": opts.approve,  # --approve: what a worker answers `ask` calls with
    }


def _plan_of(doc: dict[str, Any], opts: BatchOptions) -> BatchPlan:
    from rolecall.batch.plan import build_plan, read_vary
    from rolecall.cli.manage import role_library
    from rolecall.world.loader import build_world

    library = role_library(opts)
    path = Path(doc["source"])
    base = build_world(doc["world"], source=doc["source"], library=library, path=path).world
    axes, problems = read_vary(doc["vary"])
    return build_plan(
        doc["world"],
        axes,
        doc["runs"],
        base=base,
        source=doc["source"],
        library=library,
        path=path,
        problems=problems,
    )


def _default_name(world: str) -> str:
    from rolecall.session.ids import new_session_id

    return f"{world}-{new_session_id()}"


def cmd_batch(args: argparse.Namespace) -> int:
    from rolecall.nats.link import nats_url
    from rolecall.paths import safe_id

    opts = BatchOptions.of(args)
    _check_args(opts)
    if opts.resume:
        name = safe_id(opts.resume, "batch name")
        doc: dict[str, Any] | None = None
        plan = None
    else:
        doc = _raw_world(opts)
        plan = _plan_of(doc, opts)  # --vary problems: exit 2 before anything runs
        name = safe_id(opts.name or _default_name(plan.worlds[0].name), "batch name")
    if url := nats_url(opts.nats):
        from rolecall.cli.batch_nats import resume_batch, submit_batch
        from rolecall.nats.link import subject_token

        subject_token(name, "batch name")  # a usage error before anything is submitted

        if opts.resume:
            return anyio.run(resume_batch, opts, name, url)
        assert doc is not None
        assert plan is not None
        return anyio.run(submit_batch, opts, name, doc, plan, url)
    try:
        return anyio.run(_main, opts, name, doc, plan)
    except KeyboardInterrupt:  # before the batch listens for Ctrl-C: nothing ran yet
        from rolecall.cli.exits import EXIT_INTERRUPTED

        print(f"rolecall: interrupted; batch {name} ran nothing", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _main(
    opts: BatchOptions, name: str, doc: dict[str, Any] | None, plan: BatchPlan | None
) -> int:
    from rolecall.batch.tables import BatchTables
    from rolecall.cli.wiring import open_store
    from rolecall.storage.data_store import sqlite_only

    async with anyio.create_task_group() as tg, open_store(opts) as store:
        interrupts = Interrupts()
        await tg.start(interrupts.watch)  # from here on Ctrl-C is heard, never a traceback
        tables = BatchTables(sqlite_only(store, "rolecall batch"))
        claim = tables.claim(name)  # a second process running it: exit 1, nothing run
        try:
            code = await _claimed(opts, name, doc, plan, store, tables, interrupts)
        finally:
            claim.release()
            tg.cancel_scope.cancel()
    return code


class Interrupts:
    """Ctrl-C during a batch: the runner is told at once (the runs in flight pause, no
    new one starts), also when it comes before the runner exists."""

    def __init__(self) -> None:
        self.heard = False
        self.runner: BatchRunner | None = None

    async def watch(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        with anyio.open_signal_receiver(signal.SIGINT) as signals:
            task_status.started()
            async for _ in signals:
                self.heard = True
                if self.runner is not None:
                    self.runner.interrupt()

    def attach(self, runner: BatchRunner) -> None:
        self.runner = runner
        if self.heard:
            runner.interrupt()


async def _claimed(
    opts: BatchOptions,
    name: str,
    doc: dict[str, Any] | None,
    plan: BatchPlan | None,
    store: Any,
    tables: BatchTables,
    interrupts: Interrupts,
) -> int:
    """The batch, claimed: a new one recorded, or a stored one's plan read; then run."""
    from rolecall.cli.wiring import memory_files

    if doc is None:
        doc = await tables.plan(name)
        if doc is None:
            known = await tables.names()
            listed = f" (batches: {', '.join(known[-10:])})" if known else " (none stored)"
            raise UsageError(f"no batch named {name!r} in this data directory{listed}")
        if cluster := doc.get("nats"):  # imported by `sessions import`: run on a cluster
            import shlex

            again = f"rolecall batch --resume {name} --nats {shlex.quote(cluster)}"
            raise UsageError(
                f"batch {name!r} ran on the NATS cluster at {cluster} (its sessions were "
                f"imported here): `{again}` finishes it there"
            )
        plan = _plan_of(doc, opts)
    else:
        await tables.create(name, doc)
    assert plan is not None
    stored = await tables.runs(name)
    memory = memory_files(opts)
    return await _run(opts, name, doc, plan, store, tables, stored, memory, interrupts)


async def _run(
    opts: BatchOptions,
    name: str,
    doc: dict[str, Any],
    plan: BatchPlan,
    store: Any,
    tables: Any,
    stored: dict[int, StoredRun],
    memory: Any,
    interrupts: Interrupts,
) -> int:
    from rolecall.batch.runner import BatchContext, BatchRunner
    from rolecall.cli.display import JsonSink
    from rolecall.cli.wiring import approver_of, replay_setup, stream_pacing
    from rolecall.llm.registry import ModelRegistry

    earlier = [s.result for s in stored.values() if s.result is not None and s.result.ok]
    done = {r.run for r in earlier}
    sessions = {run: s.session_id for run, s in stored.items() if s.session_id}
    ctx = BatchContext(
        store=store,
        memory=memory,
        models=ModelRegistry(**stream_pacing(True), replay=replay_setup(opts, None)),
        model_override=doc.get("model_override"),
        world_source=doc["source"],
        on_event=JsonSink(sys.stdout) if opts.json else None,
        approver=approver_of(opts),
    )
    show_bar = not opts.json and not opts.quiet and sys.stdout.isatty()
    if not opts.json and not opts.quiet:
        verb = "resuming" if opts.resume else "running"
        print(
            f"batch {name}: {verb} {plan.total - len(done)} of {plan.total} runs, "
            f"{opts.concurrency} at once",
            file=sys.stderr,
        )
    started = time.monotonic()
    progress = None
    if show_bar:
        from rolecall.batch.progress import TerminalProgress

        progress = TerminalProgress(name, plan.total, earlier)
    from rolecall.cli.batch_report import finish

    runner = BatchRunner(name, plan, ctx, tables, concurrency=opts.concurrency, listener=progress)
    interrupts.attach(runner)
    if progress is not None:
        with progress:
            await runner.run(plan.runs, sessions, skip=done)
    else:
        await runner.run(plan.runs, sessions, skip=done)
    results = [*earlier, *runner.results]
    from rolecall.storage.scores import scores_of

    scored = await scores_of(store, [r.session_id for r in results if r.session_id])
    by_session = {sid: [(s.judge, s.scores) for s in items] for sid, items in scored.items()}
    return finish(opts, name, plan.total, results, runner.interrupted, started, scores=by_session)
