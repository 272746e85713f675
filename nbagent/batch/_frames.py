"""The rows of a batch: what each prompt ended with, and every attempt, as pandas frames.

The agents' backends (local, Ray) build one row per prompt with `row_ok` / `row_failed` (plain
dicts, so a Ray worker can send them back cheaply) and turn them into the results frame with
`rows_frame`; a provider batch keeps one array per column and hands them to `results_frame`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from .._core._words import counted
from .._loop._frame import COLUMNS, ORIGIN_COLUMNS, empty_frame, with_origin
from .._loop._output_schema import OutputSchema
from ..errors import Aborted, BudgetExceeded, ConfigError, OutputInvalid, OutputTruncated
from ._output_columns import OUTPUT_COLUMNS, structured_columns
from ._progress import BatchProgress

_RESULT_DTYPES: dict[str, str] = {
    "prompt": "string",
    "final_text": "string",
    "end_reason": "string",
    "error": "string",
    "error_message": "string",
    "input_tokens": "Int64",
    "output_tokens": "Int64",
    "cost_usd": "float64",
    "turns": "Int64",
    "duration_s": "float64",
    "run_id": "string",
}
RESULT_COLUMNS: tuple[str, ...] = tuple(_RESULT_DTYPES)
"""The columns of `BatchResult.results`, one row per prompt, in the order given."""


@dataclass
class BatchResult:
    """What `map` returns: `results` (one row per prompt) and `attempts` (every attempt).

    `results` columns: prompt, final_text, end_reason (end_turn | max_tokens | … | error |
    budget | cancelled), error (the error's kind, e.g. "RateLimited", or missing),
    error_message, input_tokens, output_tokens, cost_usd, turns, duration_s (wall seconds),
    run_id (joins with `attempts.run_id`); with `output=`, then `output` (the validated answer),
    `reasks` and one typed column per top-level field of the schema (a failed row: its error,
    the raw text of its last answer in `final_text`, empty fields). `attempts` has a
    `prompt_index` column, the attempt
    log's columns, then `agent_id` (which agent: "<prompt index>.<try>") and `worker` (which
    process ran it, `host:pid`). `cancelled` is True when the batch was stopped early: the rows
    that had not finished say `end_reason == "cancelled"`. In a notebook it shows as the table.
    `len(result)` is the number of prompts.

    Attributes:
        results: One row per prompt, in prompt order (columns: `RESULT_COLUMNS`).
        attempts: Every attempt of every agent.
        duration_s: Wall seconds the batch took.
        limiter: What paced the agents, as a sentence (the shared limiter's state).
        backend: "local", "ray" or "provider".
        cancelled: Whether the batch was stopped before every prompt finished.
        state_path: Where a provider batch's state file is (`backend="provider"`;
            `nbagent.batch.resume` reads it); None for the other backends.
    """

    results: pd.DataFrame
    attempts: pd.DataFrame
    duration_s: float = 0.0
    limiter: str = ""
    backend: str = "local"
    cancelled: bool = False
    state_path: str = ""

    def __len__(self) -> int:
        return len(self.results)

    @property
    def ok(self) -> pd.DataFrame:
        """The rows that finished without an error."""
        out: pd.DataFrame = self.results[self.results["error"].isna()]
        return out

    @property
    def failed(self) -> pd.DataFrame:
        """The rows that ended in an error."""
        out: pd.DataFrame = self.results[self.results["error"].notna()]
        return out

    def summary(self) -> str:
        """One line: prompts ok and failed, time, requests, retries (and reasks), paced waits.

        Returns:
            The line ("31/32 prompts ok, 1 failed in 4.2 s; 40 requests, 8 retried, ..."; for
            a provider batch, its batches, submissions and items).
        """
        n, bad, a = len(self.results), int(self.results["error"].notna().sum()), self.attempts
        head = f"{n - bad}/{counted(n, 'prompt')} ok, {bad} failed in {self.duration_s:.1f} s"
        head += " (cancelled)" if self.cancelled else ""
        structured = "reasks" in self.results.columns  # then: how many needed a reask
        reasked = int((self.results["reasks"].fillna(0) > 0).sum()) if structured else 0
        if self.backend == "provider":
            batches = int(a["batch_id"].nunique()) if "batch_id" in a.columns else 0
            cost = self.results["cost_usd"].dropna()
            price = f", ${float(cost.sum()):.4f} at the batch price" if len(cost) else ""
            again = int(a["action"].isin(("retry", "reask")).sum())
            asked = f" ({reasked} reasked)" if structured else ""
            return (
                f"{head}; {counted(batches, 'provider batch', 'provider batches')}, "
                f"{counted(again, 'item')} resubmitted{asked}{price}"
            )
        requests = a[(a["phase"] == "request") & (a["action"] != "paced")]
        retries = int((requests["action"] == "retry").sum())
        paced = a[a["action"] == "paced"]
        asked = f", {reasked} reasked" if structured else ""
        return (
            f"{head}; {counted(len(requests), 'request')}, {retries} retried{asked}, "
            f"{counted(len(paced), 'paced wait')} ({float(paced['delay_s'].sum()):.1f} s)"
        )

    def __repr__(self) -> str:
        return f"BatchResult: {self.summary()}\n{self.results!r}"

    def _repr_html_(self) -> str:
        from html import escape

        table = self.results._repr_html_()  # type: ignore[operator]
        return f"<p><b>BatchResult</b>: {escape(self.summary())}</p>{table}"


def prompts_of(
    prompts: Iterable[str] | pd.Series[Any] | pd.DataFrame, column: str | None
) -> tuple[list[str], pd.Index[Any] | None]:
    """The prompt texts, and the index to give the results (a Series' or DataFrame's)."""
    if isinstance(prompts, pd.DataFrame):
        if column is None:
            if prompts.shape[1] != 1:
                raise ConfigError(
                    "map() got a DataFrame with several columns: name the prompt column with "
                    "column='...'"
                )
            column = str(prompts.columns[0])
        if column not in prompts.columns:
            raise ConfigError(f"map(): the DataFrame has no column {column!r}")
        prompts = prompts[column]  # its index is the frame's
    if isinstance(prompts, pd.Series):
        return _texts(prompts.tolist(), list(prompts.index)), prompts.index
    if isinstance(prompts, str):
        raise ConfigError("map() takes many prompts (a list of strings), not one string")
    return _texts(list(prompts), None), None


_SHOWN = 5  # rows named in the sentence; the rest counted


def _blank(value: object) -> str:
    """How `value` is missing or empty ("NaN", "None", '""'), or "" when it is a prompt."""
    if value is None:
        return "None"
    if isinstance(value, str):
        return repr(value).replace("'", '"') if not value.strip() else ""
    try:
        missing = bool(pd.isna(value))  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return ""  # a list or an array: not a scalar that is missing
    if not missing:
        return ""
    return "NaN" if isinstance(value, float) else str(value)


def _refuse_blank_prompts(values: Sequence[object], labels: Sequence[object] | None) -> None:
    """Raise a `ConfigError` naming the rows whose prompt is missing or empty.

    A NaN in a DataFrame column (a row with no text) used to be sent as "" and answered
    anyway, as was an empty string; a model asked nothing answers something, and the row then
    looks like a result. So a missing or empty prompt is refused before anything runs.

    Args:
        values: The prompts as given (before they are made text).
        labels: The Series' or DataFrame's index labels; None for a list (positions).

    Raises:
        ConfigError: Some prompt is None, NaN (or another missing value) or only whitespace.
    """
    bad = [(i, how) for i, v in enumerate(values) if (how := _blank(v))]
    if not bad:
        return
    names = [f"{labels[i] if labels is not None else i!r} ({how})" for i, how in bad[:_SHOWN]]
    if len(bad) > _SHOWN:
        names.append(f"and {len(bad) - _SHOWN} more")
    one = len(bad) == 1
    if labels is not None:
        where = "index" if one else "indices"
    else:
        where = "position" if one else "positions"
    hint = ' (series.dropna(), series[series.str.strip() != ""])' if labels is not None else ""
    raise ConfigError(
        f"map(): {len(bad)} of {len(values)} prompts {'is' if one else 'are'} missing or "
        f"empty, at {where} {', '.join(names)}; drop or fill {'it' if one else 'them'} "
        f"first{hint}"
    )


def _texts(values: list[Any], labels: list[Any] | None) -> list[str]:
    """The prompts as text: none is missing or empty (those are refused), so each is its `str`
    (a number in an object column, say)."""
    _refuse_blank_prompts(values, labels)
    return [str(p) for p in values]


def _end_reason(err: BaseException) -> str:
    if isinstance(err, Aborted):
        return "cancelled"
    if isinstance(err, BudgetExceeded):
        return "budget"
    return "error"


def row_ok(prompt: str, result: Any, duration_s: float) -> dict[str, Any]:
    """The row of a prompt whose run finished (`result` is a `RunResult`)."""
    u = result.usage
    return {
        "prompt": prompt,
        "final_text": result.final_text,
        "end_reason": result.end_reason,
        "error": None,
        "error_message": None,
        "input_tokens": u.input_tokens,
        "output_tokens": u.output_tokens,
        "cost_usd": u.cost_usd,
        "turns": result.turns,
        "run_id": result.run_id,
        "duration_s": duration_s,
        "output": result.output,
        "reasks": result.reasks,
    }


def row_failed(
    prompt: str,
    err: BaseException,
    attempts: pd.DataFrame | None = None,
    duration_s: float = 0.0,
) -> dict[str, Any]:
    """The row of a prompt that failed hard or was cancelled, from what its attempts say
    (none: it never ran)."""
    df = empty_frame() if attempts is None else attempts
    run_ids = df["run_id"].dropna()
    cost = df["cost_usd"].dropna()
    turns = df["turn"].dropna()
    # a structured answer that failed keeps what the model wrote
    raw = err.raw if isinstance(err, (OutputInvalid, OutputTruncated)) else None
    return {
        "prompt": prompt,
        "final_text": raw,
        "end_reason": _end_reason(err),
        "error": type(err).__name__,
        "error_message": str(err) or type(err).__name__,
        "input_tokens": int(df["input_tokens"].fillna(0).sum()),
        "output_tokens": int(df["output_tokens"].fillna(0).sum()),
        "cost_usd": float(cost.sum()) if len(cost) else None,
        "turns": int(turns.max()) if len(turns) else 0,
        "run_id": str(run_ids.iloc[-1]) if len(run_ids) else None,
        "duration_s": duration_s,
        "output": None,
        "reasks": int((df["action"] == "reask").sum()) if len(df) else 0,
    }


async def agent_row(
    agent: Any, prompt: str, run: Awaitable[Any], *, stopped: Callable[[], bool] = lambda: True
) -> dict[str, Any]:
    """The row of one agent's `run` of `prompt` (the agent closed after it): a prompt that
    fails hard does not stop the others, and a run cancelled because the batch was `stopped`
    keeps what it did."""
    t0 = time.monotonic()
    try:
        return row_ok(prompt, await run, time.monotonic() - t0)
    except asyncio.CancelledError:
        if not stopped():
            raise
        err: BaseException = Aborted("the batch was cancelled while this prompt ran")
    except Exception as failed:
        err = failed
    finally:
        await agent.aclose()
    return row_failed(prompt, err, agent.attempts, time.monotonic() - t0)


def rows_or_cancelled(
    rows: Sequence[dict[str, Any] | None], texts: Sequence[str], progress: BatchProgress
) -> list[dict[str, Any]]:
    """Every prompt's row: one that never started was cancelled with the batch."""
    out = []
    for i, row in enumerate(rows):
        if row is None:
            why = "the batch was cancelled before this prompt started"
            row = row_failed(texts[i], Aborted(why))
            progress.finish_row(i, row)
        out.append(row)
    return out


def results_frame(
    data: dict[str, Any], index: pd.Index[Any] | None, output: OutputSchema | None = None
) -> pd.DataFrame:
    """The results frame from one list (or array: taken as it is, not copied) per column of
    `RESULT_COLUMNS` (no row dicts made), then (with `output`) the structured answers' columns
    from `data["output"]` and `data["reasks"]`."""
    df: pd.DataFrame = pd.DataFrame(
        {c: pd.array(data[c], dtype=t, copy=False) for c, t in _RESULT_DTYPES.items()},
        copy=False,
    )
    if output is not None:
        for name, column in structured_columns(output, data["output"], data["reasks"]).items():
            df[name] = column
    if index is not None:
        df.index = index
    return df


def rows_frame(
    rows: list[dict[str, Any]], index: pd.Index[Any] | None, output: OutputSchema | None
) -> pd.DataFrame:
    """The results frame of rows made by `row_ok` / `row_failed`."""
    names = (*RESULT_COLUMNS, *OUTPUT_COLUMNS)
    return results_frame({c: [r.get(c) for r in rows] for c in names}, index, output)


def attempts_frame(parts: list[tuple[int, pd.DataFrame]]) -> pd.DataFrame:
    """One frame from `(prompt_index, frame with COLUMNS + ORIGIN_COLUMNS)` parts, in order.

    One concat and one inserted column: copying each of hundreds of small frames first costs
    seconds at the end of a large batch."""
    kept = [(i, f) for i, f in sorted(parts, key=lambda p: p[0]) if len(f)]
    frames = [f for _, f in kept] or [with_origin(empty_frame(), "", "")]  # none: no rows
    out: pd.DataFrame = pd.concat(frames, ignore_index=True)
    out = out[[*COLUMNS, *ORIGIN_COLUMNS]]
    index = np.repeat([i for i, _ in kept], [len(f) for _, f in kept])
    out.insert(0, "prompt_index", index.astype("int64"))
    return out
