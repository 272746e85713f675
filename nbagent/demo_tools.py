"""The tools the offline demo gives its agent: a calculator and a read-only file browser.

The file tools are confined to one folder (the package's `demo_data/` unless told otherwise):
a path that leaves it is refused, so a model cannot read the rest of the disk.
"""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .tools import Tool, tool

__all__ = ["DEMO_DATA", "calculator", "file_tools", "safe_eval"]

DEMO_DATA = Path(__file__).parent / "demo_data"

_OPS: dict[type, Callable[..., Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def safe_eval(expression: str) -> float | int:
    """Evaluate arithmetic only: numbers, + - * / // % ** and parentheses."""
    if len(expression) > 200:
        raise ValueError("expression is longer than 200 characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None

    def ev(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = ev(node.left), ev(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > 100:
                raise ValueError("exponent too large")
            return _OPS[type(node.op)](left, right)
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.operand))
        raise ValueError(f"only arithmetic is allowed, not {type(node).__name__}")

    value = ev(tree)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value  # type: ignore[no-any-return]


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "17 * 23 + 4".

    Args:
        expression: Numbers with + - * / // % ** and parentheses.
    """
    return str(safe_eval(expression))


def file_tools(root: str | Path = DEMO_DATA) -> list[Tool]:
    """`read_file` and `list_dir`, confined to `root`."""
    base = Path(root).resolve()

    def inside(path: str) -> Path:
        target = (base / path).resolve()
        if target != base and base not in target.parents:
            raise PermissionError(f"{path} is outside the folder these tools may read")
        return target

    @tool
    def read_file(path: str) -> str:
        """Read a text file.

        Args:
            path: Path of the file, relative to the demo folder.
        """
        target = inside(path)
        if not target.is_file():
            raise FileNotFoundError(2, "No such file", path)
        return target.read_text(encoding="utf-8", errors="replace")[:100_000]

    @tool
    def list_dir(path: str = ".") -> str:
        """List the files in a folder.

        Args:
            path: Folder, relative to the demo folder.
        """
        target = inside(path)
        if not target.is_dir():
            raise FileNotFoundError(2, "No such folder", path)
        names = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir())
        return "\n".join(names) or "(empty)"

    return [read_file, list_dir]
