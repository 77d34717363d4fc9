"""The tests open their sessions as a user does (issue 52): through ``rolecall.open_session``,
``resume`` or ``run`` (or ``rolecall.api.entry.open_live`` / ``open_served``, which they
use), with ``rolecall.testing.FunctionModel`` or the world's ``scripted``/``offline``
models standing in for a provider, and read them through the public ``rolecall.Session``.

None builds the runtime's session (``rolecall.runtime.Dialogue``, internal) itself, or
imports ``rolecall.runtime`` to, or wires one from the composition root's parts
(``rolecall.api.compose.assemble``, ``attach_store``): a test that did would test wiring
no user has (a store attached by hand, a hook set on the runtime) and read members the
public session does not offer. ``tests/helpers.py`` has ``opened()`` and ``run_flow()`` for the common case.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
RUNTIME = "rolecall.runtime"
CLASS = "Dialogue"
COMPOSE = "rolecall.api.compose"
WIRING = frozenset({"assemble", "attach_store"})  # the composition root's parts
ALLOWED = {
    "test_private_access.py": "reads the runtime class's name, to find it built in src/",
}
"""Test modules that may import the runtime, and why (none of them builds a session)."""


def _imports_runtime(node: ast.AST) -> bool:
    if isinstance(node, ast.Import):
        return any(a.name == RUNTIME or a.name.startswith(RUNTIME + ".") for a in node.names)
    if isinstance(node, ast.ImportFrom):
        return node.module == RUNTIME or (
            node.module == "rolecall" and any(a.name == "runtime" for a in node.names)
        )
    return False


def runtime_sessions(root: Path = TESTS) -> list[str]:
    """Where a test module under ``root`` builds the runtime's session (``Dialogue(...)``,
    however it was imported or named) or imports ``rolecall.runtime``."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text("utf-8"))
        names = {CLASS}  # the class, and what it was imported as
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == RUNTIME:
                names.update(a.asname or a.name for a in node.names if a.name == CLASS)
        for node in ast.walk(tree):
            what = None
            if _imports_runtime(node) and rel not in ALLOWED:
                what = f"imports {RUNTIME}"
            elif isinstance(node, ast.ImportFrom) and node.module == COMPOSE:
                wired = sorted(a.name for a in node.names if a.name in WIRING)
                if wired:
                    what = f"imports {', '.join(wired)} from {COMPOSE}"
            elif isinstance(node, ast.Call):
                func = node.func
                if (isinstance(func, ast.Name) and func.id in names) or (
                    isinstance(func, ast.Attribute) and func.attr == CLASS
                ):
                    what = f"{ast.unparse(func)}(...)"
            if what is not None:
                found.append((rel, getattr(node, "lineno", 0), what))
    return [f"{rel}:{line}: {what}" for rel, line, what in sorted(found)]


def test_no_test_builds_or_wires_the_runtimes_session() -> None:
    assert runtime_sessions() == []


def test_the_allowed_modules_exist_and_still_need_it() -> None:
    for name in ALLOWED:
        tree = ast.parse((TESTS / name).read_text("utf-8"))
        assert any(_imports_runtime(node) for node in ast.walk(tree)), name


def test_the_scan_finds_the_runtimes_session_built_or_imported(tmp_path: Path) -> None:
    (tmp_path / "chat").mkdir()
    (tmp_path / "chat" / "test_a.py").write_text(
        "from rolecall.runtime import Dialogue\n"
        "from rolecall.runtime import Dialogue as Live\n"
        "import rolecall.runtime\n"
        "from rolecall import runtime, testing\n"
        "from rolecall.api.compose import HandlerSink, assemble, attach_store\n"
        "async def test_x(world):\n"
        "    session = Dialogue(world)\n"
        "    Live(world, models=None)\n"
        "    rolecall.runtime.Dialogue(world)\n"
        "    runtime.Dialogue(world)\n"
        "    return session\n"
    )
    (tmp_path / "test_fine.py").write_text(
        "import rolecall\n"
        "from rolecall.testing import FunctionModel\n"
        "text = 'Dialogue(world) in a string is no call'\n"
        "async def test_y(world):\n"
        "    async with rolecall.open_session(world) as session:\n"
        "        return await session.run()\n"
    )
    assert runtime_sessions(tmp_path) == [
        "chat/test_a.py:1: imports rolecall.runtime",
        "chat/test_a.py:2: imports rolecall.runtime",
        "chat/test_a.py:3: imports rolecall.runtime",
        "chat/test_a.py:4: imports rolecall.runtime",
        "chat/test_a.py:5: imports assemble, attach_store from rolecall.api.compose",
        "chat/test_a.py:7: Dialogue(...)",
        "chat/test_a.py:8: Live(...)",
        "chat/test_a.py:9: rolecall.runtime.Dialogue(...)",
        "chat/test_a.py:10: runtime.Dialogue(...)",
    ]
