"""Long sessions: a 2,000-message session folds older messages into running summaries
within its context budget, keeps its thread, keeps every message, and a resumed session
reuses the stored summaries instead of asking again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import rolecall
from rolecall.llm.offline import OfflineModel
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.storage.sqlite import SqliteStore

pytestmark = pytest.mark.anyio

WORLD = """name: long
topic: planning a garden
settings:
  max_turns: 5000
  context_tokens: 1500
roles:
  - id: host
    model: scripted
    script: ["Let us plan the zanzibar orchid bed by the west fence."]
  - id: alice
    description: a gardener
  - id: bob
    description: a botanist
flow:
  steps:
    - id: open
      speaker: host
    - id: a
      speaker: alice
    - id: b
      speaker: bob
      next: a
"""


class Counting:
    """The offline model, counting the summaries it is asked for and keeping each
    turn's request."""

    name = "offline"
    repeatable = True

    def __init__(self) -> None:
        self.model = OfflineModel()
        self.summaries = 0
        self.turns: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        if request.info.purpose == "summary":
            self.summaries += 1
        else:
            self.turns.append(request)
        async for item in self.model.stream(request):
            if isinstance(item, Usage) and request.info.purpose == "turn":
                # words of this turn's own: over 2000 turns the offline model says the
                # same things again, which would be a stall (real-models.md)
                n = request.info.turn
                yield TextDelta(" (" + " ".join(f"t{n}w{i}" for i in range(8)) + ")")
            yield item


async def test_a_long_session_keeps_its_thread_and_resumes(tmp_path: Path) -> None:
    (tmp_path / "world.yaml").write_text(WORLD)
    straight = Counting()
    folds: list[int] = []  # summaries asked after each step
    async with rolecall.open_session(
        tmp_path, models={"offline": straight}, mode="step"
    ) as session:
        for _ in range(2000):
            await session.step()
            folds.append(straight.summaries)
        transcript = session.transcript
    assert len(transcript) == 2000  # nothing dropped
    assert straight.summaries > 50
    for request in straight.turns:  # every prompt within the budget
        assert sum((len(m.content) + 3) // 4 + 4 for m in request.messages) <= 1500 + 200
    last = straight.turns[-1]
    first_system = last.messages[1].content
    assert first_system.startswith("Summary of the conversation so far (m1 to m")
    assert "It began with: Let us plan the zanzibar orchid bed by the west fence." in first_system
    for role in ("alice", "bob"):  # each role's own summary, from the first message on
        own = [r for r in straight.turns if r.info.speaker == role][-1]
        assert own.messages[1].content.startswith("Summary of the conversation so far (m1 to m")

    # stop after a step whose next step asks no summary, resume, take that step
    n = next(i for i in range(300, 400) if folds[i] == folds[i - 1])
    data = tmp_path / "data"
    before = Counting()
    async with rolecall.open_session(
        tmp_path, data_dir=data, models={"offline": before}, mode="step"
    ) as session:
        for _ in range(n):
            await session.step()
        sid = session.session_id
    after = Counting()
    async with rolecall.resume(sid, data_dir=data, models={"offline": after}, mode="step") as again:
        await again.step()
    assert after.summaries == 0  # the stored summaries are used, none asked for
    assert after.turns[0].messages == straight.turns[n - 1].messages  # the same prompt
    async with SqliteStore.in_data_dir(data) as store:
        doc = await store.load(sid)
    assert len(doc.messages) == n + 1
    stored = [e for e in doc.events if e["type"] == "summary"]
    assert len(stored) == before.summaries
    assert {e["from_id"] for e in stored} == {"m1"}
