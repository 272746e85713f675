"""The attempt log's compact columns: typed arrays, and words as codes into a short table.

A log of 100,000 attempts (a provider batch's items) keeps each number in a typed `array`
(8 bytes a float or an integer, one byte for "missing") and each word that repeats (the
outcome, the action, the model, an error kind, a batch id) as a code into the table of the
distinct ones; a run id of the form `<tag>-<number>` (a provider batch item's) as the tag's code
and the number; only the words that differ row by row (request ids, messages) are kept as
Python strings. A column is read and written by row index like a list (and iterated so: its
`__getitem__` raises IndexError past the end), and made into a numpy or pandas array at once
(`numpy_of`), in a given order when one is given.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd


class Ints:
    """Whole numbers, each one missing or not."""

    def __init__(self) -> None:
        self.data = array("q")
        self.missing = bytearray()

    def append(self, value: int | None) -> None:
        self.data.append(0 if value is None else value)
        self.missing.append(value is None)

    def __getitem__(self, i: int) -> int | None:
        return None if self.missing[i] else self.data[i]

    def __setitem__(self, i: int, value: int | None) -> None:
        self.data[i] = 0 if value is None else value
        self.missing[i] = value is None

    def __len__(self) -> int:
        return len(self.data)

    def array(self, order: Any = None) -> pd.arrays.IntegerArray:
        data = numpy_of(self.data, np.int64, order)
        return pd.arrays.IntegerArray(data, numpy_of(self.missing, np.bool_, order))


class Words:
    """Words as codes into the table of the distinct ones (`known` first; -1: missing)."""

    def __init__(self, known: tuple[str, ...] = ()) -> None:
        self.known = known
        self.table: list[str] = list(known)
        self._code = {w: i for i, w in enumerate(known)}
        self.codes = array("i")

    def code(self, word: str | None) -> int:
        if word is None:
            return -1
        code = self._code.get(word)
        if code is None:
            code = self._code[word] = len(self.table)
            self.table.append(word)
        return code

    def append(self, word: str | None) -> None:
        code = -1 if word is None else self._code.get(word)
        self.codes.append(self.code(word) if code is None else code)

    def __getitem__(self, i: int) -> str | None:
        code = self.codes[i]
        return None if code < 0 else self.table[code]

    def __setitem__(self, i: int, word: str | None) -> None:
        self.codes[i] = self.code(word)

    def __len__(self) -> int:
        return len(self.codes)

    def array(self, order: Any = None) -> Any:
        """A string array (a categorical with the `known` words as its categories, and any
        other word after them, when there are known words)."""
        codes = numpy_of(self.codes, np.int32, order)
        if self.known:
            categories = pd.CategoricalDtype(self.table)
            return pd.Categorical.from_codes(codes, dtype=categories)
        table = np.array([*self.table, None], dtype=object)
        return pd.array(table[codes], dtype="string")  # code -1 picks the None at the end


class RunIds:
    """Run ids: `<tag>-<number>` (a number without leading zeros) kept as the tag's code and
    the number, any other id as a word of its own (its number -1). A row's run id is never
    rewritten once appended."""

    def __init__(self) -> None:
        self.tags = Words()
        self.numbers = array("q")

    @staticmethod
    def _split(run_id: str | None) -> tuple[str | None, int]:
        if run_id is None:
            return None, -1
        tag, dash, number = run_id.rpartition("-")
        if dash and number.isdigit() and number.isascii() and str(int(number)) == number:
            return tag, int(number)
        return run_id, -1

    def append(self, run_id: str | None) -> None:
        tag, number = self._split(run_id)
        self.tags.append(tag)
        self.numbers.append(number)

    def __getitem__(self, i: int) -> str | None:
        tag, number = self.tags[i], self.numbers[i]
        return tag if number < 0 or tag is None else f"{tag}-{number}"

    def __len__(self) -> int:
        return len(self.numbers)

    def array(self, order: Any = None) -> Any:
        """A string array (made chunk by chunk: see `string_array`)."""
        numbers = numpy_of(self.numbers, np.int64, order)
        codes = numpy_of(self.tags.codes, np.int32, order)
        table = self.tags.table

        def words(rows: range) -> list[str | None]:
            part = slice(rows.start, rows.stop)
            chunk = zip(codes[part].tolist(), numbers[part].tolist(), strict=True)
            return [None if c < 0 else table[c] if k < 0 else f"{table[c]}-{k}" for c, k in chunk]

        return string_array(range(len(numbers)), words)


_CHUNK = 16_384  # rows of a string column made at once


def string_array(
    values: Any, make: Callable[[Any], list[Any]] | None = None, *, hand_over: bool = False
) -> Any:
    """A string array of `values` (or of `make(chunk)` for each chunk of them), made chunk by
    chunk: a large conversion at once reserves about twice what the column holds while it
    grows. With `hand_over`, each value is let go of by `values` (a list) once it is in it."""
    parts = []
    for start in range(0, len(values), _CHUNK):
        chunk = values[start : start + _CHUNK]
        parts.append(pd.array(make(chunk) if make else chunk, dtype="string"))
        if hand_over:
            values[start : start + _CHUNK] = [None] * len(chunk)
    if not parts:
        return pd.array([], dtype="string")
    if len(parts) == 1:
        return parts[0]
    return pd.concat([pd.Series(p, copy=False) for p in parts], ignore_index=True).array


def numpy_of(values: Any, dtype: Any, order: Any = None) -> np.ndarray[Any, Any]:
    """A typed array (or bytes) as a numpy array of its own (in `order`, when given)."""
    if not len(values):
        return np.empty(0, dtype=dtype)
    view = np.frombuffer(values, dtype=dtype)
    out: np.ndarray[Any, Any] = view.copy() if order is None else view[order]
    del view  # the array may grow again once no view of it is left
    return out
