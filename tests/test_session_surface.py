"""Every consumer holds the public ``rolecall.Session`` (issue 36: one session surface).

The command line, the REPL, the web view, batches, cluster workers, tracing, the debug
log and the benchmarks open their sessions with ``rolecall.api.entry.open_live`` (or
``rolecall.open_session`` / ``resume`` / ``open_served``, which use it) and read and drive
a ``rolecall.Session`` through its public members (docs/api.md). None of them imports the
runtime (``rolecall.runtime``, whose ``Dialogue`` is internal), names the runtime's old
opener (``open_dialogue``), imports the composition root (``rolecall.api.compose``:
``Session.flush()`` and ``Session.save_to()`` store a session), hands ``Opening`` an ``on_created`` hook
(``open_live(..., on_created=)`` gives a ``Session``), or reads a member of a session
that ``Session`` does not offer publicly.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rolecall
from rolecall.api.session import Session

SRC = Path(rolecall.__file__).parent
ROOT = SRC.parent.parent
PUBLIC = {name for name in dir(Session) if not name.startswith("_")}
OPENER = "open_dialogue"
COMPOSITION = "rolecall.api.compose"
"""The composition root: nothing outside ``rolecall.api`` imports it (``Session.flush()``
and ``Session.save_to()`` store a session; sinks are ``rolecall.api.opening``'s)."""


def consumers(src: Path = SRC, scripts: Path = ROOT / "scripts") -> list[Path]:
    """The modules that open or hold sessions for someone: ``cli/`` (the REPL too),
    ``web/``, ``batch/``, ``cluster/``, ``serve/`` (the MCP server), tracing, the debug log and the scripts."""
    found: list[Path] = []
    for package in ("cli", "web", "batch", "cluster", "serve"):
        found += sorted((src / package).rglob("*.py"))
    found += [p for p in (src / "tracing.py", src / "debuglog.py") if p.exists()]
    return found + sorted(scripts.glob("*.py"))


def runtime_uses(path: Path) -> list[str]:
    """Where ``path`` imports the runtime, names its opener or gives ``Opening`` a hook."""
    found: list[str] = []
    for node in ast.walk(ast.parse(path.read_text("utf-8"))):
        what = None
        if isinstance(node, ast.Import):
            if any(a.name.startswith("rolecall.runtime") for a in node.names):
                what = "imports rolecall.runtime"
        elif isinstance(node, ast.ImportFrom):
            names = {a.name for a in node.names}
            if node.module == "rolecall.runtime" or (
                node.module == "rolecall" and "runtime" in names
            ):
                what = "imports rolecall.runtime"
            elif OPENER in names:
                what = f"imports {OPENER}"
            elif node.module == COMPOSITION or (
                node.module == "rolecall.api" and "compose" in names
            ):
                what = f"imports {COMPOSITION}"
        elif (isinstance(node, ast.Name) and node.id == OPENER) or (
            isinstance(node, ast.Attribute) and node.attr == OPENER
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


def _annotated_session(arg: ast.arg) -> bool:
    ann = arg.annotation
    text = ann.value if isinstance(ann, ast.Constant) else ast.unparse(ann) if ann else ""
    return str(text).rpartition(".")[2] in ("Session", "Session | None")


def session_reads(path: Path) -> list[str]:
    """Members read on a session in ``path`` that ``rolecall.Session`` does not offer: on
    a parameter typed ``Session``, a name bound to one (``s = self.session``), or an
    ``x.session`` attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out: list[str] = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        args = [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
        names = {a.arg for a in args if _annotated_session(a)}
        for node in ast.walk(fn):
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


def test_every_consumer_holds_the_public_session_only() -> None:
    paths = consumers()
    names = {p.relative_to(ROOT).as_posix() for p in paths}
    assert {
        "src/rolecall/cli/wiring.py",
        "src/rolecall/cli/repl/app.py",
        "src/rolecall/web/runs.py",
        "src/rolecall/batch/runner.py",
        "src/rolecall/cluster/worker.py",
        "src/rolecall/tracing.py",
        "scripts/bench.py",
        "scripts/bench_scale.py",
    } <= names
    found = [hit for path in paths for hit in runtime_uses(path)]
    assert found == [], "\n".join(found)


def test_every_consumer_reads_and_drives_a_session_through_public_members_only() -> None:
    found = [hit for path in consumers() for hit in session_reads(path)]
    assert found == [], "\n".join(found)


def test_the_scans_find_the_runtime_used_and_a_session_read_past_its_surface(
    tmp_path: Path,
) -> None:
    """The checks find what they are for (as the consumers held a session before)."""
    src, scripts = tmp_path / "src", tmp_path / "scripts"
    (src / "cli" / "repl").mkdir(parents=True)
    scripts.mkdir()
    old = src / "cli" / "repl" / "app.py"
    old.write_text(
        "from rolecall.runtime import Dialogue\n"
        "import rolecall.runtime\n"
        "from rolecall import runtime, api\n"
        "from rolecall.api.opening import Opening, open_dialogue\n"
        "from rolecall.api.compose import flush, save_to_file\n"
        "class Runner:\n"
        "    def flow(self, session: 'Session', hook) -> None:\n"
        "        s = self.session\n"
        "        print(s.state.pointer, session.engine, self.session.generator.busy)\n"
        "        print(s.status, session.transcript)\n"
        "        api.opening.open_dialogue(session.world, Opening(on_created=hook))\n",
        encoding="utf-8",
    )
    fine = scripts / "bench.py"
    fine.write_text(
        "import rolecall\n"
        "from rolecall.api.entry import open_live\n"
        "from rolecall.api.opening import Opening\n"
        "def go(world, hook, session: rolecall.Session):\n"
        "    print(session.status.state, session.result.turns)\n"
        "    return open_live(world, Opening(store=None), on_created=hook)\n",
        encoding="utf-8",
    )
    assert consumers(src, scripts) == [old, fine]
    assert runtime_uses(old) == [
        "app.py:11: Opening(on_created=...)",
        "app.py:11: api.opening.open_dialogue",
        "app.py:1: imports rolecall.runtime",
        "app.py:2: imports rolecall.runtime",
        "app.py:3: imports rolecall.runtime",
        "app.py:4: imports open_dialogue",
        "app.py:5: imports rolecall.api.compose",
    ]
    assert session_reads(old) == [
        "app.py:9: session.engine",
        "app.py:9: session.generator",
        "app.py:9: session.state",
    ]
    assert runtime_uses(fine) == [] and session_reads(fine) == []


def test_nothing_outside_api_imports_the_composition_root() -> None:
    """Not only the consumers: no module of ``src/rolecall`` outside ``api/``, no script."""
    paths = [p for p in SRC.rglob("*.py") if "api" not in p.relative_to(SRC).parts[:1]]
    paths += sorted((ROOT / "scripts").glob("*.py"))
    found = [hit for path in paths for hit in runtime_uses(path) if COMPOSITION in hit]
    assert found == [], "\n".join(found)
