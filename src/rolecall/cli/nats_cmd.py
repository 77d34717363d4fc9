"""``rolecall watch`` and ``rolecall sessions import``: the NATS stream from anywhere."""

from __future__ import annotations

import argparse
import sys
from contextlib import aclosing
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from rolecall.cli.exits import EXIT_FAILURE
from rolecall.cli.options import Options
from rolecall.cli.registry import add_command
from rolecall.errors import UsageError

if TYPE_CHECKING:
    from rolecall.bus import EventBus
    from rolecall.cluster.jobs import StoredBatch
    from rolecall.nats.link import Link
    from rolecall.nats.readback import Reorder, SessionLog, StreamEvent
    from rolecall.storage.document import SessionDocument
    from rolecall.storage.port import SessionStore


@dataclass(frozen=True, slots=True, kw_only=True)
class WatchOptions(Options):
    """``rolecall watch``."""

    session: str | None = None  # SESSION
    batch: str | None = None  # --batch NAME
    all: bool = False  # --all
    from_start: bool = False  # --from-start


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportOptions(Options):
    """``rolecall sessions import``."""

    session: str | None = None  # SESSION (default: all)
    batch: str | None = None  # --batch NAME


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkerOptions(Options):
    """``rolecall worker``."""

    concurrency: int = 8  # --concurrency K
    ack_wait: float | None = None  # --ack-wait S


def add_watch_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_nats_flag

    p = add_command(
        sub,
        "watch",
        description=(
            "Follow the events of sessions run with --nats, from any machine. SESSION ends "
            "after that session's stop (or pause), --batch NAME after the batch's last run, "
            "--all never (Ctrl-C ends it)."
        ),
        examples=[
            "rolecall watch 20261122-101500-a1b2c3 --nats nats://127.0.0.1:4222 --from-start",
            "rolecall watch --batch sweep1 --nats nats://127.0.0.1:4222",
            "rolecall watch --all --nats nats://127.0.0.1:4222 --json",
        ],
    )
    p.add_argument("session", metavar="SESSION", nargs="?", help="a session id")
    p.add_argument("--batch", metavar="NAME", help="the runs of the batch NAME (batch --nats)")
    p.add_argument("--all", action="store_true", help="every session, until Ctrl-C")
    p.add_argument("--from-start", action="store_true", help="replay the stored events first")
    p.add_argument("--json", action="store_true", help="the events as JSON lines")
    p.add_argument("-q", "--quiet", action="store_true", help="no token lines")
    p.add_argument("-v", "--verbose", action="count", default=0, help="more output")
    p.add_argument("--log-file", help="write structured JSON logs to this file")
    add_nats_flag(p)


def cmd_watch(args: argparse.Namespace) -> int:
    opts = WatchOptions.of(args)
    from rolecall.nats.link import required_nats_url

    if sum(1 for x in (opts.session, opts.batch, opts.all) if x) != 1:
        raise UsageError("watch needs one of SESSION, --batch NAME or --all")
    from rolecall.cli.exits import EXIT_INTERRUPTED

    url = required_nats_url(opts.nats, "watch")
    try:
        interrupted = anyio.run(_until_interrupted, opts, url)
    except KeyboardInterrupt:  # Ctrl-C before the watch took the signal over
        return EXIT_INTERRUPTED
    # Ctrl-C is how --all ends: no traceback, the shell's 130
    return EXIT_INTERRUPTED if interrupted else 0


async def _until_interrupted(opts: WatchOptions, url: str) -> bool:
    """Watch until the stream is done or Ctrl-C (SIGINT) comes; whether it came.

    The signal is taken over here and ends the watch through its cancel scope: left to
    the event loop's own handler, a Ctrl-C arriving while the stream's reader was being
    set up or torn down was sometimes swallowed, and the watch went on (seen in about
    half the runs of tests/cluster/test_watch.py on a loaded machine)."""
    from rolecall.cli.stop_signal import StopOnSignal

    async with anyio.create_task_group() as tg:
        stop = StopOnSignal(tg.cancel_scope)
        tg.start_soon(stop)
        await _watch(opts, url)
        tg.cancel_scope.cancel()
    return stop.heard


async def _watch(opts: WatchOptions, url: str) -> None:
    from rolecall.bus import Envelope, EventBus
    from rolecall.cli.display import display_sink
    from rolecall.nats.link import H_BATCH, connect, log_filter
    from rolecall.nats.readback import Fence, Reorder, follow, is_final

    buses: dict[str, tuple[EventBus, Reorder]] = {}
    fence = Fence()  # a worker that lost a session may still have appended to it
    done: set[str] = set()
    total = await _batch_total(url, opts.batch) if opts.batch is not None else 0
    read = _Progress()

    def bus_of(event: StreamEvent) -> tuple[EventBus, Reorder]:
        found = buses.get(event.session_id)
        if found is None:
            bus = EventBus(event.session_id, first_seq=event.seq)
            display_sink(
                json_mode=opts.json, role_order=[], quiet=opts.quiet, verbose=opts.verbose
            ).attach(bus)
            found = buses[event.session_id] = (bus, Reorder(1 if opts.from_start else event.seq))
        return found

    # --batch replays the batch from its start: its last run may have ended already
    from_start = opts.from_start or opts.batch is not None
    async with (
        connect(url, name="rolecall-watch") as link,
        anyio.create_task_group() as tg,
        aclosing(follow(link, log_filter(opts.session), from_start=from_start)) as events,
    ):
        if opts.batch is not None:
            tg.start_soon(_end_with_batch, link, opts.batch, total, read, tg.cancel_scope)
        async for event in events:
            read.note(event.stream_seq)
            if not fence.admits(event):
                continue
            if opts.batch is not None and event.headers.get(H_BATCH) != opts.batch:
                continue
            bus, order = bus_of(event)
            for ready in order.push(event):
                bus.deliver(Envelope.from_record(ready.record))
                if is_final(ready.record):
                    done.add(ready.session_id)
            if opts.session is not None and opts.session in done:
                return


class _Progress:
    """How far in the stream a reader has read (the stream sequence of its last message)."""

    def __init__(self) -> None:
        self.seen = 0
        self._moved = anyio.Event()

    def note(self, stream_seq: int) -> None:
        self.seen = max(self.seen, stream_seq)
        self._moved.set()
        self._moved = anyio.Event()

    async def reach(self, stream_seq: int) -> None:
        while self.seen < stream_seq:
            await self._moved.wait()


async def _end_with_batch(
    link: Link, batch: str, total: int, read: _Progress, scope: anyio.CancelScope
) -> None:
    """Cancel ``scope`` once every run of the batch has its result, and every event the
    stream held then has been read (a run's events are stored before its result; a batch
    replayed from its start may have thousands)."""
    from rolecall.batch.results import RunResult
    from rolecall.cluster.jobs import follow_results
    from rolecall.nats.link import EVENTS_STREAM

    ended: set[int] = set()
    async with aclosing(follow_results(link, batch)) as results:
        async for item in results:
            if isinstance(item, RunResult):
                ended.add(item.run)
            if len(ended) >= total:
                break
    info = await link.js.stream_info(EVENTS_STREAM)
    await read.reach(int(info.state.last_seq or 0))
    scope.cancel()


async def _batch_total(url: str, batch: str) -> int:
    """How many runs the batch has (its plan on the results stream); usage error if none."""
    from nats.js.errors import NotFoundError

    from rolecall.cluster.jobs import BatchPlanMessage, plan_subject
    from rolecall.nats.link import RESULTS_STREAM, connect

    async with connect(url, name="rolecall-watch") as link:
        try:
            msg = await link.js.get_last_msg(RESULTS_STREAM, plan_subject(batch))
        except NotFoundError:
            raise UsageError(f"no batch named {batch!r} was submitted to {url}") from None
    return BatchPlanMessage.model_validate_json(msg.data or b"{}").runs


def add_import_parser(ssub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_nats_flag
    from rolecall.cli.manage.common import add_manage_flags

    p = add_command(
        ssub,
        "import",
        help="store sessions from a NATS cluster's stream in this data directory",
        description=(
            "Materialise sessions from the ROLECALL_EVENTS stream into the local store, so "
            "results from many machines gather in one database. A session already stored "
            "here is brought up to date when the stream holds more of it."
        ),
        examples=[
            "rolecall sessions import 20261122-101500-a1b2c3 --nats nats://127.0.0.1:4222",
            "rolecall sessions import --batch sweep1 --nats nats://127.0.0.1:4222",
        ],
    )
    p.add_argument("session", metavar="SESSION", nargs="?", help="a session id (default: all)")
    p.add_argument("--batch", metavar="NAME", help="only the sessions of the batch NAME")
    add_nats_flag(p)
    add_manage_flags(p)


def cmd_import(args: argparse.Namespace) -> int:
    opts = ImportOptions.of(args)
    from rolecall.nats.link import required_nats_url

    url = required_nats_url(opts.nats, "sessions import")
    if opts.session and opts.batch:
        raise UsageError("give SESSION or --batch NAME, not both")
    return anyio.run(_import, opts, url)


async def _import(opts: ImportOptions, url: str) -> int:
    from rolecall.cli.wiring import open_store
    from rolecall.cluster.jobs import stored_batch
    from rolecall.nats.link import connect, log_filter
    from rolecall.nats.readback import session_logs

    async with connect(url, name="rolecall-import") as link:
        logs = await session_logs(link, log_filter(opts.session))
        if opts.batch is not None:
            logs = {sid: log for sid, log in logs.items() if log.batch == opts.batch}
        docs, skipped = _importable(logs, url)
        imported_ids = {doc.session_id for doc in docs}
        names = sorted(
            {log.batch for sid, log in logs.items() if log.batch and sid in imported_ids}
        )
        batches: dict[str, StoredBatch] = {name: await stored_batch(link, name) for name in names}
    if not docs:
        for said in skipped:
            print(f"rolecall: not imported: {said}", file=sys.stderr)
        what = opts.session or (f"batch {opts.batch}" if opts.batch else "any session")
        print(f"rolecall: the stream at {url} holds no events of {what}", file=sys.stderr)
        return EXIT_FAILURE
    from rolecall.errors import SessionInUse

    imported = updated = 0
    held: list[str] = []  # what another live session here goes on with: left as it is
    async with open_store(opts) as store:
        for doc in sorted(docs, key=lambda d: d.created_at):
            try:
                claim = store.claim(doc.session_id)  # no resume between delete and import
            except SessionInUse as exc:
                held.append(str(exc))
                continue
            try:
                if await store.has(doc.session_id):
                    stored = await store.load(doc.session_id, with_events=False)
                    if stored.last_seq >= doc.last_seq:
                        continue
                    await store.delete(doc.session_id)
                    updated += 1
                else:
                    imported += 1
                await store.import_document(doc)
            finally:
                claim.release()
        listed = await _record_batches(store, url, batches, logs)
    if not opts.quiet:
        print(
            f"imported {imported} session{'s' if imported != 1 else ''}, updated {updated}, "
            f"{len(docs) - imported - updated - len(held)} already up to date"
            + (f", {len(held)} left as stored (open here)" if held else "")
            + (f", {len(skipped)} skipped (named below)" if skipped else "")
        )
        for name in listed:
            print(f"batch {name}: `rolecall sessions list --batch {name}` lists its sessions")
    for said in [*skipped, *held]:
        print(f"rolecall: not imported: {said}", file=sys.stderr)
    return 1 if held or skipped else 0


def _importable(logs: dict[str, SessionLog], url: str) -> tuple[list[SessionDocument], list[str]]:
    """The sessions of ``logs`` that can be stored here, and why each other one cannot (a
    session id that is not safe in a file name, a session damaged in the stream): checked
    before anything is replaced, since a stored copy is deleted to be updated."""
    from pydantic import ValidationError

    from rolecall.paths import safe_id
    from rolecall.storage.document import check_document

    docs: list[SessionDocument] = []
    skipped: list[str] = []
    for sid, log in sorted(logs.items()):
        try:
            safe_id(sid, "session id")
            doc = log.document()
            if doc is None:
                continue
            safe_id(doc.session_id, "session id")
            docs.append(
                check_document(doc, f"session {sid}", damaged=f"damaged in the stream at {url}")
            )
        except UsageError as exc:
            skipped.append(str(exc))
        except (ValidationError, KeyError, TypeError, ValueError) as exc:
            first = str(exc).splitlines()[0]
            skipped.append(f"session {sid!r}: damaged in the stream at {url}: {first}")
    return docs, skipped


async def _record_batches(
    store: SessionStore, url: str, batches: dict[str, StoredBatch], logs: dict[str, SessionLog]
) -> list[str]:
    """Record each batch of the imported sessions in the store's batch tables, as a local
    batch is (``sessions list --batch NAME``, the web view's filter); the names recorded.
    A batch of that name run here is left alone, with a warning."""
    from rolecall.batch.results import RunResult
    from rolecall.batch.tables import BatchTables
    from rolecall.storage.data_store import sqlite_only

    tables = BatchTables(sqlite_only(store, "sessions import"))
    recorded = []
    for name, stored in batches.items():
        runs: dict[int, tuple[int, str | None, RunResult | None]] = {}
        for run, result in stored.results.items():  # a run's session id is its job's
            sid = result.session_id
            runs[run] = (run, sid if sid and await store.has(sid) else None, result)
        for sid, log in logs.items():
            if log.batch == name and log.run and await store.has(sid):
                ended = stored.results.get(log.run)
                runs[log.run] = (log.run, sid, ended if ended and ended.session_id == sid else None)
        plan = {
            "nats": url,
            "world": stored.plan.world if stored.plan else None,
            "runs": stored.plan.runs if stored.plan else None,
        }
        if await tables.record_imported(name, plan, sorted(runs.values())):
            recorded.append(name)
        else:
            print(
                f"rolecall: this data directory has a batch named {name!r} of its own; the "
                "imported sessions of the cluster's batch are not listed under it",
                file=sys.stderr,
            )
    return recorded


def add_worker_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from rolecall.cli.flags import add_nats_flag, add_service_flags

    p = add_command(
        sub,
        "worker",
        description=(
            "Pull runs from the ROLECALL_JOBS work queue and run them, storing each session "
            "in this data directory and publishing every event. Prints one line starting "
            "'ready:' on stderr once it takes work. Any number of workers on any machines."
        ),
        examples=[
            "rolecall worker --nats nats://127.0.0.1:4222",
            "rolecall worker --nats nats://127.0.0.1:4222 --concurrency 16 --ack-wait 60",
        ],
    )
    add_nats_flag(p)
    p.add_argument(
        "--concurrency", type=int, default=8, metavar="K", help="runs at once (default 8)"
    )
    p.add_argument(
        "--ack-wait",
        type=float,
        default=None,
        metavar="S",
        help="seconds a silent job waits before another worker takes it (default 30); "
        "set by the worker that creates the workers' shared consumer, kept by every other",
    )
    p.add_argument("--data-dir", help="where this worker stores sessions (env ROLECALL_HOME)")
    add_service_flags(p, quiet="no line per job")


def cmd_worker(args: argparse.Namespace) -> int:
    opts = WorkerOptions.of(args)
    from rolecall.cli.flags import at_least_one
    from rolecall.cluster.jobs import ACK_WAIT_RANGE
    from rolecall.nats.link import required_nats_url

    url = required_nats_url(opts.nats, "worker")
    at_least_one(opts.concurrency, "--concurrency")
    if opts.ack_wait is not None:
        low, high = ACK_WAIT_RANGE
        if not low <= opts.ack_wait <= high:  # also NaN, which compares false
            raise UsageError(
                f"--ack-wait must be from {low:g} to {high:g} seconds, got {opts.ack_wait:g}"
            )
    return anyio.run(_work, opts, url)


async def _work(opts: WorkerOptions, url: str) -> int:
    import signal

    from rolecall.batch.runner import BatchContext
    from rolecall.cli.stop_signal import StopOnSignal
    from rolecall.cli.wiring import memory_files, open_store, stream_pacing
    from rolecall.cluster.jobs import ACK_WAIT_S, WORKERS
    from rolecall.cluster.worker import Worker
    from rolecall.llm.registry import ModelRegistry
    from rolecall.nats.link import JOBS_STREAM
    from rolecall.nats.transport import open_transport

    def ready() -> None:
        in_force = worker.ack_wait
        if opts.ack_wait is not None and abs(opts.ack_wait - in_force) > 1e-6:
            print(
                f"rolecall worker: --ack-wait {opts.ack_wait:g} not applied: the workers' "
                f"shared consumer {WORKERS} already has an ack wait of {in_force:g} s, set by "
                "the worker that created it; this worker keeps its jobs alive by that one. To "
                f"change it, stop every worker and delete the consumer {WORKERS} of "
                f"{JOBS_STREAM} (its jobs stay queued); the next worker creates it again.",
                file=sys.stderr,
                flush=True,
            )
        print(
            f"ready: worker pulling {JOBS_STREAM} from {url} ({opts.concurrency} at once, "
            f"ack wait {in_force:g} s)",
            file=sys.stderr,
            flush=True,
        )

    async with (
        open_transport(url, name="rolecall-worker") as transport,
        open_store(opts) as store,
    ):
        ctx = BatchContext(
            store=store, memory=memory_files(opts), models=ModelRegistry(**stream_pacing(True))
        )
        worker = Worker(
            ctx,
            transport,
            concurrency=opts.concurrency,
            ack_wait=ACK_WAIT_S if opts.ack_wait is None else opts.ack_wait,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(StopOnSignal(tg.cancel_scope, signal.SIGINT, signal.SIGTERM))
            await worker.run(ready)
    stats = worker.stats
    print(
        f"worker stopped: {stats.jobs} runs done ({stats.failed} failed, {stats.resumed} "
        "continued from another worker)"
        + (f"; {stats.lost} taken over by another worker" if stats.lost else "")
        + "; runs in flight go to another worker after the ack wait",
        file=sys.stderr,
    )
    return 0
