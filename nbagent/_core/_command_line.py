"""The parser the `nbagent` commands share: every mistake on the command line is one sentence
("nbagent demo: --seed must be a whole number, not 'x'."), never usage text and a traceback."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable
from typing import NoReturn


class UsageError(Exception):
    """A mistake on the command line, already worded as one sentence."""


class Parser(argparse.ArgumentParser):
    """argparse that reports a mistake as one sentence instead of usage text and an exit."""

    def error(self, message: str) -> NoReturn:
        found = re.fullmatch(r"argument ([^:]+): (.*)", message, re.S)
        if found:  # "argument --seed: must be ..." -> "--seed must be ..."
            option = found.group(1).split("/")[-1]
            message = f"{option} {found.group(2)}"
        raise UsageError(f"{self.prog}: {message.rstrip('.')}.")


def number(
    kind: type[int] | type[float], what: str, low: float | None = None, high: float | None = None
) -> Callable[[str], float]:
    """An argparse type whose complaint is a sentence: "--seed must be a whole number, not 'x'".

    Args:
        kind: `int` or `float`.
        what: What the value must be, as the end of "must be ...".
        low: The smallest value allowed; None for no bound.
        high: The largest value allowed; None for no bound.

    Returns:
        The converter for `add_argument(type=...)`; it refuses NaN as well.
    """

    def convert(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}") from None
        too_low = low is not None and not value >= low  # `not >=`: NaN is refused too
        if too_low or value != value or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"must be {what}, not {text!r}")
        return value

    return convert
