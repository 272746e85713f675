"""Safe arithmetic: the demo's calculator tool, and the demo model finding sums in prompts.

Only numbers, + - * / // % ** (or ^ × ÷) and parentheses are evaluated, through the AST; no
names, calls or attributes, so a prompt or a model cannot run code through it.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from .._core._numbers import is_number

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
    if isinstance(node, ast.Constant) and is_number(node.value):  # (True is not arithmetic)
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
    raise ValueError(f"only arithmetic is allowed, not {type(node).__name__}")


def safe_eval(expression: str) -> int | float:
    """The value of plain arithmetic; `ValueError` saying why when it is not that."""
    if len(expression) > 500:
        raise ValueError("the expression is longer than 500 characters")
    text = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    try:
        value = _eval_node(ast.parse(text.strip(), mode="eval"))
    except (SyntaxError, TypeError):
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    except ZeroDivisionError:
        raise ValueError("division by zero") from None
    except (OverflowError, RecursionError):
        raise ValueError("the result is too large") from None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("the result is not a finite number")
        if value.is_integer() and abs(value) < 1e15:
            return int(value)
    return value


def evaluate(expression: str) -> str | None:
    """Evaluate plain arithmetic safely, as text; None when it is not arithmetic or fails."""
    try:
        value = safe_eval(expression)
    except ValueError:
        return None
    return f"{value:.10g}" if isinstance(value, float) else str(value)


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
