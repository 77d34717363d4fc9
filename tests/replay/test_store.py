"""The replay store in process: occurrences, corrupt files, chunk boundaries."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rolecall.errors import ProviderRefused, UsageError
from rolecall.llm.registry import ModelRegistry
from rolecall.llm.replay import ReplaySetup, ReplayStore
from rolecall.llm.types import (
    ChatMessage,
    GenerationRequest,
    Persona,
    StreamItem,
    TextDelta,
    TurnInfo,
    Usage,
)

pytestmark = pytest.mark.anyio


class Counting:
    """Answers ``answer <k>`` in two chunks, k counting its calls."""

    name = "counting"

    def __init__(self) -> None:
        self.calls = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.calls += 1
        yield TextDelta("answer ")
        yield TextDelta(str(self.calls))
        yield Usage(3, 2, cost_usd=0.5, finish_reason="length")


def request(text: str = "hi") -> GenerationRequest:
    return GenerationRequest(
        model="counting",
        messages=(ChatMessage("user", text),),
        persona=Persona("a", "A"),
        info=TurnInfo(
            turn=1, n=1, speaker="a", target=None, target_text=None, topic="t", step_id="s1"
        ),
    )


async def collect(registry: ModelRegistry, req: GenerationRequest) -> list[StreamItem]:
    return [item async for item in registry.get("counting").stream(req)]


def registry(path: Path, mode: str, model: Counting) -> ModelRegistry:
    reg = ModelRegistry(replay=ReplaySetup(mode, ReplayStore(path)))  # type: ignore[arg-type]
    reg.register("counting", model)
    return reg


async def test_the_ith_identical_call_gets_the_ith_recording(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rec = registry(path, "record", Counting())
    first = [await collect(rec, request()) for _ in range(2)]
    assert first[0][1] == TextDelta("1") and first[1][1] == TextDelta("2")
    model = Counting()
    rep = registry(path, "replay", model)
    again = [await collect(rep, request()) for _ in range(3)]
    assert again[:2] == first  # chunks, usage and cost as recorded
    last = again[0][-1]
    assert isinstance(last, Usage) and (last.cost_usd, last.finish_reason) == (0.5, "length")
    assert again[2] == first[1]  # past the last recording: the last
    assert model.calls == 0
    with pytest.raises(ProviderRefused, match=r"role a, step s1.*messages\[0\]\.content"):
        await collect(rep, request("hello"))


async def test_a_corrupt_store_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    await collect(registry(path, "record", Counting()), request())
    with path.open("a", encoding="utf-8") as out:
        out.write("{not json\n")
    with pytest.raises(UsageError, match=r"r\.jsonl, line 2: not a recording"):
        await collect(registry(path, "replay", Counting()), request())
