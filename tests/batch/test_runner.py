"""The batch runner in process: K sessions in flight, never more; failures recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from rolecall.batch.plan import build_plan, parse_vary
from rolecall.batch.runner import BatchContext, BatchRunner
from rolecall.batch.tables import BatchTables
from rolecall.errors import ProviderError
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.memory import MemoryFiles
from rolecall.storage.sqlite import SqliteStore
from rolecall.world.library import RoleLibrary
from rolecall.world.loader import build_world

pytestmark = pytest.mark.anyio

RAW: dict[str, Any] = {
    "name": "probe",
    "topic": "t",
    "model": "probe",
    "settings": {"retries": 0},
    "roles": [{"id": "a"}, {"id": "b"}],
    "flow": {"steps": [{"id": "one", "speaker": "a"}, {"id": "two", "speaker": "b"}]},
}


class Probe:
    """A model that counts the generations in flight; a topic 'bad' fails."""

    name = "probe"

    def __init__(self) -> None:
        self.in_flight = 0
        self.most = 0
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        self.in_flight += 1
        self.most = max(self.most, self.in_flight)
        try:
            await anyio.sleep(0.02)
            if request.info.topic == "bad":
                raise ProviderError("the probe refuses bad topics", model="probe")
            yield TextDelta(f"{request.info.speaker} on {request.info.topic}")
            yield Usage(input_tokens=3, output_tokens=2)
        finally:
            self.in_flight -= 1


async def run_batch(tmp_path: Path, vary: list[str], runs: int, k: int) -> tuple[Probe, Any]:
    library = RoleLibrary()
    base = build_world(RAW, source="w", library=library).world
    plan = build_plan(RAW, parse_vary(vary), runs, base=base, source="w", library=library)
    probe = Probe()
    models = ModelRegistry()
    models.register("probe", probe)
    async with SqliteStore(tmp_path / "rolecall.db") as store:
        tables = BatchTables(store)
        await tables.create("b", {"vary": vary})
        ctx = BatchContext(store=store, memory=MemoryFiles(tmp_path / "memory"), models=models)
        runner = BatchRunner("b", plan, ctx, tables, concurrency=k)
        results = await runner.run(plan.runs, {})
        stored = await tables.runs("b")
    assert sorted(stored) == sorted(r.run for r in results)
    assert all(stored[r.run].result == r for r in results)
    return probe, results


async def test_never_more_than_k_sessions_generate_at_once(tmp_path: Path) -> None:
    probe, results = await run_batch(tmp_path, ["topic=x,y,z"], runs=3, k=3)
    assert len(results) == 9 and all(r.ok and r.stop_reason == "flow_end" for r in results)
    assert probe.calls == 18
    assert probe.most == 3  # one generation per session at a time, K sessions in flight


async def test_a_failing_run_is_recorded_and_the_others_finish(tmp_path: Path) -> None:
    probe, results = await run_batch(tmp_path, ["topic=x,bad"], runs=2, k=4)
    assert probe.calls == 2 * 2 + 2  # a failed run stops at its first call (retries: 0)
    by_run = {r.run: r for r in results}
    assert sorted(by_run) == [1, 2, 3, 4]
    assert [by_run[n].ok for n in (1, 2, 3, 4)] == [True, True, False, False]
    assert by_run[3].error is not None and "the probe refuses bad topics" in by_run[3].error
    assert by_run[3].stop_reason is None and by_run[3].turns == 0
    assert by_run[1].turns == 2 and by_run[1].input_tokens == 6
