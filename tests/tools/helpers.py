"""Worlds with tools for the tests, written as a user writes them, and run by the CLI."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml

from tests.cli.test_run_cli import rolecall

PY = sys.executable
TIME = [PY, "-m", "mcp_server_time", "--local-timezone", "UTC"]
FIXTURE = [PY, "-m", "tests.tools.mcp_fixture"]
NOTES = [PY, "-m", "rolecall.examples.mcp_notes"]


def write_world(folder: Path, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "world.yaml").write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return folder


def one_step_world(
    script: list[Any],
    *,
    tools: dict[str, Any],
    role_tools: list[str],
    approve: Any = "auto",
    settings: dict[str, Any] | None = None,
    steps: int = 1,
) -> dict[str, Any]:
    """A clerk (scripted, with tools) speaks ``steps`` times in a flow."""
    names = [f"s{i}" for i in range(1, steps + 1)]
    return {
        "name": "desk",
        "topic": "tools",
        "model": "scripted",
        "tools": tools,
        "settings": settings or {},
        "roles": [
            {"id": "clerk", "tools": role_tools, "approve": approve, "script": script},
        ],
        "flow": {
            "start": names[0],
            "steps": [
                {"id": n, "speaker": "clerk", **({"next": names[i + 1]} if i + 1 < steps else {})}
                for i, n in enumerate(names)
            ],
        },
    }


def events(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def of(evs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    topic, _, type_ = kind.partition("/")
    return [e for e in evs if e["topic"] == topic and e["type"] == type_]


__all__ = [
    "FIXTURE",
    "NOTES",
    "PY",
    "TIME",
    "events",
    "of",
    "one_step_world",
    "rolecall",
    "write_world",
]
