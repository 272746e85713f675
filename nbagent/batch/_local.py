"""The in-process backend: one agent per prompt in this event loop, under the shared limiter.

Every agent uses the same provider and key, so they share one client-side rate limiter (see
`nbagent.RateLimiter`). Cancelling the batch cancels every running agent: each keeps the
attempts it made, and its row says `cancelled`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pandas as pd

from .._loop._durable_log import default_worker
from .._loop._frame import with_origin
from .._loop._limiter import RateLimiter
from ._frames import agent_row
from ._progress import BatchProgress
from ._spec import AgentsOptions, BatchControl


async def run_local(
    texts: list[str], options: AgentsOptions, progress: BatchProgress, control: BatchControl
) -> tuple[list[dict[str, Any] | None], list[tuple[int, pd.DataFrame]], str]:
    """Rows in prompt order (None: never started), attempt frames, and the limiter's
    description."""
    spec = options.spec
    # a bad model string or a missing key fails here, once, before anything is sent
    first = spec.make()
    limiter = first.pacer_for(first.providers[0])
    await first.aclose()

    worker = default_worker()
    rows: list[dict[str, Any] | None] = [None] * len(texts)
    parts: list[tuple[int, pd.DataFrame]] = []
    gate = asyncio.Semaphore(options.concurrency)

    async def one(i: int, prompt: str) -> None:
        async with gate:
            if control.cancelled:
                return
            progress.set_lane(i, "running")
            agent = spec.make(progress.lane(i))
            rows[i] = row = await agent_row(agent, prompt, agent.run(prompt, show=False))
            if isinstance(limiter, RateLimiter):  # its pace, for the batch view
                progress.pace = limiter.snapshot(time.monotonic())
            parts.append((i, with_origin(agent.attempts, f"{i}.1", worker)))
            progress.finish_row(i, row)

    tasks = [asyncio.ensure_future(one(i, p)) for i, p in enumerate(texts)]
    # every agent's end (one cancelled with the batch is not an error to log)
    everything: asyncio.Future[Any] = asyncio.gather(*tasks, return_exceptions=True)
    try:
        await control.until(everything)
    finally:
        if not everything.done():
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    return rows, parts, "off" if limiter is None else repr(limiter)
