"""The command line (but its REPL) holds the public ``rolecall.Session`` only (issue 36).

Its commands open a session through ``rolecall.api.entry.open_live`` (``cli/wiring.py``)
and drive it through the public members (``status``, ``settle()``, ``annotate()``,
``cancel_reply()``...). No module of ``cli/`` outside ``cli/repl/``, nor the debug log
and the tracing it attaches, imports the runtime (``rolecall.runtime``: its session
class, anything else) or opens a session with the runtime's opener (``open_dialogue``).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rolecall

SRC = Path(rolecall.__file__).parent
OPENER = "open_dialogue"


def command_line_modules(src: Path = SRC) -> list[Path]:
    """``cli/*`` but the REPL's package, and the debug log and tracing it attaches."""
    cli = [p for p in sorted((src / "cli").rglob("*.py")) if "repl" not in p.parts]
    return cli + [p for p in (src / "debuglog.py", src / "tracing.py") if p.exists()]


def runtime_uses(paths: list[Path], src: Path = SRC) -> list[str]:
    found: list[str] = []
    for path in paths:
        rel = path.relative_to(src).as_posix()
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            what = None
            if isinstance(node, ast.Import):
                if any(a.name == "rolecall.runtime" for a in node.names):
                    what = "imports rolecall.runtime"
            elif isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names}
                if node.module == "rolecall.runtime" or (
                    node.module == "rolecall" and "runtime" in names
                ):
                    what = "imports rolecall.runtime"
                elif OPENER in names:
                    what = f"imports {OPENER}"
            elif (isinstance(node, ast.Name) and node.id == OPENER) or (
                isinstance(node, ast.Attribute) and node.attr == OPENER
            ):
                what = ast.unparse(node)
            if what is not None:
                found.append(f"{rel}:{node.lineno}: {what}")
    return found


def test_the_command_line_holds_the_public_session_only() -> None:
    modules = command_line_modules()
    assert SRC / "cli" / "wiring.py" in modules and SRC / "tracing.py" in modules
    assert not any("repl" in p.parts for p in modules)
    assert runtime_uses(modules) == []


def test_the_scan_finds_the_runtime_imported_or_its_opener_called(tmp_path: Path) -> None:
    cli = tmp_path / "cli"
    (cli / "repl").mkdir(parents=True)
    (cli / "running.py").write_text(
        "import rolecall.runtime\n"
        "from rolecall.runtime import new_session_id\n"
        "from rolecall import runtime\n"
        "from rolecall.api.opening import open_dialogue as opener\n"
        "from rolecall.api import opening\n"
        "def go(world):\n"
        "    return opening.open_dialogue(world)\n"
    )
    (cli / "repl" / "app.py").write_text("from rolecall.runtime import Dialogue\n")
    (cli / "fine.py").write_text(
        "from rolecall.api.entry import open_live\n"
        "from rolecall.session.ids import new_session_id\n"
        "def go(world, opening):\n"
        "    return open_live(world, opening)\n"
    )
    (tmp_path / "tracing.py").write_text("def open_dialogue_free(): ...\n")
    modules = command_line_modules(tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in modules] == [
        "cli/fine.py",
        "cli/running.py",
        "tracing.py",
    ]
    assert runtime_uses(modules, tmp_path) == [
        "cli/running.py:1: imports rolecall.runtime",
        "cli/running.py:2: imports rolecall.runtime",
        "cli/running.py:3: imports rolecall.runtime",
        "cli/running.py:4: imports open_dialogue",
        "cli/running.py:7: opening.open_dialogue",
    ]
