"""Safe arithmetic for the demo model: find an expression in a prompt and evaluate it."""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

_ARITH = re.compile(r"[-(]*\d[\d\s.+\-*/()%^×÷]*")
_HAS_OP = re.compile(r"\d[\s)]*(?:\*\*|[-+*/%^×÷])[\s(-]*\d")

_BINOPS: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _eval_node(node: ast.AST) -> float | int:
    if isinstance(node, ast.Expression):
        return _eval_node(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        if isinstance(node.value, bool):
            raise ValueError("not a number")
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.UAdd, ast.USub)):
        operand = _eval_node(node.operand)
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        left, right = _eval_node(node.left), _eval_node(node.right)
        if isinstance(node.op, ast.Pow) and (abs(right) > 64 or abs(left) > 10**6):
            raise ValueError("exponent too large")
        result: int | float = _BINOPS[type(node.op)](left, right)
        return result
    raise ValueError("not arithmetic")


def evaluate(expression: str) -> str | None:
    """Evaluate plain arithmetic safely; None when it is not arithmetic or fails."""
    if len(expression) > 500:
        return None
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        value = _eval_node(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, ValueError, ZeroDivisionError, OverflowError, TypeError, RecursionError):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        if value.is_integer() and abs(value) < 1e15:
            return str(int(value))
        return f"{value:.10g}"
    return str(value)


def find_expression(prompt: str) -> str | None:
    """The longest arithmetic expression in the prompt, e.g. ``17 * 23 + 4``."""
    best: str | None = None
    for match in _ARITH.finditer(prompt):
        candidate = match.group().strip().rstrip(".")
        while candidate.count(")") > candidate.count("(") and candidate.endswith(")"):
            candidate = candidate[:-1].rstrip()
        if _HAS_OP.search(candidate) and (best is None or len(candidate) > len(best)):
            best = candidate
    return best
