"""The progress bar of a batch on a terminal (prompt-toolkit's ``ProgressBar``).

Runs done / total with the bar, elapsed and remaining time; the title line counts the
runs in flight, the failures and the tokens spent so far (the bar itself moves as runs
end; the title says at once that runs have started). Runs finished by an earlier invocation
(``--resume``) count as done from the start.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from rolecall.batch.results import RunResult


class TerminalProgress:
    def __init__(self, name: str, total: int, earlier: list[RunResult]) -> None:
        self.name = name
        self.total = total
        self.failed = sum(1 for r in earlier if not r.ok)
        self.input_tokens = sum(r.input_tokens for r in earlier)
        self.output_tokens = sum(r.output_tokens for r in earlier)
        self._done_before = len(earlier)
        self.running = 0
        self._bar: Any = None
        self._counter: Any = None

    def title(self) -> str:
        failed = f"{self.failed} failed" if self.failed else "no failure"
        tokens = f"tokens ↑{self.input_tokens:,} ↓{self.output_tokens:,}"
        return f"batch {self.name} · {self.running} running · {failed} · {tokens}"

    def __enter__(self) -> TerminalProgress:
        from prompt_toolkit.shortcuts import ProgressBar

        self._bar = ProgressBar(title=self.title)
        self._bar.__enter__()
        self._counter = self._bar(label="runs", total=self.total)
        self._counter.items_completed = self._done_before
        return self

    def started(self, run: int) -> None:
        """Run ``run`` started."""
        self.running += 1
        if self._bar is not None:
            self._bar.invalidate()

    def __call__(self, result: RunResult) -> None:
        """One run ended."""
        self.running = max(0, self.running - 1)
        if not result.ok:
            self.failed += 1
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        if self._counter is not None:
            self._counter.item_completed()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            bar, self._bar = self._bar, None
            bar.__exit__(kind, exc, tb)
