"""No import cycle anywhere in src/rolecall, counting every import statement and every
``importlib.import_module``; every module in a layer of the import-linter contract
(pyproject.toml), so each has a decided place; and no edge, of either kind, runs up
those layers.

Module level, inside functions, under ``TYPE_CHECKING``: each ``import`` and
``from ... import`` names an edge from the importing module to the module it names
(``from package import submodule`` names the submodule). Importing a submodule also runs
its package's ``__init__``; like import-linter, the graph does not count that implicit
edge, only what a statement names. import-linter sees statements only, so the graph adds
what ``importlib.import_module`` is given when the source says it: a literal, a name
bound to one at module level, or an f-string's literal head (``f"rolecall.modes.{name}"``
names ``rolecall.modes``; ``f"{__name__}.{name}"`` the module's own package).
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


def _is_import_module(node: ast.expr) -> bool:
    """``importlib.import_module`` or a bare ``import_module``."""
    if isinstance(node, ast.Attribute):
        return node.attr == "import_module"
    return isinstance(node, ast.Name) and node.id == "import_module"


def _named(node: ast.expr, module: str, constants: dict[str, str]) -> str | None:
    """The module name (or the package its literal head names) an expression gives."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return module if node.id == "__name__" else constants.get(node.id)
    if isinstance(node, ast.JoinedStr):
        head = ""
        for at, value in enumerate(node.values):
            if isinstance(value, ast.Constant):
                head += str(value.value)
            elif isinstance(value, ast.FormattedValue) and at == 0:
                inner = _named(value.value, module, constants)
                if inner is None:
                    return None
                head += inner
            else:  # a placeholder: the literal head up to its last dot names a package
                return head.rpartition(".")[0] or None
        return head
    return None


def importlib_targets(source: str, module: str) -> set[str]:
    """What ``importlib.import_module`` is given in ``source`` (the text of ``module``),
    called directly or handed over (``run_sync(importlib.import_module, NAME)``)."""
    tree = ast.parse(source)
    constants = {
        target.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(target, ast.Name)
    }
    found: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        given: ast.expr | None = None
        if _is_import_module(node.func) and node.args:
            given = node.args[0]
        else:
            for at, arg in enumerate(node.args[:-1]):
                if _is_import_module(arg):
                    given = node.args[at + 1]
        name = _named(given, module, constants) if given is not None else None
        if name is not None:
            found.add(name)
    return found


def import_graph() -> dict[str, set[str]]:
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        package = module if path.name == "__init__.py" else module.rpartition(".")[0]
        source = path.read_text("utf-8")
        for name in importlib_targets(source, module):
            found = resolve(name)
            if found is not None and found != module:
                graph[module].add(found)
        for node in ast.walk(ast.parse(source)):
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
    install time, typed on the drivers' DriverSite, sits with the drivers."""
    graph = import_graph()
    assert graph["rolecall.mode_registry"] == set()
    assert "rolecall.plans" in graph["rolecall.modes.install"]
    assert "rolecall.mode_registry" in graph["rolecall.world.models"]


def upward_edges(graph: dict[str, set[str]], pyproject: str) -> list[tuple[str, str]]:
    """Each edge from a module to one in a higher layer of a layers contract (the
    contract lists its layers top first; a container's contract ranks its submodules)."""
    found: list[tuple[str, str]] = []
    for contract in tomllib.loads(pyproject)["tool"]["importlinter"]["contracts"]:
        if contract["type"] != "layers":
            continue
        ranks: dict[str, int] = {}
        for at, layer in enumerate(contract["layers"]):
            for part in layer.replace(":", "|").split("|"):
                for container in contract.get("containers", [""]):
                    ranks[f"{container}.{part.strip()}" if container else part.strip()] = at

        def rank(module: str, ranks: dict[str, int] = ranks) -> int | None:
            while module:
                if module in ranks:
                    return ranks[module]
                module = module.rpartition(".")[0]
            return None

        for module, targets in sorted(graph.items()):
            here = rank(module)
            for target in sorted(targets):
                there = rank(target)
                if here is not None and there is not None and there < here:
                    found.append((module, target))
    return found


def test_the_graph_sees_importlib() -> None:
    assert importlib_targets('import importlib\nimportlib.import_module("rolecall.cli")', "m") == {
        "rolecall.cli"
    }
    planted = 'import importlib\ndef load(n):\n    importlib.import_module(f"rolecall.modes.{n}")\n'
    assert importlib_targets(planted, "rolecall.mode_registry") == {"rolecall.modes"}
    own = 'from importlib import import_module\nimport_module(f"{__name__}.{x}")\n'
    assert importlib_targets(own, "rolecall.cli.repl") == {"rolecall.cli.repl"}
    handed = 'M = "rolecall.llm.openai_http"\nrun_sync(importlib.import_module, M)\n'
    assert importlib_targets(handed, "rolecall.llm.registry") == {"rolecall.llm.openai_http"}
    assert importlib_targets("importlib.import_module(name)", "m") == set()  # not knowable
    graph = import_graph()
    assert "rolecall.llm.openai_http" in graph["rolecall.llm.registry"]
    assert "rolecall.testing" in graph["rolecall"]


def test_no_edge_runs_up_the_layers() -> None:
    pyproject = PYPROJECT.read_text("utf-8")
    graph = import_graph()
    assert upward_edges(graph, pyproject) == []
    # an importlib edge planted in a bottom-layer module, as the mode registry once had
    planted = 'import importlib\ndef load(n):\n    importlib.import_module(f"rolecall.modes.{n}")\n'
    graph["rolecall.mode_registry"] |= importlib_targets(planted, "rolecall.mode_registry")
    assert upward_edges(graph, pyproject) == [("rolecall.mode_registry", "rolecall.modes")]
    # and inside a container: the modes' shared install step reaching up to a preset
    graph = import_graph()
    graph["rolecall.modes.install"].add("rolecall.modes.debate")
    assert upward_edges(graph, pyproject) == [("rolecall.modes.install", "rolecall.modes.debate")]
