"""How to build each agent of a batch, as one value that can travel to a Ray worker.

`AgentSpec` holds what `map(...)` was given for the agents (model, tools, system prompt, retry
policy and every other `Agent` keyword, `log=` included) and builds one agent per prompt. On Ray
it is pickled once per batch, so everything in it must pickle: model strings, `RetryPolicy`,
plain functions and a log path do.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._core._pacing import Pacer
from .._loop._agent import Agent
from ..events import Event
from ._options import BatchOptions


@dataclass
class AgentSpec:
    """The keywords each agent is made with (`Agent(**kwargs)`: the model, tools, system prompt,
    retry policy and every other `Agent` keyword), and the subscribers each gets after its own."""

    kwargs: dict[str, Any]
    subscribers: list[Callable[[Event], None]] = field(default_factory=list)

    def make(
        self, *subscribers: Callable[[Event], None], limiter: Pacer | bool | None = None
    ) -> Agent:
        kwargs = dict(self.kwargs, subscribers=(*subscribers, *self.subscribers))
        if limiter is not None:
            kwargs["limiter"] = limiter
        return Agent(**kwargs)


@dataclass
class AgentsOptions:
    """Local and Ray agents: how many at once, Ray's workers, and what each agent is made of."""

    spec: AgentSpec
    concurrency: int
    workers: int | None = None

    @classmethod
    def of(cls, options: BatchOptions, *, in_process: bool) -> AgentsOptions:
        kwargs = dict(
            options.agent_kwargs,
            model=options.model,
            tools=list(options.tools),
            system=options.system,
            retry=options.retry,
        )
        if options.output is not None:
            kwargs["output"] = options.output  # as given: a pydantic model travels to Ray
        if in_process and kwargs.get("limiter") == "process":
            kwargs["limiter"] = True  # in one process, the shared limiter is that
        extra = list(kwargs.pop("subscribers", ()) or ())
        return cls(AgentSpec(kwargs, extra), options.concurrency, options.workers)


class BatchControl:
    """The batch's Stop: set from any thread (a button, Ctrl-C, `handle.cancel()`), awaited by
    the runner in its own event loop."""

    def __init__(self) -> None:
        self._set = threading.Event()
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []

    @property
    def cancelled(self) -> bool:
        return self._set.is_set()

    def cancel(self) -> None:
        with self._lock:
            self._set.set()
            waiters = list(self._waiters)
        for loop, event in waiters:
            if not loop.is_closed():
                loop.call_soon_threadsafe(event.set)

    async def until(self, work: asyncio.Future[Any]) -> None:
        """Return once `work` is done or the batch is cancelled, whichever comes first (`work`
        is left as it is)."""
        stop = asyncio.ensure_future(self.wait())
        try:
            await asyncio.wait({work, stop}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stop.cancel()

    async def wait(self) -> None:
        """Return once the batch is cancelled."""
        waiter = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            if self._set.is_set():
                return
            self._waiters.append(waiter)
        try:
            await waiter[1].wait()
        finally:  # ended or given up (`until`'s work came first): it is told no more
            with self._lock:
                self._waiters.remove(waiter)
