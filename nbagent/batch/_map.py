"""Batch prompting: one agent per prompt, many at once, under one rate budget.

    out = nbagent.map(["Summarise A", "Summarise B", ...], model="demo", concurrency=32)
    out.results     # one row per prompt, in prompt order
    out.attempts    # every agent's attempt log, one frame (prompt_index, agent_id, worker)

`map` works from a script and from a notebook cell; `await amap(...)` runs in the current event
loop; `start(...)` runs in the background and returns a `BatchHandle` (`await handle`,
`handle.cancel()`). Prompts come from a list, a pandas Series, or a DataFrame column
(`column=`); the results keep the Series' or DataFrame's index, so `df.join(out.results)` lines
them up.

`output=Schema` asks every agent for a structured answer (`Agent(output=...)`): the results gain
`output`, `reasks` and one typed column per top-level field of the schema, so
`df.join(out.results)` adds them to the user's frame (see `_output_columns`).

`backend="local"` (the default) runs every agent in this process under the shared rate limiter
(see `nbagent.RateLimiter`); `backend="ray"` spreads them over Ray worker processes with one
limiter for the whole cluster in a Ray actor (see `_ray.py`). A prompt that fails hard does not
stop the others: its row carries the error (`error` is its kind, `error_message` its sentence).
Cancelling (the view's Stop, Ctrl-C during `map`, `handle.cancel()`) stops every agent at once
and returns what finished; the other rows say `cancelled`. In a notebook a live batch view shows
progress; in a terminal, a one-line progress bar on stderr.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import sys
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any

from .._core._retry import RetryPolicy
from .._loop._args import ModelSpec
from .._loop._output_schema import OutputSchema
from ..notebook import in_notebook
from ._frames import RESULT_COLUMNS, BatchResult, attempts_frame, prompts_of, results_frame
from ._local import run_local
from ._options import BatchOptions, Prompts
from ._output_columns import check_fields
from ._progress import BatchProgress, TerminalBar
from ._spec import AgentSpec, BatchControl

__all__ = [
    "RESULT_COLUMNS",
    "BatchHandle",
    "BatchProgress",
    "BatchResult",
    "amap",
    "map",
    "start",
]


class _Batch:
    """One batch, prepared: options checked, progress and control made, view shown."""

    def __init__(self, options: BatchOptions, *, stoppable: bool) -> None:
        self.texts, self.index = prompts_of(options.prompts, options.column)
        backend, agent_kwargs = options.backend, dict(options.agent_kwargs)
        if backend == "ray":
            from ._ray import ensure_ray

            ensure_ray()  # here, in the caller's thread: Ray starts from the main thread
        if backend == "local" and agent_kwargs.get("limiter") == "process":
            agent_kwargs["limiter"] = True  # in one process, the shared limiter is that
        extra = list(agent_kwargs.pop("subscribers", ()) or ())
        # output=: converted and checked once, before anything runs (each agent, and a Ray
        # worker, gets the schema as given: a pydantic model travels, a TypeAdapter would not)
        self.output = None if options.output is None else OutputSchema.of(options.output)
        if self.output is not None:
            check_fields(self.output, RESULT_COLUMNS)
            agent_kwargs["output"] = options.output
        self.spec = AgentSpec(
            options.model, list(options.tools), options.system, options.retry, extra, agent_kwargs
        )
        self.concurrency, self.backend, self.workers = options.concurrency, backend, options.workers
        self.progress = BatchProgress(total=len(self.texts), backend=backend)
        self.control = BatchControl()
        self._views: list[Any] = []
        show = options.show
        if show is None:
            show = in_notebook() or sys.stderr.isatty()
        if show and self.texts:
            self._open_view(stoppable)

    def _open_view(self, stoppable: bool) -> None:
        if in_notebook():
            from ..notebook._batch_view import show_batch_view

            view = show_batch_view(
                self.progress.snapshot(), self.control.cancel if stoppable else None
            )
            self._views.append(view)
            self.progress.on_change = lambda p, final: view.update(p.snapshot(), force=final)
        else:
            bar = TerminalBar(self.progress)
            self._views.append(bar)
            self.progress.on_change = bar.update

    async def run(self) -> BatchResult:
        t0 = time.monotonic()
        try:
            if self.backend == "ray":
                from ._ray import run_ray

                rows, parts, limiter = await run_ray(
                    self.texts,
                    self.spec,
                    self.concurrency,
                    self.progress,
                    self.control,
                    workers=self.workers,
                )
            else:
                rows, parts, limiter = await run_local(
                    self.texts, self.spec, self.concurrency, self.progress, self.control
                )
        finally:
            self.close()
        return BatchResult(
            results=results_frame(rows, self.index, self.output),
            attempts=attempts_frame(parts),
            duration_s=time.monotonic() - t0,
            limiter=limiter,
            backend=self.backend,
            cancelled=self.control.cancelled,
        )

    def close(self) -> None:
        snap = self.progress.snapshot()
        for view in self._views:
            if isinstance(view, TerminalBar):
                view.close()
            else:
                view.update(snap, force=True)
                view.finished()


class BatchHandle:
    """A batch running in the background (from `start`): `await handle` for its `BatchResult`;
    `cancel()` stops every agent, and the result then holds what finished."""

    def __init__(self, task: asyncio.Task[BatchResult], batch: _Batch) -> None:
        self.task = task
        self.progress = batch.progress
        self._control = batch.control

    def cancel(self) -> None:
        """Stop the batch: every running agent is cancelled; awaiting gives what finished."""
        self._control.cancel()

    def done(self) -> bool:
        return self.task.done()

    def result(self) -> BatchResult:
        """The result of a finished batch (raises if it is still running)."""
        return self.task.result()

    def __await__(self) -> Generator[Any, None, BatchResult]:
        return self.task.__await__()

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"BatchHandle({state}: {self.progress.text()})"


async def amap(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    concurrency: int = 32,
    column: str | None = None,
    tools: Iterable[Any] = (),
    system: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    backend: str = "local",
    workers: int | None = None,
    output: Any = None,
    **agent_kwargs: Any,
) -> BatchResult:
    """Run one agent per prompt in the running event loop; see `map`. Cancelling the awaiting
    task stops every agent (and raises); use `start` for a batch you can stop and keep.

    Args:
        prompts: The prompts: a list of strings, a pandas Series, or a DataFrame (with
            `column=`).
        model: A model string, a `Provider`, or a fallback chain of them.
        concurrency: How many agents run at once.
        column: The DataFrame's prompt column.
        tools: The agents' tools.
        system: The agents' system prompt.
        retry: The agents' retry policy.
        show: Show the live batch view (None: in a notebook or a terminal).
        backend: "local" (this process) or "ray" (Ray worker processes).
        workers: With `backend="ray"`, how many worker processes.
        output: A schema for structured answers (a pydantic model, dataclass, TypedDict or
            JSON Schema dict): the results gain `output`, `reasks` and a typed column per
            top-level field.
        **agent_kwargs: Any other `Agent` keyword, given to each agent (`budget=`,
            `max_tokens=`, `limiter=False`, `log=`, `output_mode=`, `output_retries=`, ...).

    Returns:
        The batch's `BatchResult`.

    Raises:
        ConfigError: An option of a wrong kind, or a schema field named like a result
            column, before anything runs.
    """
    return await _Batch(BatchOptions.of(locals()), stoppable=False).run()


def start(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    concurrency: int = 32,
    column: str | None = None,
    tools: Iterable[Any] = (),
    system: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    backend: str = "local",
    workers: int | None = None,
    output: Any = None,
    **agent_kwargs: Any,
) -> BatchHandle:
    """Start a batch in the background of the running event loop (a notebook cell) and return
    its `BatchHandle` at once; the kernel stays free, and the view's Stop button cancels it.

    Args:
        prompts: The prompts: a list of strings, a pandas Series, or a DataFrame (with
            `column=`).
        model: A model string, a `Provider`, or a fallback chain of them.
        concurrency: How many agents run at once.
        column: The DataFrame's prompt column.
        tools: The agents' tools.
        system: The agents' system prompt.
        retry: The agents' retry policy.
        show: Show the live batch view (None: in a notebook or a terminal).
        backend: "local" (this process) or "ray" (Ray worker processes).
        workers: With `backend="ray"`, how many worker processes.
        output: A schema for structured answers (a pydantic model, dataclass, TypedDict or
            JSON Schema dict): the results gain `output`, `reasks` and a typed column per
            top-level field.
        **agent_kwargs: Any other `Agent` keyword, given to each agent (`budget=`,
            `max_tokens=`, `limiter=False`, `log=`, `output_mode=`, `output_retries=`, ...).

    Returns:
        The running batch's handle (`await handle` for its `BatchResult`).

    Raises:
        ConfigError: An option of a wrong kind, or a schema field named like a result
            column, before anything runs.
    """
    options = BatchOptions.of(locals())
    loop = asyncio.get_running_loop()  # before any view is shown: start needs a running loop
    batch = _Batch(options, stoppable=True)
    return BatchHandle(loop.create_task(batch.run()), batch)


def map(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    concurrency: int = 32,
    column: str | None = None,
    tools: Iterable[Any] = (),
    system: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    backend: str = "local",
    workers: int | None = None,
    output: Any = None,
    **agent_kwargs: Any,
) -> BatchResult:
    """Run one agent per prompt, at most `concurrency` at once, and collect the results.

    `prompts` is a list of strings, a pandas Series, or a DataFrame (name the column with
    `column=`). `tools`, `system`, `retry` and any other keyword (`budget=`, `max_tokens=`,
    `limiter=False`, `api_key=`, `log=`, `output_mode=`, `output_retries=` …) go to each
    `Agent`. `output=` (a pydantic model, dataclass, TypedDict, or JSON Schema dict) asks for
    structured answers: `.results` gains `output`, `reasks` and a typed column per top-level
    field (a field named like a result column is a `ConfigError`, before anything runs).
    `backend="ray"` runs the agents in Ray worker processes (`workers=` of them; default: one
    per CPU of the cluster) under one cluster-wide rate limiter. Returns a `BatchResult`:
    `.results` has one row per prompt in prompt order (with the Series'/DataFrame's index),
    `.attempts` every agent's attempt log.
    Ctrl-C (or the kernel's interrupt) cancels every agent and returns what finished.

    Args:
        prompts: The prompts: a list of strings, a pandas Series, or a DataFrame (with
            `column=`).
        model: A model string, a `Provider`, or a fallback chain of them.
        concurrency: How many agents run at once.
        column: The DataFrame's prompt column.
        tools: The agents' tools.
        system: The agents' system prompt.
        retry: The agents' retry policy.
        show: Show the live batch view (None: in a notebook or a terminal).
        backend: "local" (this process) or "ray" (Ray worker processes).
        workers: With `backend="ray"`, how many worker processes.
        output: A schema for structured answers (a pydantic model, dataclass, TypedDict or
            JSON Schema dict): the results gain `output`, `reasks` and a typed column per
            top-level field.
        **agent_kwargs: Any other `Agent` keyword, given to each agent (`budget=`,
            `max_tokens=`, `limiter=False`, `log=`, `output_mode=`, `output_retries=`, ...).

    Returns:
        The batch's `BatchResult`.

    Raises:
        ConfigError: An option of a wrong kind, or a schema field named like a result
            column, before anything runs.
    """
    batch = _Batch(BatchOptions.of(locals()), stoppable=False)
    return _run_blocking(batch.run, batch.control)


def _run_blocking(make: Callable[[], Any], control: BatchControl) -> BatchResult:
    """Run the batch on a thread with its own loop while this thread waits; an interrupt
    cancels the batch and the result of what finished is returned."""
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="nbagent-map") as pool:
        future = pool.submit(lambda: asyncio.run(make()))
        try:
            while True:
                try:
                    result: BatchResult = future.result(timeout=0.1)
                    return result
                except concurrent.futures.TimeoutError:
                    continue
        except KeyboardInterrupt:
            control.cancel()
            print("nbagent.map: interrupted; stopping every agent", file=sys.stderr)
            result = future.result()
            return result
