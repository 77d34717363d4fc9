"""The REPL holds a public ``rolecall.Session`` and nothing of the runtime (issue 36).

Its modules (``src/rolecall/cli/repl/``) import neither ``rolecall.runtime`` nor
``open_dialogue`` (sessions open through ``cli.repl.live.open_live_session``, that is
``rolecall.api.entry.open_live``), and every member they read or call on a session is
one of ``rolecall.Session``'s public members (docs/api.md): a session parameter, a
name bound to one (``s = self.session``), or an ``x.session`` attribute.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rolecall
from rolecall.api.session import Session

REPL = Path(rolecall.__file__).parent / "cli" / "repl"
PUBLIC = {name for name in dir(Session) if not name.startswith("_")}


def _modules() -> list[Path]:
    found = sorted(REPL.glob("*.py"))
    assert len(found) > 5, f"no REPL modules under {REPL}"
    return found


def runtime_imports(path: Path) -> list[str]:
    """Where ``path`` imports the runtime or the runtime's opener."""
    out: list[str] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        for name in names:
            if name.startswith("rolecall.runtime") or name.endswith(
                ("open_dialogue", "rolecall.runtime")
            ):
                out.append(f"{path.name}:{node.lineno}: imports {name}")
        if isinstance(node, ast.Name | ast.Attribute):
            named = node.id if isinstance(node, ast.Name) else node.attr
            if named in ("open_dialogue", "Dialogue"):
                out.append(f"{path.name}:{node.lineno}: uses {named}")
    return out


def _annotated_session(arg: ast.arg) -> bool:
    ann = arg.annotation
    text = ann.value if isinstance(ann, ast.Constant) else ast.unparse(ann) if ann else ""
    return str(text) in ("Session", "Session | None")


def session_reads(path: Path) -> list[str]:
    """Members read on a session in ``path`` that ``rolecall.Session`` does not offer."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        names = {a.arg for a in args if _annotated_session(a)}
        for node in ast.walk(fn):  # s = self.session, session = self.session, ...
            if isinstance(node, ast.Assign) and (
                (isinstance(node.value, ast.Attribute) and node.value.attr == "session")
                or (isinstance(node.value, ast.Name) and node.value.id in names)
            ):
                names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        for node in ast.walk(fn):
            if not isinstance(node, ast.Attribute):
                continue
            owner = node.value
            held = (isinstance(owner, ast.Name) and owner.id in names) or (
                isinstance(owner, ast.Attribute) and owner.attr == "session"
            )
            if held and node.attr not in PUBLIC:
                out.append(f"{path.name}:{node.lineno}: session.{node.attr}")
    return sorted(set(out))


def test_the_repl_imports_nothing_of_the_runtime() -> None:
    found = [hit for path in _modules() for hit in runtime_imports(path)]
    assert found == [], "\n".join(found)


def test_the_repl_reads_and_drives_a_session_through_public_members_only() -> None:
    assert {"status", "transcript", "settle", "drop_replies", "set_aside"} <= PUBLIC
    found = [hit for path in _modules() for hit in session_reads(path)]
    assert found == [], "\n".join(found)


def test_the_scan_sees_what_the_repl_read_through_the_runtime(tmp_path: Path) -> None:
    """The checks find what they are for (as the REPL read a session before)."""
    module = tmp_path / "old.py"
    module.write_text(
        "from rolecall.runtime import Dialogue\n"
        "class Runner:\n"
        "    def flow(self, session: 'Session') -> None:\n"
        "        s = self.session\n"
        "        print(s.state.pointer, session.engine, self.session.generator.busy)\n"
        "        print(s.status, session.transcript)\n",
        encoding="utf-8",
    )
    assert runtime_imports(module) == [
        "old.py:1: imports rolecall.runtime",
        "old.py:1: imports rolecall.runtime.Dialogue",
    ]
    assert session_reads(module) == [
        "old.py:5: session.engine",
        "old.py:5: session.generator",
        "old.py:5: session.state",
    ]
