"""``rolecall compare``: stored runs side by side, and where two of them first part
(docs/compare.md)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rolecall.cli.manage.common import add_manage_flags, text_table, with_store
from rolecall.cli.registry import add_command, summary

if TYPE_CHECKING:
    from rolecall.compare.runs import Difference, RunFigures
    from rolecall.storage.data_store import DataStore


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        sub,
        "compare",
        help=summary("compare"),
        description="Compare stored runs: each run's turns, input/output tokens, cost, wall "
        "time, stop reason and scores, then the first message where the first two differ "
        "(message id, sender, a word diff of the two texts).",
        examples=[
            "rolecall compare 20261122-101500-a1b2c3 20261122-101731-d4e5f6",
            "rolecall compare 2026112 last --json",
            "rolecall compare --batch sweep1",
        ],
    )
    p.add_argument("sessions", nargs="*", metavar="SESSION", help="session ids or prefixes")
    p.add_argument(
        "--batch",
        metavar="NAME",
        help="the runs of batch NAME, grouped by their varied values",
    )
    p.add_argument("--json", action="store_true", help="print the comparison as one JSON document")
    add_manage_flags(p)


def cmd_compare(args: argparse.Namespace) -> int:
    from rolecall.errors import UsageError

    names: list[str] = list(args.sessions)
    if args.batch is None and len(names) < 2:
        raise UsageError("compare needs two or more sessions (ids or prefixes), or --batch NAME")
    if args.batch is not None and names:
        raise UsageError("give sessions or --batch NAME, not both")

    async def body(store: DataStore) -> dict[str, Any]:
        from rolecall.compare.load import compare_batch, compare_sessions

        if args.batch is not None:
            return await compare_batch(store, args.batch)
        return await compare_sessions(store, names)

    from rolecall.cli.options import Options

    missing = f"no batch '{args.batch}'" if args.batch else f"no session '{names[0]}'"
    result = with_store(Options.of(args), body, missing=missing)
    if args.json:
        print(json.dumps(_document(result), ensure_ascii=False, indent=2))
    else:
        print(_text(result))
    return 0


def _document(result: dict[str, Any]) -> dict[str, Any]:
    runs: list[RunFigures] = result["runs"]
    diff: Difference | None = result["difference"]
    out: dict[str, Any] = {"runs": [r.record() for r in runs]}
    if result.get("batch") is not None:
        out["batch"] = result["batch"]
        out["groups"] = [
            {"values": values, "sessions": [r.session_id for r in members]}
            for values, members in result["groups"]
        ]
    out["compared"] = result["compared"]
    out["first_difference"] = diff.record() if diff is not None else None
    return out


def _cost(value: float | None) -> str:
    return "unknown" if value is None else f"${value:.4f}"


def _text(result: dict[str, Any]) -> str:
    from rolecall.compare.runs import render_diff

    runs: list[RunFigures] = result["runs"]
    diff: Difference | None = result["difference"]
    keys: list[str] = []
    for run in runs:
        keys.extend(k for k, _ in run.values if k not in keys)
    header = ("session", *keys, "models", "turns", "in", "out", "cost", "wall", "stop", "scores")
    rows: list[tuple[str, ...]] = []
    for run in runs:
        values = dict(run.values)
        stop = run.stop_reason or run.state
        scores = "; ".join(s.short() for s in run.scores) or "-"
        rows.append(
            (
                run.session_id,
                *(str(values.get(k, "")) for k in keys),
                ",".join(run.models),
                str(run.turns),
                f"{run.input_tokens:,}",
                f"{run.output_tokens:,}",
                _cost(run.cost_usd),
                f"{run.wall_seconds:.1f}s",
                stop,
                scores,
            )
        )
    first = 2 + len(keys)
    lines = [text_table(header, rows, right=set(range(first, first + 5)))]
    a, b = result["compared"]
    lines.append("")
    if diff is None:
        lines.append(f"{a} and {b}: the same messages")
        return "\n".join(lines)
    lines.append(f"first difference of {a} and {b}: message {diff.index + 1} ({diff.what})")
    for side in (diff.a, diff.b):
        if side.message_id is None:
            lines.append(f"  {side.session_id}: (no message: its transcript ends here)")
        else:
            lines.append(f"  {side.session_id}: {side.message_id} {side.sender}")
    if diff.diff:
        lines.append("  " + render_diff(diff.diff))
    return "\n".join(lines)
