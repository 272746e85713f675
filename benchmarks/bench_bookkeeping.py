"""Bookkeeping: what the subscriber chain costs per event, and building the attempt frame.

1. Per event: a run's events (mostly text deltas) fed to the attempt log and the timeline
   widget model (no front end attached), against a no-op subscriber.
2. The DataFrame of 100,000 attempts: `AttemptLog.frame()` (typed columns: Int64, categories,
   strings) against `pandas.DataFrame.from_records` on the same row dicts.
3. The durable attempt log (`Agent(log="runs.sqlite")`): µs per attempt of the attempt log
   alone and with the SQLite sink, side by side: on the run's own thread (what a run pays: the
   row goes on a queue) and until every row is committed by the writer thread.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from common import Goal, Report, median

from nbagent._core._budget import Usage
from nbagent._loop._attempt_log import AttemptLog
from nbagent._loop._durable_log import DurableLog
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
    ev: list[Event] = [RunStarted(run_id=r, time=0.0, prompt="Go.", model="demo")]
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
            run_id=r,
            phase="request",
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
            run_id=r,
            time=9.0,
            turn=1,
            end_reason="end_turn",
            final_text="x",
            usage=Usage(10, deltas),
            model="demo",
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
                    run_id=r,
                    phase="request",
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
                    run_id=r,
                    phase="request",
                    time=t,
                    turn=1,
                    attempt=a,
                    next_attempt=a + 1,
                    max_attempts=4,
                    delay_s=1.0,
                    policy_delay_s=0.7,
                    retry_after_s=1.0,
                    error="RateLimited",
                    message="rate limited",
                    status_code=429,
                    model="demo",
                )
            )
        else:
            ev.append(
                AttemptSucceeded(
                    run_id=r,
                    phase="request",
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


class _Timed:
    """The durable sink, with the time spent inside its calls added up."""

    def __init__(self, sink: DurableLog) -> None:
        self.sink = sink
        self.seconds = 0.0

    def __call__(self, index: int, row: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        self.sink(index, row)
        self.seconds += time.perf_counter() - t0


def durable_us(events: list[Event], attempts: int, path: Path) -> tuple[float, float, float]:
    """µs per attempt: the sink's own calls, the run's thread in all, and until committed."""
    sink = _Timed(DurableLog(path, path.stem))
    log = AttemptLog(on_row=sink)
    t0 = time.perf_counter()
    for e in events:
        log(e)
    t1 = time.perf_counter()
    sink.sink.close(timeout=None)
    t2 = time.perf_counter()
    per = 1e6 / attempts
    return per * sink.seconds, per * (t1 - t0), per * (t2 - t0)


def in_memory_us(events: list[Event], attempts: int) -> float:
    log = AttemptLog()
    t0 = time.perf_counter()
    for e in events:
        log(e)
    return 1e6 * (time.perf_counter() - t0) / attempts


def durable_section(rep: Report, n: int, repeats: int) -> None:
    """The attempts arrive back to back here (a real run spaces them out by network time, when
    the writer thread has the interpreter to itself): the worst case for the run's thread."""
    events = attempt_events(n)
    in_memory_us(events, n)  # warm-up
    memory, calls, caller, committed = [], [], [], []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(max(3, repeats)):  # interleaved, so both see the same machine
            memory.append(in_memory_us(events, n))
            s, c, w = durable_us(events, n, Path(folder) / f"r{i}.sqlite")
            calls.append(s)
            caller.append(c)
            committed.append(w)
    rep.lines.append("")
    rep.table(
        [f"durable log, {n:,} attempts back to back", "us/attempt"],
        [
            ["attempt log alone (in memory)", median(memory)],
            ["+ durable log: its sink calls (row onto the queue)", median(calls)],
            ["+ durable log: the run's thread in all (shares the GIL)", median(caller)],
            ["+ durable log: until every row is committed", median(committed)],
        ],
    )
    rep.goals.append(Goal("durable log sink calls, us/attempt", median(calls), 10.0))


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
    durable_section(rep, 1_000 if short else 20_000, repeats)
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
