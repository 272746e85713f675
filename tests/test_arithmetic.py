"""Safe arithmetic: values for sums, a clear ValueError for anything else, never code."""

from __future__ import annotations

import pytest

from nbagent.demo._arithmetic import evaluate, safe_eval
from nbagent.demo._tools import calculator


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("17 * 23 + 4", 395),
        ("2 ** 10", 1024),
        ("7 / 2", 3.5),
        ("2 ^ 3", 8),
        ("-(3 - 5)", 2),
        ("6 × 7", 42),
        ("9 ÷ 3", 3),
    ],
)
def test_sums(expression: str, value: float) -> None:
    assert safe_eval(expression) == value


@pytest.mark.parametrize(
    ("expression", "why"),
    [
        ("__import__('os').system('ls')", "only arithmetic is allowed"),
        ("1 / 0", "division by zero"),
        ("2 ** 100000", "exponent too large"),
        ("1 +", "not an arithmetic expression"),
        ("x" * 600, "longer than 500 characters"),
    ],
)
def test_anything_else_is_a_value_error_saying_why(expression: str, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        safe_eval(expression)
    assert evaluate(expression) is None


def test_the_demo_calculator_tool_uses_it() -> None:
    import asyncio

    assert asyncio.run(calculator(expression="17 * 23 + 4")) == "395"
    with pytest.raises(ValueError, match="only arithmetic"):
        asyncio.run(calculator(expression="open('x')"))
