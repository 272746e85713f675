"""Time as a dependency: the agent never calls `time` or `asyncio.sleep` directly.

`RealClock` is wall time. `VirtualClock` lets tests and teaching simulations run an hour of
backoff in milliseconds: with `auto_advance=True` (the default) a sleep moves time forward at
once; with `auto_advance=False` a sleep waits until the test calls `advance()`, so a test can
observe the agent mid-sleep (and cancel it there).
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from typing import Protocol, runtime_checkable

__all__ = ["Clock", "RealClock", "VirtualClock"]


@runtime_checkable
class Clock(Protocol):
    def now(self) -> float:
        """Seconds on a monotonic scale; only differences mean anything."""
        ...

    def wall(self) -> float:
        """Unix time, for server wishes given as dates."""
        ...

    async def sleep(self, seconds: float) -> None: ...


class RealClock:
    """Monotonic time and real sleeps: the default. Tests and simulations use `VirtualClock`."""

    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "RealClock()"


class VirtualClock:
    """A clock that only moves when something sleeps (or a test advances it)."""

    def __init__(
        self, start: float = 0.0, *, auto_advance: bool = True, wall_start: float = 1.7e9
    ) -> None:
        self._now = float(start)
        self._wall_offset = wall_start - start
        self.auto_advance = auto_advance
        self._waiters: list[tuple[float, int, asyncio.Future[None]]] = []
        self._seq = itertools.count()
        self.slept: list[float] = []

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        return self._now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        seconds = max(0.0, float(seconds))
        self.slept.append(seconds)
        if self.auto_advance:
            self._now += seconds
            await asyncio.sleep(0)  # a point where cancellation can land, as with a real sleep
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (self._now + seconds, next(self._seq), fut))
        await fut

    @property
    def sleepers(self) -> int:
        """How many sleeps are waiting for `advance` (manual mode)."""
        return sum(1 for _, _, f in self._waiters if not f.done())

    def advance(self, seconds: float) -> None:
        """Move time forward, waking every sleep that ends by then (manual mode)."""
        target = self._now + max(0.0, seconds)
        while self._waiters and self._waiters[0][0] <= target:
            when, _, fut = heapq.heappop(self._waiters)
            self._now = max(self._now, when)
            if not fut.done():
                fut.set_result(None)
        self._now = target

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:g})"
