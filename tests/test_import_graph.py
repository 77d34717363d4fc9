"""No import cycle anywhere in src/rolecall, counting every import statement; every module
in a layer of the import-linter contract (pyproject.toml), so each has a decided place.

Module level, inside functions, under ``TYPE_CHECKING``: each ``import`` and
``from ... import`` names an edge from the importing module to the module it names
(``from package import submodule`` names the submodule). Importing a submodule also runs
its package's ``__init__``; like import-linter, the graph does not count that implicit
edge, only what a statement names.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import rolecall

SRC = Path(rolecall.__file__).parent
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def _modules() -> dict[str, Path]:
    out: dict[str, Path] = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*parts, base] if base else parts)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    targets.append(full if full in modules else base)
            for target in targets:
                found = resolve(target)
                if found is not None and found != module:
                    graph[module].add(found)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_graph_sees_every_kind_of_import_statement() -> None:
    graph = import_graph()
    assert "rolecall.turns" in graph["rolecall.runtime"]  # module level, `from pkg import mod`
    assert "rolecall.storage.data_store" in graph["rolecall.cli.manage.common"]  # in a function
    assert "rolecall.runtime" in graph["rolecall.memory.files"]  # under TYPE_CHECKING
    demo = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(demo) == [["a", "b", "c"]]


def test_there_is_no_import_cycle_in_src() -> None:
    assert cycles(import_graph()) == []


def layered(pyproject: str) -> set[str]:
    """The modules and packages named in the layers contracts of a pyproject.toml."""
    named: set[str] = set()
    for contract in tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "layers":
            continue
        containers = contract.get("containers", [""])
        for layer in contract["layers"]:
            for part in layer.replace(":", "|").split("|"):
                for container in containers:
                    named.add(f"{container}.{part.strip()}" if container else part.strip())
    return named


def outside_every_layer(modules: dict[str, Path], named: set[str]) -> list[str]:
    """Modules neither named nor under a named package (a package's ``__init__`` that
    only re-exports counts as its package's)."""

    def covered(module: str) -> bool:
        while module:
            if module in named:
                return True
            module = module.rpartition(".")[0]
        return False

    def defines_nothing(path: Path) -> bool:
        body = ast.parse(path.read_text("utf-8")).body
        kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
        return path.name == "__init__.py" and not any(isinstance(n, kinds) for n in body)

    return sorted(
        m
        for m, path in modules.items()
        if m != "rolecall" and not covered(m) and not defines_nothing(path)
    )


def test_every_module_is_in_a_layer() -> None:
    named = layered(PYPROJECT.read_text("utf-8"))
    assert outside_every_layer(_modules(), named) == []
    # a module added beside the others, in no layer, is found
    stray = {**_modules(), "rolecall.stray": SRC / "errors.py"}
    assert outside_every_layer(stray, named) == ["rolecall.stray"]


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph of packages: a module counts as the package under rolecall it is in
    (``rolecall.modes.debate`` as ``rolecall.modes``; ``rolecall.runtime`` as itself)."""

    def package(module: str) -> str:
        return ".".join(module.split(".")[:2])

    packages: dict[str, set[str]] = {package(m): set() for m in graph}
    for module, targets in graph.items():
        for target in targets:
            if package(target) not in (package(module), "rolecall"):
                packages[package(module)].add(package(target))
    return packages


def test_no_package_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    assert cycles(package_graph(graph)) == []
    # a module of a low package importing a high one would close a cycle, and be found
    graph["rolecall.errors"] = {"rolecall.cli.main"}
    assert any("rolecall.errors" in c for c in cycles(package_graph(graph)))


def test_loading_a_world_needs_no_driver_of_a_mode() -> None:
    """The modes' load time (names, options, stop words, expand) imports nothing of
    rolecall's, so the world and the flow conditions can consult it from below; the
    install time, typed on the drivers' Host, sits with the drivers."""
    graph = import_graph()
    assert graph["rolecall.mode_registry"] == set()
    assert "rolecall.plans" in graph["rolecall.modes.install"]
    assert "rolecall.mode_registry" in graph["rolecall.world.models"]
