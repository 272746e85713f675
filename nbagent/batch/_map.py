"""Batch prompting: one agent per prompt, many at once, under one rate budget.

    out = nbagent.map(["Summarise A", "Summarise B", ...], model="demo", concurrency=32)
    out.results     # one row per prompt, in prompt order
    out.attempts    # every agent's attempt log, one frame (prompt_index, agent_id, worker)

`map` works from a script and from a notebook cell; `await amap(...)` runs in the current event
loop; `start(...)` runs in the background and returns a `BatchHandle` (`await handle`,
`handle.cancel()`). Prompts come from a list, a pandas Series, or a DataFrame column
(`column=`); the results keep the Series' or DataFrame's index, so `df.join(out.results)` lines
them up.

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
import inspect
import os
import sys
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import Any, Literal, TypeVar, overload

from typing_extensions import Unpack

from .._core._clock import Clock
from .._core._retry import RetryPolicy
from .._loop._args import ModelSpec
from .._loop._blocking import run_blocking
from .._loop._output_schema import OutputSchema
from ..errors import ConfigError
from ..notebook import in_notebook
from ._backends import Backend, backend_for
from ._estimate import BatchEstimate, dry_run_estimate
from ._frames import RESULT_COLUMNS, BatchResult, prompts_of
from ._options import BatchKeywords, BatchOptions, Prompts
from ._output_columns import check_fields
from ._progress import TerminalBar
from ._provider_backend import ProviderBatch

_F = TypeVar("_F", bound=Callable[..., Any])


class _Batch:
    """One batch, prepared: its backend made (options checked, nothing sent), view shown."""

    def __init__(self, backend: Backend, *, show: bool | None, stoppable: bool) -> None:
        self.backend = backend
        self.progress, self.control = backend.progress, backend.control
        self._views: list[Any] = []
        if show is None:
            show = in_notebook() or sys.stderr.isatty()
        if self.progress.total and show:
            backend.announce()  # where a provider batch's state is: the first progress line
            self._open_view(stoppable)

    @classmethod
    def of(cls, options: BatchOptions, *, stoppable: bool) -> _Batch:
        """The batch of a `map` / `amap` / `start` call."""
        texts, index = prompts_of(options.prompts, options.column)
        # output=: converted and checked once, before anything runs (each agent, and a Ray
        # worker, gets the schema as given: a pydantic model travels, a TypeAdapter would not)
        output = None if options.output is None else OutputSchema.of(options.output)
        if output is not None:
            check_fields(output, RESULT_COLUMNS)
        backend = backend_for(options, texts, index, output)
        return cls(backend, show=options.show, stoppable=stoppable)

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
        try:
            return await self.backend.run()
        finally:
            self.close()

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
    `cancel()` stops every agent, and the result then holds what finished.

    Args:
        task: The task running the batch.
        batch: The batch (its progress and its stop control).

    Attributes:
        task: The task running the batch.
        progress: The live counts and lanes (`handle.progress.text()`).
    """

    def __init__(self, task: asyncio.Task[BatchResult], batch: _Batch) -> None:
        self.task = task
        self.progress = batch.progress
        self._control = batch.control

    def cancel(self) -> None:
        """Stop the batch: every running agent is cancelled; awaiting gives what finished."""
        self._control.cancel()

    def done(self) -> bool:
        """Whether the batch has ended.

        Returns:
            True once every prompt has its row (or the batch was cancelled and has stopped).
        """
        return self.task.done()

    def result(self) -> BatchResult:
        """The result of a finished batch, without awaiting.

        Returns:
            The batch's result.

        Raises:
            asyncio.InvalidStateError: The batch is still running.
        """
        return self.task.result()

    def __await__(self) -> Generator[Any, None, BatchResult]:
        return self.task.__await__()

    def __repr__(self) -> str:
        state = "done" if self.done() else "running"
        return f"BatchHandle({state}: {self.progress.text()})"


@overload
def map(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: Literal[False] = False,
    **options: Unpack[BatchKeywords],
) -> BatchResult: ...


@overload
def map(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: Literal[True],
    **options: Unpack[BatchKeywords],
) -> BatchEstimate: ...


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
    state: str | os.PathLike[str] | None = None,
    dry_run: bool = False,
    output: Any = None,
    **agent_kwargs: Any,
) -> BatchResult | BatchEstimate:
    """Run one agent per prompt (or one batch API request), and collect the results.

    Works from a script and from a notebook cell. Local and Ray backends run at most
    `concurrency` agents at once; `backend="provider"` sends the prompts to the provider's
    batch API, polls it, resubmits the items that failed retryably, and reads each answer
    as a live answer is read. Ctrl-C (or the kernel's interrupt) stops the batch and returns
    what finished (with `backend="provider"`: the provider's batches are cancelled and what
    they had answered is collected).

    Args:
        prompts: The prompts: a list of strings, a pandas Series, or a DataFrame (name the
            column with `column=`). The results keep a Series' or DataFrame's index.
        model: The model string (or `Provider`, or a fallback chain of them) every prompt
            goes to, e.g. "demo" or "anthropic:claude-haiku-4-5".
        concurrency: How many agents run at once (local and Ray backends).
        column: The DataFrame column that holds the prompts.
        tools: Tools each agent may call (not with `backend="provider"`).
        system: The system prompt of every request.
        retry: The retry policy (`RetryPolicy`); with `backend="provider"` it also bounds
            how often a failed item is resubmitted, with its backoff between submissions.
        show: Show the live batch view (a notebook) or a progress line (a terminal);
            default: when there is one to show it in.
        backend: "local" (this process), "ray" (Ray workers, one cluster-wide rate
            limiter), or "provider" (the provider's batch API: Anthropic, OpenAI, Azure,
            Gemini, or "demo"; half the price, within 24 hours).
        workers: How many Ray worker processes (`backend="ray"`).
        state: Where `backend="provider"` keeps what a restarted kernel needs to pick the
            batch up (`nbagent.batch.resume(state)`); default: next to `log=`'s file, else
            a file in the working directory, named in the first progress line.
        dry_run: Send nothing; return a `BatchEstimate` of the tokens and the cost, live and
            through the batch API.
        output: A schema for structured answers (a pydantic model, dataclass, TypedDict,
            `list[...]` of those, or a JSON Schema dict), given to every agent (with
            `backend="provider"`: to every item, each answer checked as a live one is and
            one off its schema resubmitted with its errors): the results gain `output`,
            `reasks` and a typed column per top-level field, so `df.join(out.results)` adds
            them to your frame. A field named like a result column is a `ConfigError` before
            anything runs.
        **agent_kwargs: Every other keyword goes to each `Agent` (`budget=`,
            `max_tokens=`, `limiter=False`, `api_key=`, `log=`, `output_mode=`,
            `output_retries=`, ...). With
            `backend="provider"`: `api_key`, `base_url`, `max_tokens`, `options`, `clock`,
            `log` (each item's attempts go there too), `output_mode`, `output_retries`,
            `poll=(first, most)` seconds between polls, `batch_caps=(requests, bytes)`.

    Returns:
        A `BatchResult`: `.results` has one row per prompt in prompt order (with the
        Series'/DataFrame's index), `.attempts` every attempt (with `backend="provider"`
        one row per item per submission, with its `batch_id`). With `dry_run=True` a
        `BatchEstimate` instead.

    Raises:
        ConfigError: An option, the model string or the key is wrong (before anything is
            sent), or the model's provider has no batch API (`backend="provider"`).
    """
    options = BatchOptions.of(locals())
    if options.dry_run:
        return dry_run_estimate(options)
    batch = _Batch.of(options, stoppable=False)
    return _run_blocking(batch)


def _takes_map_options(fn: _F) -> _F:
    """Mark an entry point that takes `map`'s options (`**options: Unpack[BatchKeywords]`,
    bound by `_options_as_map`): `help()` and `inspect` show it with `map`'s signature."""
    shown = inspect.signature(map).replace(
        return_annotation=inspect.signature(fn).return_annotation
    )
    fn.__signature__ = shown  # type: ignore[attr-defined]
    return fn


def _options_as_map(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec],
    dry_run: bool,
    options: BatchKeywords,
) -> BatchOptions:
    """The options of an `amap` / `start` call, bound as a `map` call binds them (its
    signature is the one list of the options and their defaults)."""
    call = inspect.signature(map).bind(prompts, model, dry_run=dry_run, **options)
    call.apply_defaults()
    return BatchOptions.of(call.arguments)


@overload
async def amap(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: Literal[False] = False,
    **options: Unpack[BatchKeywords],
) -> BatchResult: ...


@overload
async def amap(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: Literal[True],
    **options: Unpack[BatchKeywords],
) -> BatchEstimate: ...


@_takes_map_options
async def amap(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: bool = False,
    **options: Unpack[BatchKeywords],
) -> BatchResult | BatchEstimate:
    """Run one agent per prompt in the running event loop, and collect the results.

    The awaitable form of `map`, with the same options. Cancelling the awaiting task stops
    every agent (and raises); use `start` for a batch you can stop and keep.

    Args:
        prompts: As for [`map`][nbagent.map].
        model: As for [`map`][nbagent.map].
        dry_run: As for [`map`][nbagent.map].
        **options: As for [`map`][nbagent.map]: `concurrency=`, `column=`, `tools=`,
            `system=`, `retry=`, `show=`, `backend=`, `workers=`, `state=`, `output=` and
            every `Agent` keyword.

    Returns:
        A `BatchResult` (see `map`), or with `dry_run=True` a `BatchEstimate`.

    Raises:
        ConfigError: As for [`map`][nbagent.map].
    """
    batch_options = _options_as_map(prompts, model, dry_run, options)
    if batch_options.dry_run:
        return dry_run_estimate(batch_options)
    return await _Batch.of(batch_options, stoppable=False).run()


@_takes_map_options
def start(
    prompts: Prompts,
    model: ModelSpec | Sequence[ModelSpec] = "demo",
    *,
    dry_run: bool = False,
    **options: Unpack[BatchKeywords],
) -> BatchHandle:
    """Start a batch in the background of the running event loop and return its handle.

    The kernel stays free while the batch runs; the view's Stop button (or
    `handle.cancel()`) stops it, and `await handle` gives what finished. With
    `backend="provider"` stopping cancels the provider's batches and collects what they had
    answered; a kernel that dies leaves them running, resumable from the state file.

    Args:
        prompts: As for [`map`][nbagent.map].
        model: As for [`map`][nbagent.map].
        dry_run: As for [`map`][nbagent.map] (True is refused: there is nothing to run).
        **options: As for [`map`][nbagent.map]: `concurrency=`, `column=`, `tools=`,
            `system=`, `retry=`, `show=`, `backend=`, `workers=`, `state=`, `output=` and
            every `Agent` keyword.

    Returns:
        The `BatchHandle` of the running batch.

    Raises:
        ConfigError: An option, the model string or the key is wrong, or `dry_run=True`
            (use `map` for an estimate: there is nothing to run in the background).
        RuntimeError: No event loop is running (call it from a notebook cell or a coroutine).
    """
    batch_options = _options_as_map(prompts, model, dry_run, options)
    if batch_options.dry_run:
        raise ConfigError("dry_run=True sends nothing: use nbagent.map(..., dry_run=True)")
    loop = asyncio.get_running_loop()  # before any view is shown: start needs a running loop
    batch = _Batch.of(batch_options, stoppable=True)
    return BatchHandle(loop.create_task(batch.run()), batch)


def resume(
    state: str | os.PathLike[str],
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy | None = None,
    show: bool | None = None,
    clock: Clock | None = None,
    poll: tuple[float, float] | None = None,
    output: Any = None,
) -> BatchResult:
    """Pick up a provider batch from its state file: after a kernel restart, or elsewhere.

    Every batch the state names is polled where it stands (a create that may have been sent
    is looked for among the provider's batches before it is sent again), finished batches'
    results are read again from the provider, and the run goes on to its end; no item is
    submitted twice. The result is the `BatchResult` the first run would have returned. A
    batch begun with `output=` checks its answers against the JSON Schema its state file
    keeps (the values are then dicts); give the schema again (`output=Review`) to get its
    instances back. A batch begun with `log=` goes on writing its attempts there.

    Args:
        state: The state file the batch's first progress line named (`state=`).
        api_key: The key (default: the provider's environment variable; never stored).
        base_url: Another endpoint than the one the state names.
        retry: Another retry policy than the one the batch began with.
        show: Show the live view or progress line (default: when there is one).
        clock: The clock to wait on (a `VirtualClock` in tests).
        poll: (first, most) seconds between polls.
        output: The schema the batch began with (`map(..., output=Review)`), given again so
            that `results["output"]` holds its instances; None: dicts, checked against the
            stored JSON Schema.

    Returns:
        The batch's `BatchResult`.

    Raises:
        ConfigError: The file is missing or not a batch state file, the key is missing, or
            `output` is not the schema the batch began with (or it began without one).
    """
    batch = ProviderBatch.from_state(
        state,
        api_key=api_key,
        base_url=base_url,
        retry=retry,
        clock=clock,
        poll=poll,
        output=output,
    )
    return _run_blocking(_Batch(batch, show=show, stoppable=False))


def _run_blocking(batch: _Batch) -> BatchResult:
    """Run the batch on a thread with its own loop while this thread waits; an interrupt
    stops the batch, and the result of what finished is returned."""

    def stop() -> None:
        batch.control.cancel()
        print("nbagent.map: interrupted; stopping every agent", file=sys.stderr)

    return run_blocking(batch.run, stop=stop)
