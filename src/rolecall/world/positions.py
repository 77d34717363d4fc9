"""Line and column of a world-file problem, from the YAML nodes' marks.

A problem starts with its field path (``roles[1].sytem_prompt: unknown field``); the
path is walked through the composed YAML tree, and the deepest node it reaches gives the
position. A path that names nothing in the file (a field a preset generated) gets none.
"""

from __future__ import annotations

import re

import yaml

_TOKEN = re.compile(r"\[(\d+)\]|([^.\[\]]+)")


def _parts(path: str) -> list[str | int]:
    out: list[str | int] = []
    for index, name in _TOKEN.findall(path):
        out.append(int(index) if index else name)
    return out


def _mark(root: yaml.Node, parts: list[str | int]) -> yaml.Mark | None:
    node, mark = root, None
    for part in parts:
        child: yaml.Node | None = None
        if isinstance(node, yaml.MappingNode) and isinstance(part, str):
            for key, value in node.value:  # the last of repeated keys: the one that is kept
                if isinstance(key, yaml.ScalarNode) and key.value == part:
                    mark, child = key.start_mark, value
        elif (
            isinstance(node, yaml.SequenceNode)
            and isinstance(part, int)
            and 0 <= part < len(node.value)
        ):
            child = node.value[part]
            mark = child.start_mark
        if child is None:
            break
        node = child
    return mark


def positions(text: str, problems: list[str]) -> dict[str, str]:
    """``line L, column C`` for each problem whose path is found in ``text``."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except (yaml.YAMLError, RecursionError):
        return {}
    if root is None:
        return {}
    out: dict[str, str] = {}
    for problem in problems:
        path, sep, _ = problem.partition(": ")
        if not sep or path.startswith(("(", "line ", "character ")):
            continue
        mark = _mark(root, _parts(path))
        if mark is not None:
            out[problem] = f"line {mark.line + 1}, column {mark.column + 1}"
    return out
