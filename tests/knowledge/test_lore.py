"""Lore entries: a key in the last few messages puts the entry in the role's prompt,
with a system/lore event naming it; other roles and old messages do not trigger it."""

from __future__ import annotations

from pathlib import Path

import pytest

import rolecall
from rolecall.api.compose import HandlerSink
from rolecall.bus import Envelope
from tests.knowledge.test_retrieval import CapturingModel

pytestmark = pytest.mark.anyio

WORLD = """name: lore
topic: colours of nature
lore:
  - keys: [chlorophyll, pigment]
    text: Chlorophyll absorbs red and blue light and reflects green.
    roles: [teacher]
  - keys: [Sky Blue]
    name: sky
    text: Rayleigh scattering makes the sky blue.
roles:
  - id: student
    model: scripted
    script: ["What pigment makes leaves green?", "Fine.", "Why is the sky blue?"]
  - id: teacher
    model: capture
  - id: parrot
    model: capture
flow:
  steps:
    - id: ask
      speaker: student
    - id: answer
      speaker: teacher
    - id: echo
      speaker: parrot
      next: ask
  stop: [{max_turns: 9}]
"""


async def run(tmp_path: Path) -> tuple[list[Envelope], CapturingModel]:
    (tmp_path / "world.yaml").write_text(WORLD)
    model = CapturingModel()
    events: list[Envelope] = []
    async with rolecall.open_session(
        tmp_path, models={"capture": model}, sinks=[HandlerSink(events.append)]
    ) as session:
        await session.run()
    return events, model


async def test_keys_in_recent_messages_insert_the_entry(tmp_path: Path) -> None:
    events, model = await run(tmp_path)
    lore = [e.event for e in events if e.event.type == "lore"]
    said = {e.event.message_id: e.event.sender for e in events if e.event.type == "message"}
    seen = [(e.role, e.entry, e.key, e.message_id) for e in lore]
    # m2: the teacher answers "What pigment..." (a key of the first entry, for it alone)
    assert seen[0] == ("teacher", "chlorophyll", "pigment", "m2")
    prompts = {r.info.turn: r for r in model.requests}
    block = [m.content for m in prompts[2].messages if m.content.startswith("World info")]
    assert block == [
        "World info (background facts for this turn; use them where they help):\n"
        "- Chlorophyll absorbs red and blue light and reflects green."
    ]
    # the parrot is not among the entry's roles: never given it
    assert all(e.role != "parrot" or e.entry != "chlorophyll" for e in lore)
    # the key is out of the last 4 messages by m7: the teacher's later turns lack it
    late = [e for e in lore if e.entry == "chlorophyll" and int(e.message_id[1:]) > 6]
    assert late == []
    blocks = [m.content for m in prompts[8].messages if m.content.startswith("World info")]
    assert blocks == [
        "World info (background facts for this turn; use them where they help):\n"
        "- Rayleigh scattering makes the sky blue."
    ]
    # "sky blue" (any case, the whole phrase) is for every role
    sky = [(e.role, e.message_id) for e in lore if e.entry == "sky"]
    assert sky == [("teacher", "m8"), ("parrot", "m9")]
    assert said["m7"] == "student"
    assert {e.key for e in lore if e.entry == "sky"} == {"Sky Blue"}
    lore_at = next(i for i, e in enumerate(events) if e.event.type == "lore")
    start = next(
        i for i, e in enumerate(events) if e.event.type == "start" and e.event.message_id == "m2"
    )
    assert lore_at < start  # before the model is asked


async def test_an_entry_for_an_unknown_role_is_a_world_problem(tmp_path: Path) -> None:
    (tmp_path / "world.yaml").write_text(
        "name: l\nlore:\n  - keys: [x]\n    text: y\n    roles: [ghost]\nroles:\n  - id: a\n"
    )
    with pytest.raises(rolecall.WorldError, match=r"lore\[0\]\.roles\[0\]: no role 'ghost'"):
        rolecall.load_world(tmp_path)
