"""The attempt log's table: its columns, their dtypes, and building frames fast.

The columns are DESIGN.md's contract ("Attempt log"); `ORIGIN_COLUMNS` are added where attempts
of several agents or processes are gathered. Frames are built column-wise from compact columns
(`new_columns`, then `build_frame`), so 100,000 rows cost milliseconds; `coerce` brings a frame
read back from a CSV or a database to exactly these columns and dtypes.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from ._columns import Ints, RunIds, Words, numpy_of, string_array

DTYPES: dict[str, str] = {
    "run_id": "string",
    "turn": "Int64",
    "reask": "Int64",
    "phase": "category",
    "attempt": "Int64",
    "max_attempts": "Int64",
    "model": "string",
    "started_at": "float64",
    "ended_at": "float64",
    "duration_s": "float64",
    "ttft_s": "float64",
    "outcome": "category",
    "error_kind": "string",
    "status_code": "Int64",
    "action": "category",
    "policy_delay_s": "float64",
    "retry_after_s": "float64",
    "delay_s": "float64",
    "request_id": "string",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cache_read_tokens": "Int64",
    "cache_write_tokens": "Int64",
    "cost_usd": "float64",
    "discarded_chars": "Int64",
    "tool_name": "string",
    "message": "string",
}
"""The columns, in order, and the dtype of each (categoricals have the fixed categories of
`CATEGORIES`)."""
COLUMNS: tuple[str, ...] = tuple(DTYPES)
INT_COLUMNS: frozenset[str] = frozenset(c for c, t in DTYPES.items() if t == "Int64")
FLOAT_COLUMNS: frozenset[str] = frozenset(c for c, t in DTYPES.items() if t == "float64")
STRING_COLUMNS: frozenset[str] = frozenset(c for c, t in DTYPES.items() if t == "string")

ORIGIN_COLUMNS: tuple[str, ...] = ("agent_id", "worker")
"""Added where attempts of several agents or processes are gathered (batches, the durable log):
which agent made the attempt, and which process (`host:pid`, or a Ray worker) ran it."""

PHASES: tuple[str, ...] = ("request", "compaction", "tool")
OUTCOMES: tuple[str, ...] = ("ok", "error", "cancelled")
# "reask" (a structured answer off its schema, sent back with its errors) came last, in wave 4
ACTIONS: tuple[str, ...] = (
    "none",
    "retry",
    "compact",
    "tool_result",
    "fallback",
    "fail",
    "paced",
    "reask",
)
CATEGORIES: dict[str, tuple[str, ...]] = {"phase": PHASES, "outcome": OUTCOMES, "action": ACTIONS}

_NAN = math.nan


WORD_COLUMNS: frozenset[str] = frozenset({"model", "error_kind", "tool_name"})
"""The string columns whose values repeat: kept as codes (the others: one string a row)."""


def new_columns(extra: tuple[str, ...] = ()) -> list[Any]:
    """Empty compact columns for COLUMNS (`_columns`), then one of words for each `extra`."""
    cols: list[Any] = []
    for name in COLUMNS:
        if name in FLOAT_COLUMNS:
            cols.append(array("d"))
        elif name in INT_COLUMNS:
            cols.append(Ints())
        elif name in CATEGORIES:
            cols.append(Words(CATEGORIES[name]))
        elif name == "run_id":
            cols.append(RunIds())
        else:
            cols.append(Words() if name in WORD_COLUMNS else [])
    return cols + [Words() for _ in extra]


def cell(name: str, value: Any) -> Any:
    """`value` as column `name` keeps it: NaN for a missing number of a float column, a
    string in a string column."""
    if name in FLOAT_COLUMNS:
        return _NAN if value is None else float(value)
    if name in STRING_COLUMNS and value is not None:
        return str(value)
    return value


def _array(values: Any, order: Any) -> Any:
    if isinstance(values, (Ints, RunIds, Words)):
        return values.array(order)
    if isinstance(values, array):
        return numpy_of(values, np.float64, order)
    if order is not None:
        values = [values[k] for k in order]
    return string_array(values)


def build_frame(
    columns: list[Any],
    order: Any = None,
    names: tuple[str, ...] = COLUMNS,
    *,
    release: bool = False,
) -> pd.DataFrame:
    """The frame of `columns` (`new_columns`: the log's compact ones) named `names`, its rows
    in `order` when one is given; with `release`, each of `columns` is let go of (set to None)
    once its frame column is made, so the two are not held at once."""
    if len(columns) != len(names):
        raise ValueError(f"{len(columns)} columns for {len(names)} names")
    data: dict[str, Any] = {}
    for i, name in enumerate(names):
        data[name] = _array(columns[i], order)
        if release:
            columns[i] = None
    df: pd.DataFrame = pd.DataFrame(data, copy=False)
    return df


def empty_frame() -> pd.DataFrame:
    """An attempt frame with no rows: exactly COLUMNS, with their dtypes."""
    return build_frame(new_columns())


def coerce(df: pd.DataFrame) -> pd.DataFrame:
    """A frame with exactly COLUMNS and their dtypes, from anything close to one.

    Use it on a frame read back from CSV (`coerce(pd.read_csv(path))`): missing columns are
    added empty, extra columns dropped, the categoricals get their fixed categories.
    """
    n = len(df)
    data: dict[str, Any] = {}
    for name, column in zip(COLUMNS, new_columns(), strict=True):
        if name not in df.columns:
            col: pd.Series[Any] = pd.Series([None] * n, index=df.index, dtype=object)
        else:
            col = df[name]
        if name in INT_COLUMNS:
            data[name] = pd.to_numeric(col, errors="coerce").astype("Int64")
        elif name in FLOAT_COLUMNS:
            data[name] = pd.to_numeric(col, errors="coerce").astype("float64")
        else:  # words, as the log keeps them (a category outside the fixed ones after them)
            for v in col.tolist():
                column.append(None if _missing(v) else str(v))
            data[name] = pd.Series(_array(column, None), index=df.index, name=name)
    out: pd.DataFrame = pd.DataFrame(data).reset_index(drop=True)
    return out


def with_origin(
    df: pd.DataFrame, agent_id: str | Sequence[str | None], worker: str | Sequence[str | None]
) -> pd.DataFrame:
    """`df` with the gathered columns (`ORIGIN_COLUMNS`) added after COLUMNS: each one value
    for every row, or one per row."""
    out: pd.DataFrame = df.copy(deep=False)  # the columns are added, none changed
    for name, value in zip(ORIGIN_COLUMNS, (agent_id, worker), strict=True):
        values = [value] * len(out) if isinstance(value, str) else list(value)
        out[name] = pd.array(values, dtype="string")
    return out


def _missing(value: Any) -> bool:
    if value is None or value is pd.NA:
        return True
    return isinstance(value, float) and math.isnan(value)


def frame_from_records(records: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """An attempt frame from row dicts (missing keys are empty)."""
    cols = new_columns()
    for rec in records:
        for col, name in zip(cols, COLUMNS, strict=True):
            col.append(cell(name, rec.get(name)))
    return build_frame(cols)
