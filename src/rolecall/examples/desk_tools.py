"""Python tools of the research-desk world (tools.md: ``tools: python:``).

Each is a plain function: its type hints give the JSON schema the model sees, its
docstring the description.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import Any

_OPS: dict[type[ast.AST], Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
    ast.Mod: operator.mod,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def compute(expression: str) -> str:
    """Evaluate an arithmetic expression (numbers, + - * / % ** and parentheses)."""

    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = value(node.left), value(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return float(_OPS[type(node.op)](left, right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return float(_OPS[type(node.op)](value(node.operand)))
        raise ValueError(f"not arithmetic: {ast.unparse(node)}")

    result = value(ast.parse(expression, mode="eval").body)
    return f"{expression} = {result:g}"


def word_count(text: str) -> int:
    """The number of words in a text."""
    return len(text.split())
