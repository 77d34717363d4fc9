from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.batch.conftest import cli
from tests.nats_server import NatsServer, nats_server

__all__ = ["cli", "nats", "scripted_world"]


@pytest.fixture
def nats(tmp_path: Path) -> Iterator[NatsServer]:
    """A real ``nats-server -js`` on 127.0.0.1, with its own storage; stopped at the end."""
    with nats_server(tmp_path / "nats") as server:
        yield server


def scripted_world(folder: Path, *, steps: int = 3) -> Path:
    world = folder / "duo"
    world.mkdir(exist_ok=True)
    flow = ", ".join(f"{{id: s{i}, speaker: {'a' if i % 2 else 'b'}}}" for i in range(1, steps + 1))
    (world / "world.yaml").write_text(
        f"""\
name: duo
topic: t
model: scripted
roles: [{{id: a, script: ["a says {{n}} one two three"]}}, {{id: b, script: ["b says {{n}} four five"]}}]
flow:
  steps: [{flow}]
""",
        encoding="utf-8",
    )
    return world
