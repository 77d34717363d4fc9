"""A batch's results: one row per run, the JSON Lines file, and the summary.

A row is what ``--out`` writes, one JSON object per line: ``batch``, ``run``,
``session_id``, the varied values (one field per ``--vary`` key), ``stop_reason``,
``turns``, ``input_tokens``, ``output_tokens``, ``cost_usd`` (null when unknown),
``seconds`` and ``error`` (null when the run finished).
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

FIXED_FIELDS = (
    "batch",
    "run",
    "session_id",
    "stop_reason",
    "turns",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "seconds",
    "error",
)


class RunResult(BaseModel):
    """How one run of a batch ended."""

    model_config = ConfigDict(defer_build=True, frozen=True)

    batch: str
    run: int
    session_id: str | None = None
    values: dict[str, Any] = Field(default_factory=dict)  # as written into the run's world
    stop_reason: str | None = None
    turns: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    seconds: float = 0.0
    error: str | None = None

    @property
    def ok(self) -> bool:
        """The run finished (a stop reason, no error)."""
        return self.error is None and self.stop_reason is not None

    def row(self) -> dict[str, Any]:
        """The flat JSON Lines object: fixed fields, with the varied values after ``session_id``."""
        data = self.model_dump(exclude={"values"})
        out: dict[str, Any] = {k: data[k] for k in ("batch", "run", "session_id")}
        out.update(self.values)
        out.update({k: data[k] for k in FIXED_FIELDS[3:]})
        return out

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> RunResult:
        values = {k: v for k, v in row.items() if k not in FIXED_FIELDS}
        return cls.model_validate({**{k: row.get(k) for k in FIXED_FIELDS}, "values": values})


def write_results(path: Path, results: Iterable[RunResult]) -> None:
    """Write every row, ordered by run, replacing ``path`` atomically."""
    from rolecall.paths import write_atomically

    text = "".join(
        json.dumps(r.row(), ensure_ascii=False) + "\n" for r in sorted(results, key=lambda r: r.run)
    )
    write_atomically(path, text)


def percentile(values: Sequence[float], q: float) -> float | None:
    """The nearest-rank percentile (``q`` in 0..100); None without values."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


class ScoreMeans(BaseModel):
    """One judge's scores of a batch's runs: how many it scored, each criterion's mean."""

    runs: int
    mean: dict[str, float]


class Summary(BaseModel):
    """What a batch came to (the ``world/batch`` line of ``--json``, the table on a terminal)."""

    batch: str
    runs: int
    finished: int
    failed: int
    pending: int = 0  # not run (interrupted batch)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    failed_runs: list[int] = Field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    p50_seconds: float | None = None
    p95_seconds: float | None = None
    seconds: float = 0.0  # wall time of this invocation
    # compare.md: the scores given to its runs after the fact (rolecall score), per
    # judge: how many runs it scored and each criterion's mean over them (each run's
    # latest scoring by that judge)
    scores: dict[str, ScoreMeans] = Field(default_factory=dict)

    @classmethod
    def of(
        cls,
        batch: str,
        total: int,
        results: Sequence[RunResult],
        seconds: float,
        scores: Mapping[str, Sequence[tuple[str, Mapping[str, float]]]] | None = None,
    ) -> Summary:
        """``scores``: each run's session id -> its scorings, oldest first, as
        (judge, scores)."""
        done = [r for r in results if r.ok]
        failed = sorted(r.run for r in results if not r.ok)
        costs = [r.cost_usd for r in results]
        timed = [r.seconds for r in results]
        return cls(
            batch=batch,
            runs=total,
            finished=len(done),
            failed=len(failed),
            pending=total - len(results),
            stop_reasons=dict(Counter(r.stop_reason or "failed" for r in results).most_common()),
            failed_runs=failed,
            input_tokens=sum(r.input_tokens for r in results),
            output_tokens=sum(r.output_tokens for r in results),
            cost_usd=None if not costs or None in costs else sum(c or 0.0 for c in costs),
            p50_seconds=percentile(timed, 50),
            p95_seconds=percentile(timed, 95),
            seconds=round(seconds, 3),
            scores=_means(results, scores or {}),
        )

    def record(self) -> dict[str, Any]:
        return {"topic": "world", "type": "batch", **self.model_dump()}

    def table(self) -> str:
        """The summary a terminal shows at the end of a batch."""
        lines = [f"batch {self.batch}: {self.finished}/{self.runs} runs finished"]
        if self.failed:
            shown = ", ".join(str(n) for n in self.failed_runs[:20])
            more = f" (+{len(self.failed_runs) - 20} more)" if len(self.failed_runs) > 20 else ""
            lines[0] += f", {self.failed} failed (runs {shown}{more})"
        if self.pending:
            lines[0] += f", {self.pending} not run"
        width = max((len(k) for k in self.stop_reasons), default=6)
        lines.append(f"  {'stop':<{width}}  runs")
        lines.extend(f"  {k:<{width}}  {v:>4}" for k, v in self.stop_reasons.items())
        cost = "unknown" if self.cost_usd is None else f"${self.cost_usd:.4f}"
        lines.append(f"  tokens ↑{self.input_tokens:,} ↓{self.output_tokens:,} · cost {cost}")
        if self.p50_seconds is not None and self.p95_seconds is not None:
            lines.append(
                f"  seconds per run: p50 {self.p50_seconds:.2f} · p95 {self.p95_seconds:.2f}"
                f" · wall {self.seconds:.1f}"
            )
        for judge, means in self.scores.items():
            shown = " ".join(f"{k}={v:g}" for k, v in means.mean.items())
            lines.append(f"  scores by {judge} (mean of {means.runs} runs): {shown}")
        return "\n".join(lines)


def _means(
    results: Sequence[RunResult],
    scores: Mapping[str, Sequence[tuple[str, Mapping[str, float]]]],
) -> dict[str, ScoreMeans]:
    latest: dict[str, dict[str, Mapping[str, float]]] = {}  # judge -> session -> scores
    for result in sorted(results, key=lambda r: r.run):
        for judge, values in scores.get(result.session_id or "", ()):
            latest.setdefault(judge, {})[result.session_id or ""] = values
    out: dict[str, ScoreMeans] = {}
    for judge, by_run in latest.items():
        sums: dict[str, list[float]] = {}
        for values in by_run.values():
            for name, value in values.items():
                sums.setdefault(name, []).append(value)
        mean = {k: round(sum(v) / len(v), 3) for k, v in sums.items()}
        out[judge] = ScoreMeans(runs=len(by_run), mean=mean)
    return out
