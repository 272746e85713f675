"""Bookkeeping: what the subscriber chain costs per event, and building the attempt frame.

1. Per event: a run's events (mostly text deltas) fed to the attempt log and the timeline
   widget model (no front end attached), against a no-op subscriber.
2. The DataFrame of 100,000 attempts: `AttemptLog.frame()` (typed columns: Int64, categories,
   strings) against `pandas.DataFrame.from_records` on the same row dicts.
"""

from __future__ import annotations

import time
from typing import Any

import pandas as pd
from common import Goal, Report, median

from nbagent._core._budget import Usage
from nbagent._loop._attempt_log import AttemptLog
from nbagent._loop._frame import COLUMNS
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    RetryScheduled,
    RunFinished,
    RunStarted,
    TextDelta,
)


def run_events(deltas: int) -> list[Event]:
    r = "run1"
    ev: list[Event] = [RunStarted(model="", run_id=r, time=0.0, prompt="Go.")]
    ev.append(
        AttemptStarted(
            phase="request", run_id=r, time=0.0, turn=1, attempt=1, max_attempts=4, model="demo"
        )
    )
    ev += [
        TextDelta(run_id=r, time=0.001 * i, turn=1, text=" word", attempt=1) for i in range(deltas)
    ]
    ev.append(
        AttemptSucceeded(
            phase="request",
            run_id=r,
            time=9.0,
            turn=1,
            attempt=1,
            max_attempts=4,
            model="demo",
            input_tokens=10,
            output_tokens=deltas,
            cost_usd=0.0,
        )
    )
    ev.append(
        RunFinished(
            usage=Usage(),
            model="",
            run_id=r,
            time=9.0,
            turn=1,
            end_reason="end_turn",
            final_text="x",
        )
    )
    return ev


def attempt_events(n: int) -> list[Event]:
    ev: list[Event] = []
    t = 0.0
    for i in range(n):
        r, a = f"run{i // 4}", i % 4 + 1
        ev.append(
            AttemptStarted(
                phase="request", run_id=r, time=t, turn=1, attempt=a, max_attempts=4, model="demo"
            )
        )
        t += 0.5
        if a < 4:
            ev.append(
                AttemptFailed(
                    phase="request",
                    run_id=r,
                    time=t,
                    turn=1,
                    attempt=a,
                    max_attempts=4,
                    model="demo",
                    error="RateLimited",
                    status_code=429,
                    message="rate limited",
                    action="retry",
                    request_id=f"req_{i}",
                )
            )
            ev.append(
                RetryScheduled(
                    phase="request",
                    message="",
                    run_id=r,
                    time=t,
                    turn=1,
                    attempt=a,
                    next_attempt=a + 1,
                    max_attempts=4,
                    delay_s=1.0,
                    policy_delay_s=0.7,
                    retry_after_s=1.0,
                    error="RateLimited",
                    status_code=429,
                    model="demo",
                )
            )
        else:
            ev.append(
                AttemptSucceeded(
                    phase="request",
                    run_id=r,
                    time=t,
                    turn=1,
                    attempt=a,
                    max_attempts=4,
                    model="demo",
                    request_id=f"req_{i}",
                    ttft_s=0.1,
                    input_tokens=100,
                    output_tokens=20,
                    cost_usd=0.001,
                )
            )
        t += 1.0
    return ev


def per_event_us(events: list[Event], make: Any) -> float:
    subs = make()
    t0 = time.perf_counter()
    for e in events:
        for s in subs:
            s(e)
    return 1e6 * (time.perf_counter() - t0) / len(events)


def run(short: bool = False) -> Report:
    from nbagent.notebook._widget import TimelineWidget

    deltas = 2_000 if short else 20_000
    n_attempts = 5_000 if short else 100_000
    repeats = 1 if short else 5
    rep = Report(f"bookkeeping: {deltas:,} events per run; a frame of {n_attempts:,} attempts")

    events = run_events(deltas)
    noop = [per_event_us(events, lambda: [lambda e: None]) for _ in range(repeats)]
    log = [per_event_us(events, lambda: [AttemptLog()]) for _ in range(repeats)]
    chain = [per_event_us(events, lambda: [AttemptLog(), TimelineWidget()]) for _ in range(repeats)]
    rep.table(
        ["subscribers", "us/event"],
        [
            ["no-op function", median(noop)],
            ["attempt log", median(log)],
            ["attempt log + widget model", median(chain)],
        ],
    )

    attempt_log = AttemptLog()
    for e in attempt_events(n_attempts):
        attempt_log(e)
    ours, theirs = [], []
    records: list[dict[str, Any]] = []
    for _ in range(repeats):
        attempt_log._version += 1  # invalidate the cached frame
        t0 = time.perf_counter()
        df = attempt_log.frame()
        ours.append(time.perf_counter() - t0)
        if not records:
            records = [dict(zip(COLUMNS, row, strict=True)) for row in df.itertuples(index=False)]
            records = [{k: (None if pd.isna(v) else v) for k, v in r.items()} for r in records]
        t0 = time.perf_counter()
        pd.DataFrame.from_records(records, columns=list(COLUMNS))
        theirs.append(time.perf_counter() - t0)
    assert len(df) == n_attempts
    rep.lines.append("")
    rep.table(
        ["building the attempt frame", "seconds"],
        [
            ["AttemptLog.frame() (typed)", median(ours)],
            ["pandas.DataFrame.from_records", median(theirs)],
        ],
    )
    rep.goals.append(Goal("AttemptLog.frame() / from_records", median(ours) / median(theirs), 1.5))
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
