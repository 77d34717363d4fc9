"""Reading YAML a user wrote (a world file, a role file): safe, fast, no key given twice.

PyYAML keeps the last of two equal keys of a mapping and drops the first without a word:
``steps:`` written twice in a flow would run the second list only. :func:`load` reads
like ``yaml.safe_load`` (by libyaml's parser when PyYAML has it) and also returns every
key a mapping repeats, at any depth, with its field path and where it is, so the caller
refuses the file (worlds.md, Validation: unknown keys are errors, not ignored).

Keys are compared as values (``1`` and ``1.0`` are the same key, as in the dict PyYAML
builds). Keys a ``<<`` merge brings in are not repeats: a key written beside the merge
overrides them, as YAML means it to.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

_MERGE = "tag:yaml.org,2002:merge"
_VALUE = "tag:yaml.org,2002:value"  # the ``=`` key, read as the text "="


@dataclass(frozen=True)
class DuplicateKey:
    """A key written a second time in the same mapping."""

    path: str  # the key's field path, as problems name fields: ``flow.steps``, ``roles[0].name``
    line: int  # 1-based line and column of the repeat
    column: int
    first_line: int  # 1-based line of the key it repeats

    @property
    def problem(self) -> str:
        return f"{self.path}: duplicate key (also at line {self.first_line})"

    @property
    def where(self) -> str:
        return f"line {self.line}, column {self.column}"

    def __str__(self) -> str:
        return f"{self.where}: {self.problem}"


class _Checking(SafeConstructor):
    """Loader mixin: records the keys each mapping repeats, as written (before merges)."""

    repeats: list[tuple[Node, Node]]  # (repeat, the key it repeats)
    checked: set[int]  # mapping nodes already looked at (a merged one is flattened again)

    def flatten_mapping(self, node: MappingNode) -> None:
        # called on every mapping before its keys are built, and before any merge changes
        # node.value; the keys built here are cached, so nothing is built twice
        if id(node) not in self.checked:
            self.checked.add(id(node))
            first: dict[Hashable, Node] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag == _MERGE:
                    continue
                key = "=" if key_node.tag == _VALUE else self.construct_object(key_node)
                try:
                    earlier = first.setdefault(key, key_node)
                except TypeError:  # not hashable: the constructor says so
                    continue
                if earlier is not key_node:
                    self.repeats.append((key_node, earlier))
        super().flatten_mapping(node)


class _Slow(_Checking, yaml.SafeLoader):
    pass


_Fast: type[_Checking] | None = None
if getattr(yaml, "CSafeLoader", None) is not None:

    class _CFast(_Checking, yaml.CSafeLoader):
        pass

    _Fast = _CFast


def _read(loader_class: type[_Checking], text: str) -> tuple[Any, list[DuplicateKey]]:
    loader: Any = loader_class(text)  # type: ignore[call-arg]  # a loader takes its stream
    loader.repeats = []
    loader.checked = set()
    try:
        root: Node | None = loader.get_single_node()
        data = None if root is None else loader.construct_document(root)
    finally:
        loader.dispose()
    if not loader.repeats or root is None:
        return data, []
    return data, _located(root, loader.repeats)


def load(text: str) -> tuple[Any, list[DuplicateKey]]:
    """``yaml.safe_load(text)`` and the keys it repeats (raises ``yaml.YAMLError``).

    By libyaml's parser when PyYAML has it (0.4 against 3.5 ms for a shipped world, at
    every start). A document libyaml rejects is read again by the pure-Python parser:
    its result if it takes it, its error (and the messages users know) if not. libyaml
    reads UTF-8: a string it cannot encode (a lone surrogate, from JSON's ``\\ud800``)
    goes to the pure-Python parser too.
    """
    if _Fast is not None:
        try:
            return _read(_Fast, text)
        except (yaml.YAMLError, UnicodeError):
            pass
    return _read(_Slow, text)


def problem_of(exc: yaml.YAMLError) -> str:
    """One line: where (line and column, or character position) and what."""
    mark = getattr(exc, "problem_mark", None)
    if mark is not None:
        where = f"line {mark.line + 1}, column {mark.column + 1}: "
    elif isinstance(exc, yaml.reader.ReaderError):
        where = f"character {exc.position + 1}: "
    else:
        where = ""
    problem = getattr(exc, "problem", None) or getattr(exc, "reason", None) or str(exc)
    return f"{where}invalid YAML: {' '.join(str(problem).split())}"


def _located(root: Node, repeats: list[tuple[Node, Node]]) -> list[DuplicateKey]:
    """Each repeat with its field path, in the order of the file (only on failure)."""
    wanted = {id(repeat) for repeat, _ in repeats}
    paths: dict[int, str] = {}
    seen: set[int] = set()
    todo: list[tuple[Node, str]] = [(root, "")]
    while todo and len(paths) < len(wanted):  # a stack, not recursion: any depth
        node, path = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        children: list[tuple[Node, str]] = []
        if isinstance(node, MappingNode):
            for key, value in node.value:
                if not isinstance(key, ScalarNode):
                    continue
                name = key.value if key.value.isprintable() else repr(key.value)
                child = f"{path}.{name}" if path else name
                if id(key) in wanted:
                    paths.setdefault(id(key), child)
                children.append((value, child))
        elif isinstance(node, SequenceNode):
            children = [(item, f"{path}[{i}]") for i, item in enumerate(node.value)]
        todo.extend(reversed(children))
    out = [
        DuplicateKey(
            path=paths.get(id(repeat), str(repeat.value)),
            line=repeat.start_mark.line + 1,
            column=repeat.start_mark.column + 1,
            first_line=first.start_mark.line + 1,
        )
        for repeat, first in repeats
    ]
    return sorted(out, key=lambda d: (d.line, d.column))
