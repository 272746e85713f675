"""Bookkeeping: what the subscriber chain costs per event, and building the attempt frame.

1. Per event: a run's events (mostly text deltas) fed to the attempt log and the timeline
   widget model (no front end attached), against a no-op subscriber.
2. The DataFrame of 100,000 attempts: `AttemptLog.frame()` (typed columns: Int64, categories,
   strings) against `pandas.DataFrame.from_records` on the same row dicts.
3. The durable attempt log (`Agent(log="runs.sqlite")`): µs per attempt of the attempt log
   alone and with the SQLite sink, side by side: on the run's own thread (what a run pays: the
   row goes on a queue) and until every row is committed by the writer thread.
4. The first tool call of a fresh process against the later ones (each process new, so the
   first `import jsonschema`, about a second where Jupyter is installed, is really paid): the
   step from the model's reply to the next request, the tool's own timed window (what the
   timeline's bar shows), and the longest the event loop went without running.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd
from common import ROOT, Goal, Report, fresh_python, median

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


# One fresh process: a tool is made and an agent built (a notebook's first cell), then, after
# `pause` seconds (the next cell), a run in which a scripted model calls the tool `calls` times.
_FIRST_CALL = """
import asyncio, json, sys, time
pause, calls = float(sys.argv[1]), int(sys.argv[2])
from nbagent import Agent, Reply, ScriptedModel, ToolUse, tool
from nbagent.events import AttemptStarted, AttemptSucceeded, ToolCallFinished

@tool(timeout=0.5)
def add(a: int, b: int) -> int:
    \"\"\"Add two numbers.\"\"\"
    return a + b

script = [Reply(tool_calls=[ToolUse("add", {"a": i, "b": 1})]) for i in range(calls)] + ["done"]
steps, windows, replied = [], [], [None]

def watch(event):
    if isinstance(event, AttemptSucceeded) and event.phase == "request":
        replied[0] = time.perf_counter()
    elif isinstance(event, AttemptStarted) and replied[0] is not None:
        steps.append(time.perf_counter() - replied[0])
        replied[0] = None
    elif isinstance(event, ToolCallFinished):
        windows.append(event.duration_s)

agent = Agent(ScriptedModel(script), tools=[add], subscribers=[watch])
time.sleep(pause)

async def main():
    gap = [0.0]
    async def ticker():
        last = time.perf_counter()
        while True:
            await asyncio.sleep(0.002)
            now = time.perf_counter()
            gap[0] = max(gap[0], now - last)
            last = now
    tick = asyncio.ensure_future(ticker())
    await asyncio.sleep(0.01)
    await agent.run("Go.", show=False)
    tick.cancel()
    return gap[0]

block = asyncio.run(main())
print(json.dumps({"steps": steps, "windows": windows, "block": block}))
"""


def first_call_run(pause: float, calls: int, root: str | None = None) -> dict[str, Any]:
    """One fresh process of `_FIRST_CALL`: its steps, tool windows and longest loop block.
    `root`: the source tree to import nbagent from (this checkout unless given)."""
    return fresh_python(_FIRST_CALL, str(pause), str(calls), root=root or ROOT)


def first_call_section(rep: Report, repeats: int, calls: int) -> None:
    rows: list[list[object]] = []
    for pause, label in ((2.0, "run in the next cell (2 s later)"), (0.0, "run at once")):
        first, later, window1, window_n, block = [], [], [], [], []
        for _ in range(repeats):
            r = first_call_run(pause, calls)
            first.append(r["steps"][0])
            later.append(median(r["steps"][1:]))
            window1.append(r["windows"][0])
            window_n.append(median(r["windows"][1:]))
            block.append(r["block"])
        extra = 1e3 * (median(first) - median(later))
        rows.append(
            [
                label,
                1e3 * median(first),
                1e3 * median(later),
                extra,
                1e3 * median(window1),
                1e3 * median(window_n),
                1e3 * max(block),
            ]
        )
        if pause:
            rep.goals.append(Goal("first tool call, ms more than later ones", extra, 50.0))
        rep.goals.append(Goal(f"{label}: longest event-loop block, ms", 1e3 * max(block), 50.0))
    rep.lines.append("")
    rep.table(
        [
            f"first tool call of a fresh process ({calls} calls)",
            "1st step ms",
            "later ms",
            "extra ms",
            "1st tool ms",
            "later tool ms",
            "loop block ms",
        ],
        rows,
    )


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
    first_call_section(rep, 1 if short else 5, 4 if short else 10)
    return rep


if __name__ == "__main__":
    import sys

    run("--short" in sys.argv).show()
