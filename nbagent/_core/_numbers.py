"""What an argument's number is: an int or a float, never a bool (`True` is 1 to Python, but a
caller who passes it meant something else, and is told so)."""

from __future__ import annotations

from typing import Any, TypeGuard


def is_number(value: Any) -> TypeGuard[int | float]:
    """Whether `value` is an int or a float (not a bool)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_whole(value: Any) -> TypeGuard[int]:
    """Whether `value` is an int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool)


def is_positive(value: Any) -> TypeGuard[int | float]:
    """Whether `value` is a number above 0 (NaN is not)."""
    return is_number(value) and value > 0
