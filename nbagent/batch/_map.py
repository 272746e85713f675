"""Batch prompting: one agent per prompt, many at once, under the shared rate limiter.

    out = nbagent.map(["Summarise A", "Summarise B", ...], model="demo", concurrency=32)
    out.results     # one row per prompt, in prompt order
    out.attempts    # every agent's attempt log, one frame (with a `prompt_index` column)

`map` works from a script and from a notebook cell; `await amap(...)` runs in the current event
loop. Prompts come from a list, a pandas Series, or a DataFrame column (`column=`); the results
keep the Series' or DataFrame's index, so `df.join(out.results)` lines them up.

Every agent uses the same provider and key, so they share one client-side rate limiter (see
`nbagent.RateLimiter`): it learns the provider's limit and paces the requests, and its retry budget
stops an outage from becoming a retry storm. A prompt that fails hard does not stop the others:
its row carries the error (`error` is the error's kind, `error_message` its sentence). In a
notebook one live widget shows progress, retries and waits for the whole batch.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from .._core._retry import RetryPolicy
from .._loop._agent import Agent, RunResult
from .._loop._args import ModelSpec
from .._loop._frame import empty_frame
from ..errors import Aborted, BudgetExceeded, ConfigError
from ..events import (
    AttemptFailed,
    Event,
    PacedWait,
    RetryScheduled,
    RunFinished,
)
from ..notebook import in_notebook

__all__ = ["RESULT_COLUMNS", "BatchProgress", "BatchResult", "amap", "map"]

RESULT_COLUMNS: tuple[str, ...] = (
    "prompt",
    "final_text",
    "end_reason",
    "error",
    "error_message",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "turns",
    "duration_s",
    "run_id",
)


@dataclass
class BatchResult:
    """What `map` returns: `results` (one row per prompt) and `attempts` (every attempt).

    `results` columns: prompt, final_text, end_reason (end_turn | max_tokens | … | error |
    budget | cancelled), error (the error's kind, e.g. "RateLimited", or missing),
    error_message, input_tokens, output_tokens, cost_usd, turns, duration_s (wall seconds),
    run_id (joins with `attempts.run_id`). In a notebook it shows as the results table.
    """

    results: pd.DataFrame
    attempts: pd.DataFrame
    duration_s: float = 0.0
    limiter: str = ""

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
        n, bad = len(self.results), int(self.results["error"].notna().sum())
        requests = self.attempts[
            (self.attempts["phase"] == "request") & (self.attempts["action"] != "paced")
        ]
        retries = int((requests["action"] == "retry").sum())
        paced = self.attempts[self.attempts["action"] == "paced"]
        return (
            f"{n - bad}/{n} prompts ok, {bad} failed in {self.duration_s:.1f} s; "
            f"{len(requests)} requests, {retries} retried, "
            f"{len(paced)} paced waits ({float(paced['delay_s'].sum()):.1f} s)"
        )

    def __repr__(self) -> str:
        return f"BatchResult: {self.summary()}\n{self.results!r}"

    def _repr_html_(self) -> str:
        from html import escape

        table = self.results._repr_html_()  # type: ignore[operator]
        return f"<p><b>BatchResult</b>: {escape(self.summary())}</p>{table}"


@dataclass
class BatchProgress:
    """Counts across all agents of a batch, fed by their events (a subscriber)."""

    total: int
    done: int = 0
    failed: int = 0
    retries: int = 0
    retry_wait_s: float = 0.0
    paced: int = 0
    paced_wait_s: float = 0.0
    errors: int = 0  # failed attempts
    started: float = field(default_factory=time.monotonic)
    on_change: Callable[[BatchProgress, bool], None] | None = None

    def __call__(self, event: Event) -> None:
        final = False
        if isinstance(event, RunFinished):
            self.done += 1
            if event.end_reason in ("error", "cancelled", "budget"):
                self.failed += 1
            final = self.done >= self.total
        elif isinstance(event, RetryScheduled):
            self.retries += 1
            self.retry_wait_s += float(event.delay_s)
        elif isinstance(event, PacedWait):
            self.paced += 1
            self.paced_wait_s += float(event.delay_s)
        elif isinstance(event, AttemptFailed):
            self.errors += 1
        else:
            return
        if self.on_change is not None:
            self.on_change(self, final)

    def text(self) -> str:
        elapsed = time.monotonic() - self.started
        return (
            f"{self.done}/{self.total} done ({self.failed} failed) · {elapsed:.1f} s · "
            f"{self.retries} retries ({self.retry_wait_s:.1f} s backoff) · "
            f"{self.paced} paced waits ({self.paced_wait_s:.1f} s)"
        )


class _ProgressView:
    """An ipywidgets progress bar and a line of text, updated at most ten times a second."""

    def __init__(self, progress: BatchProgress, min_interval: float = 0.1) -> None:
        import ipywidgets
        from IPython.display import display

        self.bar = ipywidgets.IntProgress(
            value=0, min=0, max=max(1, progress.total), description="nbagent.map"
        )
        self.label = ipywidgets.HTML(value=progress.text())
        self.min_interval = min_interval
        self._last = 0.0
        progress.on_change = self.update
        display(ipywidgets.VBox([self.bar, self.label]))  # type: ignore[no-untyped-call]

    def update(self, progress: BatchProgress, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.min_interval:
            return
        self._last = now
        self.bar.value = progress.done
        self.label.value = progress.text()
        if progress.done >= progress.total:
            self.bar.bar_style = "warning" if progress.failed else "success"


def _prompts(
    prompts: Iterable[str] | pd.Series[Any] | pd.DataFrame, column: str | None
) -> tuple[list[str], pd.Index[Any] | None]:
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
        series = prompts[column]
        return [_text(p) for p in series.tolist()], prompts.index
    if isinstance(prompts, pd.Series):
        return [_text(p) for p in prompts.tolist()], prompts.index
    if isinstance(prompts, str):
        raise ConfigError("map() takes many prompts (a list of strings), not one string")
    return [_text(p) for p in prompts], None


def _text(prompt: object) -> str:
    if isinstance(prompt, str):
        return prompt
    if prompt is None or (isinstance(prompt, float) and prompt != prompt):
        return ""
    return str(prompt)


def _end_reason(err: BaseException) -> str:
    if isinstance(err, Aborted):
        return "cancelled"
    if isinstance(err, BudgetExceeded):
        return "budget"
    return "error"


async def amap(
    prompts: Iterable[str] | pd.Series[Any] | pd.DataFrame,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    concurrency: int = 32,
    column: str | None = None,
    tools: Iterable[Any] = (),
    system: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    **agent_kwargs: Any,
) -> BatchResult:
    """Run one agent per prompt, at most `concurrency` at once, in the running loop; see `map`."""
    texts, index = _prompts(prompts, column)
    progress = BatchProgress(total=len(texts))
    if show is None:
        show = in_notebook()
    view = _ProgressView(progress) if show and texts else None
    try:
        return await _run_batch(
            texts, index, model, concurrency, progress, tools, system, retry, agent_kwargs
        )
    finally:
        if view is not None:
            view.update(progress, force=True)


async def _run_batch(
    texts: list[str],
    index: pd.Index[Any] | None,
    model: ModelSpec | Sequence[ModelSpec],
    concurrency: int,
    progress: BatchProgress,
    tools: Iterable[Any],
    system: str | None,
    retry: RetryPolicy | None,
    agent_kwargs: dict[str, Any],
) -> BatchResult:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive whole number, not {concurrency!r}")
    tool_list = list(tools)
    extra = [s for s in agent_kwargs.pop("subscribers", ()) or ()]

    def make(*subscribers: Callable[[Event], None]) -> Agent:
        return Agent(
            model,
            tools=tool_list,
            system=system,
            retry=retry,
            subscribers=(*subscribers, *extra),
            **agent_kwargs,
        )

    # a bad model string or a missing key fails here, once, before anything is sent
    first = make()
    limiter = first.pacer_for(first.providers[0])
    await first.aclose()

    rows: list[dict[str, Any]] = [{} for _ in texts]
    frames: list[pd.DataFrame | None] = [None] * len(texts)
    gate = asyncio.Semaphore(concurrency)
    t_start = time.monotonic()

    async def one(i: int, prompt: str) -> None:
        async with gate:
            agent = make(progress)
            t0 = time.monotonic()
            row: dict[str, Any] = {"prompt": prompt}
            try:
                result: RunResult = await agent.run(prompt, show=False)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # a prompt that fails hard does not stop the others
                row.update(_failure(agent, err))
            else:
                u = result.usage
                row.update(
                    final_text=result.final_text,
                    end_reason=result.end_reason,
                    error=None,
                    error_message=None,
                    input_tokens=u.input_tokens,
                    output_tokens=u.output_tokens,
                    cost_usd=u.cost_usd,
                    turns=result.turns,
                    run_id=result.run_id,
                )
            finally:
                row["duration_s"] = time.monotonic() - t0
                rows[i] = row
                frames[i] = agent.attempts
                await agent.aclose()

    await asyncio.gather(*(one(i, p) for i, p in enumerate(texts)))
    return BatchResult(
        results=_results_frame(rows, index),
        attempts=_attempts_frame(frames),
        duration_s=time.monotonic() - t_start,
        limiter="off" if limiter is None else repr(limiter),
    )


def _failure(agent: Agent, err: Exception) -> dict[str, Any]:
    df = agent.attempts
    run_ids = df["run_id"].dropna()
    cost = df["cost_usd"].dropna()
    turns = df["turn"].dropna()
    return {
        "final_text": None,
        "end_reason": _end_reason(err),
        "error": type(err).__name__,
        "error_message": str(err) or type(err).__name__,
        "input_tokens": int(df["input_tokens"].fillna(0).sum()),
        "output_tokens": int(df["output_tokens"].fillna(0).sum()),
        "cost_usd": float(cost.sum()) if len(cost) else None,
        "turns": int(turns.max()) if len(turns) else 0,
        "run_id": str(run_ids.iloc[-1]) if len(run_ids) else None,
    }


def _results_frame(rows: list[dict[str, Any]], index: pd.Index[Any] | None) -> pd.DataFrame:
    data: dict[str, Any] = {c: [r.get(c) for r in rows] for c in RESULT_COLUMNS}
    df: pd.DataFrame = pd.DataFrame(
        {
            "prompt": pd.array(data["prompt"], dtype="string"),
            "final_text": pd.array(data["final_text"], dtype="string"),
            "end_reason": pd.array(data["end_reason"], dtype="string"),
            "error": pd.array(data["error"], dtype="string"),
            "error_message": pd.array(data["error_message"], dtype="string"),
            "input_tokens": pd.array(data["input_tokens"], dtype="Int64"),
            "output_tokens": pd.array(data["output_tokens"], dtype="Int64"),
            "cost_usd": pd.array(
                [float("nan") if v is None else float(v) for v in data["cost_usd"]],
                dtype="float64",
            ),
            "turns": pd.array(data["turns"], dtype="Int64"),
            "duration_s": pd.array(data["duration_s"], dtype="float64"),
            "run_id": pd.array(data["run_id"], dtype="string"),
        }
    )
    if index is not None:
        df.index = index
    return df


def _attempts_frame(frames: list[pd.DataFrame | None]) -> pd.DataFrame:
    parts = []
    for i, f in enumerate(frames):
        if f is None or not len(f):
            continue
        f = f.copy()
        f.insert(0, "prompt_index", i)
        parts.append(f)
    if not parts:
        empty = empty_frame()
        empty.insert(0, "prompt_index", pd.Series([], dtype="int64"))
        return empty
    out: pd.DataFrame = pd.concat(parts, ignore_index=True)
    return out


def map(
    prompts: Iterable[str] | pd.Series[Any] | pd.DataFrame,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    concurrency: int = 32,
    column: str | None = None,
    tools: Iterable[Any] = (),
    system: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    **agent_kwargs: Any,
) -> BatchResult:
    """Run one agent per prompt, at most `concurrency` at once, and collect the results.

    `prompts` is a list of strings, a pandas Series, or a DataFrame (name the column with
    `column=`). `tools`, `system`, `retry` and any other keyword (`budget=`, `max_tokens=`,
    `limiter=False`, `api_key=`, …) go to each `Agent`. Returns a `BatchResult`: `.results` has
    one row per prompt in prompt order (with the Series'/DataFrame's index), `.attempts` every
    agent's attempt log. Works from a script and from a notebook cell (where a live progress
    widget is shown; `show=False` to opt out). Inside a coroutine, `await amap(...)` instead.
    """
    from .._loop._blocking import run_blocking

    texts, index = _prompts(prompts, column)
    progress = BatchProgress(total=len(texts))
    if show is None:
        show = in_notebook()
    # the widget is displayed from this (the cell's) thread; the batch may run on a worker thread
    view = _ProgressView(progress) if show and texts else None
    try:
        return run_blocking(
            lambda: _run_batch(
                texts, index, model, concurrency, progress, tools, system, retry, agent_kwargs
            )
        )
    finally:
        if view is not None:
            view.update(progress, force=True)
