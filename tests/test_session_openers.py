"""Batches, cluster workers and the benchmarks hold the public session (issue 36).

They open their sessions with ``rolecall.api.entry.open_live`` (or ``rolecall.open_session``
/ ``resume``) and drive a ``rolecall.Session`` through its public members: none of them
imports the runtime's module (``rolecall.runtime``, whose ``Dialogue`` is internal),
calls the runtime's opener (``open_dialogue``), or hands ``Opening`` an ``on_created``
hook (typed with the runtime's session: ``open_live(..., on_created=)`` gives a
``Session``). :func:`runtime_users` is the scan; the files it reads are listed in
``CONSUMERS``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rolecall

SRC = Path(rolecall.__file__).parent
ROOT = SRC.parent.parent

# the modules that open sessions for a batch, a cluster worker and the benchmarks
CONSUMERS = (
    *sorted((SRC / "batch").rglob("*.py")),
    *sorted((SRC / "cluster").rglob("*.py")),
    *sorted((ROOT / "scripts").rglob("*.py")),
)


def runtime_users(paths: tuple[Path, ...] | list[Path]) -> list[str]:
    """Where one of ``paths`` imports ``rolecall.runtime``, names ``open_dialogue``, or
    gives ``Opening(...)`` an ``on_created`` hook: ``file:line: what``."""
    found: list[str] = []
    for path in paths:
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            what = None
            if isinstance(node, ast.Import):
                if any(a.name.startswith("rolecall.runtime") for a in node.names):
                    what = "imports rolecall.runtime"
            elif isinstance(node, ast.ImportFrom):
                if node.module == "rolecall.runtime" or (
                    node.module == "rolecall" and any(a.name == "runtime" for a in node.names)
                ):
                    what = "imports rolecall.runtime"
                elif any(a.name == "open_dialogue" for a in node.names):
                    what = "imports open_dialogue"
            elif (isinstance(node, ast.Name) and node.id == "open_dialogue") or (
                isinstance(node, ast.Attribute) and node.attr == "open_dialogue"
            ):
                what = ast.unparse(node)
            elif (
                isinstance(node, ast.Call)
                and ast.unparse(node.func).endswith("Opening")
                and any(k.arg == "on_created" for k in node.keywords)
            ):
                what = "Opening(on_created=...)"
            if what is not None:
                found.append(f"{path.name}:{node.lineno}: {what}")
    return sorted(set(found))


def test_batches_workers_and_benchmarks_hold_the_public_session() -> None:
    assert {p.name for p in CONSUMERS} >= {"runner.py", "worker.py", "bench.py", "bench_scale.py"}
    assert runtime_users(CONSUMERS) == []


def test_the_scan_finds_the_runtime_used_another_way(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text(
        "from rolecall.runtime import Dialogue\n"
        "import rolecall.runtime\n"
        "from rolecall import runtime, api\n"
        "from rolecall.api.opening import Opening, open_dialogue\n"
        "def go(world, hook):\n"
        "    opening = Opening(store=None, on_created=hook)\n"
        "    return api.opening.open_dialogue(world, opening)\n"
    )
    (tmp_path / "fine.py").write_text(
        "import rolecall\n"
        "from rolecall.api.entry import open_live\n"
        "from rolecall.api.opening import Opening\n"
        "def go(world, hook) -> rolecall.Session:\n"
        "    return open_live(world, Opening(store=None), on_created=hook)\n"
    )
    assert runtime_users(sorted(tmp_path.glob("*.py"))) == [
        "a.py:1: imports rolecall.runtime",
        "a.py:2: imports rolecall.runtime",
        "a.py:3: imports rolecall.runtime",
        "a.py:4: imports open_dialogue",
        "a.py:6: Opening(on_created=...)",
        "a.py:7: api.opening.open_dialogue",
    ]
