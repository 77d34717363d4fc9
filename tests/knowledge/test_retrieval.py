"""Per-turn retrieval: a role with knowledge gets passages [k1].. in its prompt, and a
system/knowledge event says which before its model is asked; the offline model cites."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

import rolecall
from rolecall.api.compose import HandlerSink
from rolecall.bus import Envelope
from rolecall.llm.types import GenerationRequest, StreamItem, TextDelta, Usage
from rolecall.storage.sqlite import SqliteStore
from tests.knowledge.test_index import BOTANY

pytestmark = pytest.mark.anyio

WORLD = """name: k
topic: how plants live
knowledge:
  botany:
    paths: [docs/]
roles:
  - id: student
    description: a curious student
    script: ["Why do leaves look green, and what do roots take up?"]
    model: scripted
  - id: professor
    description: a botany professor
    knowledge: [botany]
    knowledge_top_k: 2
    model: MODEL
flow:
  steps:
    - id: ask
      speaker: student
    - id: answer
      speaker: professor
"""


class CapturingModel:
    name = "capture"

    def __init__(self) -> None:
        self.requests: list[GenerationRequest] = []

    async def stream(self, request: GenerationRequest) -> AsyncIterator[StreamItem]:
        self.requests.append(request)
        yield TextDelta("Leaves reflect green light [k1].")
        yield Usage(10, 5)


def make_world(folder: Path, model: str) -> Path:
    (folder / "docs").mkdir()
    (folder / "docs" / "botany.md").write_text(BOTANY)
    (folder / "docs" / "ferns.md").write_text("# Ferns\n\nFerns reproduce with spores.\n")
    (folder / "world.yaml").write_text(WORLD.replace("MODEL", model))
    return folder


async def run(folder: Path, **kwargs: object) -> list[Envelope]:
    events: list[Envelope] = []
    sink = HandlerSink(events.append)
    async with rolecall.open_session(folder, sinks=[sink], **kwargs) as session:  # type: ignore[arg-type]
        await session.run()
    return events


async def test_passages_reach_the_prompt_and_the_event_comes_first(tmp_path: Path) -> None:
    model = CapturingModel()
    events = await run(make_world(tmp_path, "capture"), models={"capture": model})
    kinds = [(e.event.topic, e.event.type) for e in events]
    knowledge = [e for e in events if e.event.type == "knowledge"]
    assert len(knowledge) == 1  # the student has no knowledge: no event for its turn
    event = knowledge[0].event
    assert event.role == "professor" and event.message_id == "m2"
    assert event.query == "Why do leaves look green, and what do roots take up?"
    assert [(p["id"], p["path"], p["line_start"], p["line_end"]) for p in event.passages] == [
        ("k1", "docs/botany.md", 1, 5),
        ("k2", "docs/botany.md", 7, 10),
    ]
    assert all(p["score"] > 0 for p in event.passages)
    start = next(
        i for i, e in enumerate(events) if e.event.type == "start" and e.event.message_id == "m2"
    )
    assert kinds.index(("system", "knowledge")) < start  # published before the model is asked
    (request,) = model.requests
    block = request.messages[-2]
    assert block.role == "system"
    assert (
        "[k1] docs/botany.md:1-5 (Photosynthesis)\n# Photosynthesis\n\nPlants make sugar"
        in block.content
    )
    assert "[k2] docs/botany.md:7-10 (Roots)" in block.content
    assert "Ferns" not in block.content
    assert [r.id for r in request.references] == ["k1", "k2"]


async def test_offline_model_cites_the_passage_that_answers(tmp_path: Path) -> None:
    events = await run(make_world(tmp_path, "offline"))
    messages = [e.event for e in events if e.event.type == "message"]
    answer = messages[1].content
    assert "According to [k1]: Chlorophyll absorbs red and blue light and reflects green" in answer
    assert "(see also [k2])" in answer
    again = await run(tmp_path)  # deterministic
    assert [e.event.content for e in again if e.event.type == "message"][1] == answer


async def test_knowledge_is_stored_with_the_session(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "w").mkdir()
    await run(make_world(tmp_path / "w", "offline"), data_dir=data)
    assert (data / "knowledge.db").is_file()  # the index lives in the data directory
    async with SqliteStore.in_data_dir(data) as store:
        (row,) = await store.list_sessions()
        doc = await store.load(row.id)
    stored = [e for e in doc.events if e["type"] == "knowledge"]
    assert stored and stored[0]["passages"][0]["path"] == "docs/botany.md"
