"""The in-process backend: one agent per prompt in this event loop, under the shared limiter.

Every agent uses the same provider and key, so they share one client-side rate limiter (see
`nbagent.RateLimiter`). Cancelling the batch cancels every running agent: each keeps the
attempts it made, and its row says `cancelled`.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from typing import Any

import pandas as pd

from .._loop._frame import with_origin
from .._loop._limiter import RateLimiter
from ..errors import Aborted
from ._frames import row_failed, row_ok
from ._progress import BatchProgress
from ._spec import AgentSpec, BatchControl, cancelled_row

__all__ = ["run_local", "state_of"]


def _retrieve(fut: asyncio.Future[Any]) -> None:
    """The gathered agents were cancelled with the batch: that is not an error to log."""
    if not fut.cancelled():
        fut.exception()


def state_of(row: dict[str, Any]) -> str:
    """The final lane state of a prompt's row."""
    if row.get("end_reason") == "cancelled":
        return "cancelled"
    return "ok" if row.get("error") is None else "failed"


async def run_local(
    texts: list[str],
    spec: AgentSpec,
    concurrency: int,
    progress: BatchProgress,
    control: BatchControl,
) -> tuple[list[dict[str, Any]], list[tuple[int, pd.DataFrame]], str]:
    """Rows in prompt order, attempt frames, and the limiter's description."""
    # a bad model string or a missing key fails here, once, before anything is sent
    first = spec.make()
    limiter = first.pacer_for(first.providers[0])
    await first.aclose()

    worker = f"{socket.gethostname()}:{os.getpid()}"
    rows: list[dict[str, Any] | None] = [None] * len(texts)
    parts: list[tuple[int, pd.DataFrame]] = []
    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, prompt: str) -> None:
        async with gate:
            if control.cancelled:
                return
            progress.set_lane(i, "running")
            agent = spec.make(progress.lane(i))
            t0 = time.monotonic()
            try:
                result = await agent.run(prompt, show=False)
                row = row_ok(prompt, result, time.monotonic() - t0)
            except asyncio.CancelledError:  # the batch was cancelled: keep what it did
                err = Aborted("the batch was cancelled while this prompt ran")
                row = row_failed(prompt, agent.attempts, err, time.monotonic() - t0)
            except Exception as err:  # a prompt that fails hard does not stop the others
                row = row_failed(prompt, agent.attempts, err, time.monotonic() - t0)
            finally:
                await agent.aclose()
            rows[i] = row
            if isinstance(limiter, RateLimiter):  # its pace, for the batch view
                progress.pace = limiter.snapshot(time.monotonic())
            parts.append((i, with_origin(agent.attempts, f"{i}.1", worker)))
            progress.finish(i, state_of(row), reasked=bool(row.get("reasks")))

    tasks = [asyncio.ensure_future(one(i, p)) for i, p in enumerate(texts)]
    everything: asyncio.Future[Any] = asyncio.gather(*tasks)
    everything.add_done_callback(_retrieve)
    stop: asyncio.Future[Any] = asyncio.ensure_future(control.wait())
    try:
        await asyncio.wait({everything, stop}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not everything.done():
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
    out: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        if row is None:
            row = cancelled_row(texts[i], "the batch was cancelled before this prompt started")
            progress.finish(i, "cancelled")
        out.append(row)
    return out, parts, "off" if limiter is None else repr(limiter)
