"""No module of src/rolecall reaches into another's private members.

A private member (``x._name``) belongs to the class that defines it: the module that
defines the class may touch it on any instance (``other._seq`` in ``__eq__``), a
method may touch its own (``self._lock``), and nothing else may. The session, the
store and the model call site each offer public methods for what others need
(``Session.pause``, ``SqliteStore.fetch_all``, ``CallSite.system_texts``).

Allowed, and only these: ``rolecall.api`` (the public facade closes the session it
wraps, ``api/entry.py``), and third-party internals that have no public spelling
(argparse's sub-parser action type, nats.py's subscription internals), each listed
below with the module that uses it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rolecall

SRC = Path(rolecall.__file__).parent

# the public facade's own package: api.Session is closed by api/entry.py
ALLOWED_PACKAGES = ("api/",)

# (module, expression): a third-party internal with no public name
THIRD_PARTY = {
    # argparse types add_subparsers()'s result only as this class (typeshed too)
    ("*", "argparse._SubParsersAction"),
    # the parser's actions, to suggest a flag or sub-command for a misspelt one
    ("cli/suggest.py", "parser._actions"),
    ("cli/suggest.py", "target._actions"),
}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _own_members(tree: ast.Module) -> set[str]:
    """The private members the classes of this module define (methods, attributes).

    A ``Protocol`` defines nothing: it describes another class's members, so a private
    one it names is still that class's.
    """
    own: set[str] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        if any(ast.unparse(base).endswith("Protocol") for base in cls.bases):
            continue
        for node in ast.walk(cls):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and _is_private(node.name):
                own.add(node.name)
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                if isinstance(node.ctx, ast.Store):
                    own.add(node.attr)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                own.add(node.target.id)
            elif isinstance(node, ast.Assign):
                own.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {name for name in own if _is_private(name)}


def _method_receivers(tree: ast.Module) -> set[int]:
    """ids of the ``self``/``cls`` Name nodes that are a method's own first parameter."""
    ids: set[int] = set()
    for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
        for fn in cls.body:
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or not fn.args.args:
                continue
            first = fn.args.args[0].arg
            for node in ast.walk(fn):
                if isinstance(node, ast.Name) and node.id == first:
                    ids.add(id(node))
    return ids


def private_reaches(src: Path = SRC) -> list[str]:
    found: list[tuple[str, int, str]] = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith(ALLOWED_PACKAGES):
            continue
        tree = ast.parse(path.read_text("utf-8"))
        own = _own_members(tree)
        receivers = _method_receivers(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Attribute) or not _is_private(node.attr):
                continue
            if id(node.value) in receivers or node.attr in own:
                continue
            text = ast.unparse(node)
            if ("*", text) in THIRD_PARTY or (rel, text) in THIRD_PARTY:
                continue
            found.append((rel, node.lineno, text))
    return [f"{rel}:{line}: {text}" for rel, line, text in sorted(found)]


def test_no_module_touches_another_modules_private_members() -> None:
    assert private_reaches() == []


def test_the_scan_finds_a_reach_into_a_private_member(tmp_path: Path) -> None:
    (tmp_path / "store.py").write_text(
        "class Store:\n"
        "    def __init__(self):\n"
        "        self._rows = []\n"
        "    def __eq__(self, other):\n"
        "        return self._rows == other._rows\n"
    )
    (tmp_path / "user.py").write_text(
        "def count(store, self):\n"
        "    return len(store._rows) + len(self._rows)\n"
        "class Reader:\n"
        "    def read(self):\n"
        "        return self._cache\n"
        "class Site(Protocol):\n"
        "    _rows: list\n"
        "def first(site: Site):\n"
        "    return site._rows[0]\n"
    )
    assert private_reaches(tmp_path) == [
        "user.py:2: self._rows",
        "user.py:2: store._rows",
        "user.py:9: site._rows",
    ]


# ------------------------------------------------------------------ the public session only
def runtime_reaches(src: Path = SRC) -> list[str]:
    """Where a module outside ``api/`` reads ``.runtime`` off an object: the public
    ``Session`` once handed out the runtime's session that way, and the web view,
    tracing and the debug log drove it through that. They use the public members now
    (``status``, ``interrupt()``, ``request_reply()``...); ``rolecall.runtime`` (the
    module) is no such read."""
    found: list[tuple[str, int, str]] = []
    for path in sorted(src.rglob("*.py")):
        rel = path.relative_to(src).as_posix()
        if rel.startswith(ALLOWED_PACKAGES):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr == "runtime"
                and ast.unparse(node.value) != "rolecall"
            ):
                found.append((rel, node.lineno, ast.unparse(node)))
    return [f"{rel}:{line}: {text}" for rel, line, text in sorted(found)]


def test_no_module_outside_the_api_reaches_through_a_session_to_its_runtime() -> None:
    assert runtime_reaches() == []


def test_the_scan_finds_a_read_of_a_sessions_runtime(tmp_path: Path) -> None:
    (tmp_path / "web.py").write_text(
        "import rolecall.runtime\n"
        "def flags(run):\n"
        "    rolecall.runtime.Dialogue\n"
        "    return run.session.runtime.state.flags\n"
    )
    assert runtime_reaches(tmp_path) == ["web.py:4: run.session.runtime"]


# ------------------------------------------------------------------ one way to open a session
SCRIPTS = SRC.parent.parent / "scripts"


def _runtime_class() -> str:
    from rolecall import runtime

    return runtime.Dialogue.__name__


def other_openers(*roots: Path) -> list[str]:
    """Where a module outside ``api/`` opens a session its own way: calling the
    composition root (``api/compose.assemble``) or building the runtime's session class
    itself, instead of :func:`rolecall.api.entry.open_live` (or the public API; every
    consumer holds the session it gives: tests/test_session_surface.py)."""
    cls = _runtime_class()
    found: list[str] = []
    for root in roots:
        for path in sorted(root.rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if root == SRC and rel.startswith(("api/", "runtime.py")):
                continue
            tree = ast.parse(path.read_text("utf-8"))
            names = {"assemble": set[str](), cls: set[str]()}
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module in (
                    "rolecall.api.compose",
                    "rolecall.runtime",
                ):
                    for alias in node.names:
                        if alias.name in names:
                            names[alias.name].add(alias.asname or alias.name)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module == "rolecall.api.compose":
                    if any(alias.name == "assemble" for alias in node.names):
                        found.append(f"{root.name}/{rel}:{node.lineno}: imports assemble")
                elif isinstance(node, ast.Call):
                    func = node.func
                    if (isinstance(func, ast.Name) and func.id in names[cls]) or (
                        isinstance(func, ast.Attribute)
                        and func.attr in ("assemble", cls)
                        and ast.unparse(func.value) in ("runtime", "compose", "bench")
                    ):
                        found.append(f"{root.name}/{rel}:{node.lineno}: {ast.unparse(func)}(...)")
    return found


def test_every_session_is_opened_through_the_one_opener() -> None:
    assert other_openers(SRC, SCRIPTS) == []


def test_the_scan_finds_a_session_opened_another_way(tmp_path: Path) -> None:
    cls = _runtime_class()
    (tmp_path / "cli.py").write_text(
        "from rolecall.api.compose import assemble, flush\n"
        f"from rolecall.runtime import {cls} as Live\n"
        "from rolecall import runtime\n"
        "def go(world):\n"
        "    Live(world)\n"
        f"    runtime.{cls}(world)\n"
        "    return assemble(world)\n"
    )
    (tmp_path / "fine.py").write_text(
        "from rolecall.api.entry import open_live\ndef go(world):\n    return open_live(world)\n"
    )
    assert other_openers(tmp_path) == [
        f"{tmp_path.name}/cli.py:1: imports assemble",
        f"{tmp_path.name}/cli.py:5: Live(...)",
        f"{tmp_path.name}/cli.py:6: runtime.{cls}(...)",
    ]


def third_party_overrides(root: Path = SRC) -> list[str]:
    """Classes of ``root`` that derive from pyee's emitter, and any use of its private
    hooks (``_emit_run``, ``_add_event_handler``, ...): the bus uses pyee through its
    public API only (issue 36)."""
    from pyee import EventEmitter

    hooks = {n for n in vars(EventEmitter) if _is_private(n)} | {"_events"}
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if ast.unparse(base).rpartition(".")[2] == "EventEmitter":
                        found.append(f"{rel}:{node.lineno}: class {node.name}({ast.unparse(base)})")
            name = getattr(node, "attr", None) or getattr(node, "name", None)
            if isinstance(name, str) and name in hooks:
                found.append(f"{rel}:{node.lineno}: {name}")
    return found


def test_pyee_is_used_through_its_public_api_only(tmp_path: Path) -> None:
    assert third_party_overrides() == []
    (tmp_path / "bus.py").write_text(
        "from pyee import EventEmitter\n"
        "class Emitter(EventEmitter):\n"
        "    def _emit_run(self, f, args, kwargs):\n"
        "        f(*args)\n"
    )
    assert third_party_overrides(tmp_path) == [
        "bus.py:2: class Emitter(EventEmitter)",
        "bus.py:3: _emit_run",
    ]
