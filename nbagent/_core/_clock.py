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


@runtime_checkable
class Clock(Protocol):
    """What the agent reads time from and sleeps on (`Agent(clock=...)`).

    Everything that waits (backoff, the rate limiter, budgets' wall clock) goes through one, so
    a `VirtualClock` runs an hour of retries in milliseconds. Any object with these three
    methods will do.
    """

    def now(self) -> float:
        """Seconds on a monotonic scale; only differences mean anything.

        Returns:
            The current time in seconds.
        """
        ...

    def wall(self) -> float:
        """Unix time, for server wishes given as dates (`Retry-After: <HTTP date>`).

        Returns:
            Seconds since the Unix epoch.
        """
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (at once for a non-positive value); cancellable like `asyncio.sleep`.

        Args:
            seconds: How long to wait.
        """
        ...


class RealClock:
    """Monotonic time and real sleeps: the default. Tests and simulations use `VirtualClock`."""

    def now(self) -> float:
        """`time.monotonic()`.

        Returns:
            Seconds on the monotonic clock.
        """
        return time.monotonic()

    def wall(self) -> float:
        """`time.time()`.

        Returns:
            Seconds since the Unix epoch.
        """
        return time.time()

    async def sleep(self, seconds: float) -> None:
        """`asyncio.sleep`, with a negative wait read as none.

        Args:
            seconds: How long to wait.
        """
        await asyncio.sleep(max(0.0, seconds))

    def __repr__(self) -> str:
        return "RealClock()"


class VirtualClock:
    """A clock that only moves when something sleeps (or a test advances it).

    Args:
        start: The time `now()` starts at, in seconds.
        auto_advance: True (the default): a sleep moves time forward at once, so a run with
            minutes of backoff ends in milliseconds. False: a sleep waits until `advance()`
            passes its end, so a test can look at the agent mid-sleep (and cancel it there).
        wall_start: The Unix time `wall()` gives at `start` (a fixed date, so server wishes
            given as HTTP dates are reproducible).

    Attributes:
        auto_advance: Whether sleeps move time forward by themselves.
        slept: Every sleep asked for, in seconds, in order: what a test asserts backoff with.
    """

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
        """The virtual time.

        Returns:
            Seconds since the clock's zero.
        """
        return self._now

    def wall(self) -> float:
        """The virtual time as a Unix time (`wall_start` at `start`).

        Returns:
            Seconds since the Unix epoch.
        """
        return self._now + self._wall_offset

    async def sleep(self, seconds: float) -> None:
        """Record the sleep in `slept`; move time at once, or wait for `advance()`.

        Args:
            seconds: How long to sleep (a negative value is read as 0).
        """
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
        """Move time forward, waking every sleep that ends by then (manual mode).

        Args:
            seconds: How far to move (a negative value is read as 0).
        """
        target = self._now + max(0.0, seconds)
        while self._waiters and self._waiters[0][0] <= target:
            when, _, fut = heapq.heappop(self._waiters)
            self._now = max(self._now, when)
            if not fut.done():
                fut.set_result(None)
        self._now = target

    def __repr__(self) -> str:
        return f"VirtualClock(now={self._now:g})"
