"""The end of a batch: the results file, the summary (table or JSON line), the exit code."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rolecall.batch.results import RunResult

if TYPE_CHECKING:
    from rolecall.cli.options import BatchOptions


def finish(
    opts: BatchOptions,
    name: str,
    total: int,
    results: list[RunResult],
    interrupted: bool,
    started: float,
    *,
    nats: str | None = None,
    scores: dict[str, list[tuple[str, dict[str, float]]]] | None = None,
) -> int:
    from rolecall.batch.results import Summary, write_results
    from rolecall.cli.exits import EXIT_FAILURE, EXIT_INTERRUPTED, EXIT_OK
    from rolecall.cli.hints import command

    summary = Summary.of(name, total, results, time.monotonic() - started, scores)
    unwritten = None
    if opts.out:
        try:
            write_results(Path(opts.out), results)
        except OSError as exc:  # checked before the batch ran; changed since, or a full disk
            unwritten = f"{type(exc).__name__}: {exc.strerror or exc}"
    if opts.json:
        import json

        print(json.dumps(summary.record(), ensure_ascii=False), flush=True)
    elif not opts.quiet:
        print(summary.table())
    hint = f"`{command(f'sessions list --batch {name}', opts)}` lists its sessions"
    if nats is not None:
        gather = command(f"sessions import --batch {name} --nats {nats}", opts)
        hint = f"`{gather}` gathers its sessions here"
    if unwritten is not None:
        where = "" if nats is None else f" --nats {nats}"
        print(
            f"rolecall: cannot write the results to {opts.out} ({unwritten}); the runs are "
            f"stored: `{command(f'batch --resume {name}{where} --out FILE', opts)}` writes them",
            file=sys.stderr,
        )
    if interrupted:
        print(
            f"rolecall: interrupted; the runs in flight are saved as paused. "
            f"`{command(f'batch --resume {name}', opts)}` finishes the batch.",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    if summary.failed:
        where = "" if nats is None else f" --nats {nats}"
        retry = (
            f"`{command(f'batch --resume {name}{where}', opts)}` retries them from their "
            "last stored turn"
        )
        print(
            f"rolecall: {summary.failed} of {summary.runs} runs failed (runs "
            f"{', '.join(map(str, summary.failed_runs[:20]))}); nothing was lost: "
            f"{retry}; {hint}",
            file=sys.stderr,
        )
        return EXIT_FAILURE
    if unwritten is not None:
        return EXIT_FAILURE
    if not opts.json and not opts.quiet:
        print(f"batch {name} done; {hint}", file=sys.stderr)
    return EXIT_OK
