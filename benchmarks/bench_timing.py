"""Timing on the real clock: how late backoff sleeps wake up, and how fast a cancel lands.

1. An agent retries against an always-503 mock server (its own process) with small fixed
   delays; realised delay = from the RetryScheduled event to the next AttemptStarted, minus the
   scheduled `delay_s`.
2. `cancel()` during a 30 s backoff: the time from the call to the run having ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from common import Goal, Report, median, mock_process, percentile

from nbagent import Agent, RetryPolicy
from nbagent.events import AttemptStarted, Event, RetryScheduled


async def overshoots(url: str, samples: int) -> list[float]:
    policy = RetryPolicy(
        max_attempts=samples + 1, initial_delay=0.01, multiplier=1.2, max_delay=0.05, jitter=None
    )
    agent = Agent("demo", base_url=url, retry=policy, limiter=False)
    out: list[float] = []
    pending: list[tuple[float, float]] = []

    def watch(e: Event) -> None:
        now = time.monotonic()
        if isinstance(e, RetryScheduled):
            pending.append((now, e.delay_s))
        elif isinstance(e, AttemptStarted) and pending:
            t, d = pending.pop()
            out.append(now - t - d)

    agent.subscribe(watch)
    try:
        await agent.run("hi", show=False)
    except Exception:
        pass
    finally:
        await agent.aclose()
    return out


async def cancel_latency(url: str) -> float:
    policy = RetryPolicy(max_attempts=3, initial_delay=30.0, jitter=None)
    agent = Agent("demo", base_url=url, retry=policy, limiter=False)
    scheduled = asyncio.Event()
    agent.subscribe(lambda e: scheduled.set() if isinstance(e, RetryScheduled) else None)
    handle = agent.start("hi", show=False)
    await scheduled.wait()
    await asyncio.sleep(0.1)  # well inside the 30 s backoff
    t0 = time.monotonic()
    handle.cancel()
    with contextlib.suppress(Exception):
        await handle
    elapsed = time.monotonic() - t0
    await agent.aclose()
    return elapsed


def run(short: bool = False) -> Report:
    samples = 20 if short else 200
    cancels = 1 if short else 7
    rep = Report(f"timing: {samples} backoff sleeps, {cancels} cancels during a 30 s backoff")
    with mock_process("--fault-rate", "503=1.0") as url:
        late = asyncio.run(overshoots(url, samples))
        stops = [asyncio.run(cancel_latency(url)) for _ in range(cancels)]
    ms = [1000 * x for x in late]
    rep.table(
        ["figure", "ms"],
        [
            ["realised - scheduled delay, median", median(ms)],
            ["realised - scheduled delay, p99", percentile(ms, 0.99)],
            ["realised - scheduled delay, max", max(ms)],
            ["cancel() to run ended, median", 1000 * median(stops)],
            ["cancel() to run ended, max", 1000 * max(stops)],
        ],
    )
    rep.goals.append(Goal("backoff overshoot median (ms)", median(ms), 5.0))
    rep.goals.append(Goal("cancel to end, max (ms)", 1000 * max(stops), 50.0))
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
