"""Driving agents on a manual `VirtualClock`: a busy process is one whose timers all fire late."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from nbagent import VirtualClock


async def until(ready: Callable[[], bool]) -> None:
    """Let the event loop run until `ready()`; fail (not hang) when it never is."""
    for _ in range(10_000):
        if ready():
            return
        await asyncio.sleep(0)
    raise AssertionError("the agents never got there")


async def drive(clock: VirtualClock, tasks: list[asyncio.Task[None]], step: float) -> None:
    """Let the agents run; whenever all of them wait, move time on by `step` (so each timer
    fires up to `step` late)."""
    for _ in range(100_000):
        for _ in range(20):
            await asyncio.sleep(0)
        if all(t.done() for t in tasks):
            return
        clock.advance(step)
    raise AssertionError("the agents never finished")
