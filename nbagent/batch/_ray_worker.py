"""A worker process of a Ray batch: an async actor that runs many agents at once.

The driver sends it prompts one call at a time (`run`), up to its share of the batch's
concurrency; each call builds the agent from the batch's `AgentSpec`, runs it, and returns the
prompt's row and attempt frame. Meanwhile the worker keeps what the driver polls (`drain`):
lane moves, counters, and every attempt row as it ends, so a prompt whose worker dies keeps the
attempts it had made, and what each running agent last did and when (`busy`), so the driver
can tell an agent that is stuck from one that is slow. `cancel` stops every agent of a batch at
once (each still returns its row, marked cancelled); `finish` hands the retry budget back to the
cluster limiter.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import pandas as pd

from .._core._clock import Clock
from .._core._pacing import Pacer, PaceRequest
from .._loop._attempt_log import AttemptLog
from .._loop._durable_log import default_worker
from .._loop._frame import with_origin
from ..events import (
    AttemptFailed,
    AttemptStarted,
    CompactionStarted,
    Event,
    PacedWait,
    RetryScheduled,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
    ToolCallStarted,
)
from ._cluster_limiter import ClusterPacer
from ._frames import agent_row
from ._spec import AgentSpec


@dataclass(frozen=True)
class ClusterLimiter:
    """The batch's limiter actor, by its name (each worker keeps one `ClusterPacer` per name)."""

    name: str
    actor: Any


LimiterChoice = ClusterLimiter | Pacer | bool
"""How a worker's agents are paced: the cluster's limiter actor, a Pacer of the user's, each
worker process's own shared limiter (True), or none (False)."""
_TOLD = (AttemptStarted, AttemptFailed, PacedWait, RetryScheduled)
"""The events the driver's progress hears of (`drain`): lane moves, and what it counts."""


class BatchWorker:
    """One Ray worker process of `map(..., backend="ray")` (wrapped by `ray.remote`)."""

    def __init__(self) -> None:
        self.label = default_worker()
        self._specs: dict[str, AgentSpec] = {}
        self._pacers: dict[str, ClusterPacer] = {}
        self._tasks: dict[str, set[asyncio.Task[Any]]] = {}
        self._cancelled: set[str] = set()
        self._events: dict[str, list[tuple[int, int, Event]]] = {}
        self._rows: dict[str, dict[tuple[int, int, int], dict[str, Any]]] = {}
        self._busy: dict[str, dict[tuple[int, int], tuple[float, str]]] = {}

    def ping(self) -> str:
        return self.label

    async def run(
        self,
        batch: str,
        i: int,
        attempt: int,
        prompt: str,
        spec_box: list[Any],
        limiter: LimiterChoice,
    ) -> tuple[dict[str, Any], pd.DataFrame]:
        """Run prompt `i` (its `attempt`-th try); its row and its attempts. Meanwhile what its
        agent does is kept for `drain`: when it last did something and what it waits for, the
        events the driver's progress hears of, and each attempt row as it ends."""
        busy = self._busy.setdefault(batch, {})
        busy[i, attempt] = (time.monotonic(), "its agent to start")

        def mark(what: str) -> None:
            busy[i, attempt] = (time.monotonic(), what)

        def on_event(event: Event) -> None:
            mark(waiting_for(event))
            if isinstance(event, (AttemptFailed, RetryScheduled)):  # the driver counts it:
                event = replace(event, discarded_text="", discarded_thinking="")  # not its text
            if isinstance(event, _TOLD):
                self._events.setdefault(batch, []).append((i, attempt, event))

        def on_row(idx: int, row: dict[str, Any]) -> None:
            self._rows.setdefault(batch, {})[(i, attempt, idx)] = row

        spec = await self._spec(batch, spec_box[0])
        pacer = self._pacer(limiter)
        if not isinstance(pacer, bool):
            pacer = _MarkedPacer(pacer, mark)
        agent = spec.make(on_event, AttemptLog(on_row=on_row), limiter=pacer)
        run = asyncio.ensure_future(agent.run(prompt, show=False))
        tasks = self._tasks.setdefault(batch, set())
        tasks.add(run)
        try:
            row = await agent_row(agent, prompt, run, stopped=lambda: batch in self._cancelled)
        finally:
            tasks.discard(run)
            busy.pop((i, attempt), None)
        return row, with_origin(agent.attempts, f"{i}.{attempt}", self.label)

    async def connect(self, limiter: LimiterChoice) -> str:
        """Meet the batch's limiter before the prompts come (see `ClusterPacer.next_reply`)."""
        pacer = self._pacer(limiter)
        if isinstance(pacer, ClusterPacer):
            await pacer.next_reply(None)
        return self.label

    def cancel(self, batch: str) -> None:
        """Stop every agent of `batch` now."""
        self._cancelled.add(batch)
        for t in self._tasks.get(batch, set()):
            t.cancel()

    def drain(self, batch: str) -> dict[str, Any]:
        """What happened since the last drain: the agents' events the progress hears of, ended
        attempt rows; and for each running agent, how long ago it last did something, and what
        it waits for."""
        now = time.monotonic()
        busy = self._busy.get(batch, {})
        return {
            "worker": self.label,
            "events": self._events.pop(batch, []),
            "rows": self._rows.pop(batch, {}),
            "busy": {key: (now - t, what) for key, (t, what) in busy.items()},
        }

    async def finish(self, batch: str) -> None:
        """The batch is over: forget it, and give the retry budget back."""
        for key in (self._specs, self._tasks, self._events, self._rows, self._busy):
            key.pop(batch, None)
        self._cancelled.discard(batch)
        for pacer in self._pacers.values():
            await pacer.close()

    # -- helpers ----------------------------------------------------------------------------

    async def _spec(self, batch: str, ref: Any) -> AgentSpec:
        spec = self._specs.get(batch)
        if spec is None:
            spec = self._specs[batch] = await ref
        return spec

    def _pacer(self, choice: LimiterChoice) -> Pacer | bool:
        if not isinstance(choice, ClusterLimiter):
            return choice
        actor, pacer = choice.actor, self._pacers.get(choice.name)
        if pacer is None:  # the core's calls: what `.remote` returns is awaitable
            pacer = ClusterPacer(actor.report.remote, actor.ask.remote, self.label)
            self._pacers[choice.name] = pacer
        return pacer


def waiting_for(event: Event) -> str:
    """What an agent waits for after `event` (the driver's sentence for a stuck prompt)."""
    if isinstance(event, (AttemptStarted, TextDelta, ThinkingDelta, ToolCallDelta)):
        return "the provider's reply"
    if isinstance(event, PacedWait):
        return f"the rate limiter ({event.reason})"
    if isinstance(event, RetryScheduled):
        return "the backoff before a retry"
    if isinstance(event, ToolCallStarted):
        return f"tool `{event.name}` to return"
    if isinstance(event, CompactionStarted):
        return "a summary of the conversation (compaction)"
    return f"its next step (after {type(event).__name__})"


class _MarkedPacer:
    """A run's view of its worker's pacer: the same pacer, and the run's `busy` mark says when
    it waits for a slot (a wait that emits no event until it ends)."""

    def __init__(self, pacer: Pacer, mark: Callable[[str], None]) -> None:
        self._pacer, self._mark = pacer, mark

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        self._mark("a slot from the rate limiter")
        await self._pacer.acquire(clock, ask)
        self._mark("the provider's reply")

    def succeeded(self, now: float, headers: Mapping[str, str]) -> None:
        self._pacer.succeeded(now, headers)

    def failed(self, now: float, error: BaseException) -> None:
        self._pacer.failed(now, error)

    def allow_retry(self, error: BaseException) -> bool:
        return self._pacer.allow_retry(error)
