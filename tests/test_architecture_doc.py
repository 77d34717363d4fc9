"""docs/architecture.md stays true of the code: every module path it names exists, its
layer table is the import-linter contract's (and the contract's name lists those
layers), and the places it says call a model are the ones that do."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import rolecall

SRC = Path(rolecall.__file__).parent
ROOT = SRC.parent.parent
PAGE = ROOT / "docs" / "architecture.md"
PYPROJECT = ROOT / "pyproject.toml"


def named_paths(text: str) -> list[str]:
    """The module and package paths the page names in backticks (``runtime.py``,
    ``floor/``, ``tests/x.py``), but for those a recipe says to create (``(new)``)."""
    found = []
    for match in re.finditer(r"`([A-Za-z_][\w/]*(?:\.py|/))`(?! \(new\))", text):
        found.append(match.group(1))
    return found


def missing_paths(text: str) -> list[str]:
    return sorted(
        {p for p in named_paths(text) if not (SRC / p).exists() and not (ROOT / p).exists()}
    )


def test_every_module_path_the_page_names_exists() -> None:
    text = PAGE.read_text("utf-8")
    assert len(named_paths(text)) > 100
    assert missing_paths(text) == []
    # a module renamed or moved is found, a recipe's new module is not
    assert missing_paths("`runtime.py`, `api/opener.py`, `modes/quorum.py` (new)") == [
        "api/opener.py"
    ]


def table_layers(text: str) -> list[set[str]]:
    """The first column of the page's layer table, top to bottom, as module names."""
    section = text.split("## Layers", 1)[1].split("\n\n", 3)
    rows = [line for line in "\n\n".join(section).splitlines() if line.startswith("| `")]
    layers = []
    for row in rows:
        first = re.split(r"(?<!\\)\|", row)[1]
        names = re.findall(r"`([\w/.]+)`", first)
        layers.append({"rolecall." + n.removesuffix(".py").removesuffix("/") for n in names})
    return layers


def contract() -> dict[str, object]:
    contracts = tomllib.loads(PYPROJECT.read_text("utf-8"))["tool"]["importlinter"]["contracts"]
    main: dict[str, object] = contracts[0]
    return main


def test_the_layer_table_is_the_contract_and_the_contract_names_its_layers() -> None:
    layers = [str(layer) for layer in contract()["layers"]]  # type: ignore[attr-defined]
    assert table_layers(PAGE.read_text("utf-8")) == [
        {part.strip() for part in layer.split("|")} for layer in layers
    ]
    bottom_up = [
        "/".join(part.strip().removeprefix("rolecall.") for part in layer.split("|"))
        for layer in reversed(layers)
    ]
    assert contract()["name"] == "layers: " + " -> ".join(bottom_up)


def model_callers(src: Path = SRC) -> set[str]:
    """The modules outside ``llm/`` (the models themselves) that stream a model's reply:
    ``model.stream(request)``, iterated where it is called or kept to be."""
    found = set()
    for path in src.rglob("*.py"):
        rel = path.relative_to(src).as_posix()
        if rel.startswith("llm/"):
            continue
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "stream"
                and isinstance(node.func.value, ast.Name)
                and node.func.value.id == "model"
            ):
                found.add(rel)
    return found


def said_to_call_a_model(text: str) -> tuple[str, set[str]]:
    """The page's count of the other places that call a model, and the modules it names:
    ``generation.py`` and those of the sentence after it."""
    section = text.split("## One generation at a time", 1)[1]
    claim = section.split("is the only place a turn's reply is generated.", 1)[1]
    claim = claim.split("The `Generator` publishes", 1)[0]
    count = claim.split()[0]
    return count, {"generation.py", *re.findall(r"`([\w/]+\.py)`", claim)}


def test_the_places_the_page_says_call_a_model_are_the_ones_that_do() -> None:
    count, named = said_to_call_a_model(PAGE.read_text("utf-8"))
    assert named == model_callers()
    words = {"One": 1, "Two": 2, "Three": 3, "Four": 4, "Five": 5}
    assert words[count] == len(named) - 1
    assert {"floor/respond.py", "knowledge/summary.py", "nats/agents.py"} <= named


def session_protocols(src: Path = SRC) -> tuple[set[str], list[str]]:
    """The ``*Site`` protocols (the live session as one module reads it) and every
    parameter typed with one whose name is not ``session`` (``module:function.name``)."""
    sites: set[str] = set()
    misnamed: list[str] = []
    trees = {
        p.relative_to(src).as_posix(): ast.parse(p.read_text("utf-8")) for p in src.rglob("*.py")
    }
    for tree in trees.values():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.ClassDef)
                and node.name.endswith("Site")
                and any(isinstance(b, ast.Name) and b.id == "Protocol" for b in node.bases)
            ):
                sites.add(node.name)
    for rel, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs]:
                    typed = ast.unparse(arg.annotation) if arg.annotation else ""
                    if typed.strip("'\"") in sites and arg.arg != "session":
                        misnamed.append(f"{rel}:{node.name}.{arg.arg}")
    return sites, misnamed


def test_the_session_protocols_are_the_pages_and_each_parameter_is_called_session() -> None:
    """One naming scheme (issue 52): the page lists every ``*Site`` protocol, and a
    function taking the session through one calls it ``session`` (never ``host`` or
    ``site``)."""
    sites, misnamed = session_protocols()
    text = PAGE.read_text("utf-8")
    assert {"DriverSite", "CallSite", "RecorderSite", "TracerSite"} <= sites
    assert sorted(s for s in sites if f"`{s}`" not in text and f".{s}`" not in text) == []
    assert misnamed == []
