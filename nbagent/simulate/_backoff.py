"""Retries and contention in virtual time (`simulate_retries`, `simulate_contention`,
`compare_jitter`); the package docstring of `nbagent.simulate` shows them in use.

`simulate_contention` is the experiment of the AWS Architecture Blog post "Exponential Backoff
And Jitter": N clients start at the same moment and race for one server; without jitter they
retry in lock-step and collide again and again.
"""

from __future__ import annotations

import dataclasses
import heapq
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import pandas as pd
from typing_extensions import Unpack

from .._core._decision import AttemptState, Failure, decide
from .._core._policy import RetryPlan
from .._core._retry import RetryPolicy
from .._loop._attempt_log import AttemptLog
from ..errors import ProviderError, RateLimited, ServerError
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    FailureAction,
    RetryScheduled,
    RunStarted,
)

ContentionJitter = Literal["full", "equal", "decorrelated"] | float | None
"""The jitter strategies the contention experiment compares (as `RetryPolicy` takes them)."""
Server = Literal["single", "token_bucket"]


class TokenBucket:
    """A bucket of `capacity` tokens, full at first, refilled at `rate` per second: the one
    rate limit every simulated server applies (the contention experiment's, the one a
    recording's 429s are fitted to, and the fitted one answering `what_if`)."""

    def __init__(self, capacity: float, rate: float) -> None:
        self.capacity = capacity
        self.rate = rate
        self.tokens = capacity
        self.last = 0.0

    def take(self, t: float) -> float | None:
        """A request at `t`: None when it gets a token, else the seconds until the next one."""
        self.tokens = min(self.capacity, self.tokens + max(0.0, t - self.last) * self.rate)
        self.last = max(self.last, t)
        if self.tokens >= 1.0 - 1e-9:
            self.tokens -= 1.0
            return None
        return (1.0 - self.tokens) / self.rate


@dataclass
class _Simulated:
    """The events of simulated attempts, as the agent emits them for its own: one model, one
    policy deciding each failure (with `rng` for its jitter), one attempt log."""

    policy: RetryPolicy
    model: str
    rng: random.Random | None = None
    log: AttemptLog = field(default_factory=AttemptLog)

    def run(self, run: str, t: float) -> None:
        self.log(RunStarted(run_id=run, time=t, turn=1, prompt="", model=self.model))

    def decide(
        self, attempt: int, error: ProviderError | None, previous_delay: float | None = None
    ) -> RetryPlan | None:
        """The retry the agent plans after this attempt (None: it got an answer, or gives up)."""
        if error is None:
            return None
        failure = Failure(error, AttemptState(attempt, previous_delay=previous_delay))
        return decide(failure, self.policy, rng=self.rng).plan

    def attempt(
        self,
        run: str,
        t: float,
        attempt: int,
        end: float,
        error: ProviderError | None,
        plan: RetryPlan | None,
    ) -> None:
        """The events the agent emits for an attempt from `t` to `end` that got an answer
        (`error` None) or failed (and was retried after `plan`, when there is one)."""
        labels: dict[str, Any] = {
            "phase": "request",
            "run_id": run,
            "time": t,
            "turn": 1,
            "attempt": attempt,
            "max_attempts": self.policy.max_attempts,
            "model": self.model,
        }
        self.log(AttemptStarted(**labels))
        labels["time"] = end
        if error is None:
            self.log(AttemptSucceeded(**labels))
            return
        said: dict[str, Any] = {
            "error": type(error).__name__,
            "message": error.message,
            "status_code": error.status_code,
        }
        action: FailureAction = "retry" if plan is not None else "fail"
        self.log(AttemptFailed(**labels, **said, retry_after_s=error.retry_after, action=action))
        if plan is not None:  # the retry event carries the plan's numbers
            plan_said = dataclasses.asdict(plan)
            self.log(RetryScheduled(**labels, **said, next_attempt=attempt + 1, **plan_said))


def simulate_retries(
    policy: RetryPolicy,
    fail_rate: float,
    n_runs: int,
    seed: int | None = None,
    *,
    attempt_duration_s: float = 0.2,
    retry_after_s: float | None = None,
    model: str = "simulated",
) -> pd.DataFrame:
    """One client making `n_runs` requests one after another; each attempt fails with
    probability `fail_rate` and is retried as `policy.plan` says.

    Failures are 503s (`ServerError`), or 429s carrying `retry_after_s` when that is given (a
    wish beyond `policy.max_retry_after` makes the failure final, as in the agent). The jitter
    draws come from `random.Random(seed)` in order of the failed attempts (from `policy.rng()`
    when `seed` is None), the failures from a separate stream, so a test can recompute every
    delay. Each run is a `run_id` of its own ("sim-0001", ...), starting where the last ended.

    Args:
        policy: The retry policy under test.
        fail_rate: The chance each attempt fails (0..1).
        n_runs: How many requests, one after another.
        seed: Seeds the jitter draws and the failures; None for the policy's own generator.
        attempt_duration_s: How long each attempt takes, in virtual seconds.
        retry_after_s: When given, failures are 429s carrying this Retry-After (seconds).
        model: The model name on the rows.

    Returns:
        An attempt frame, as `agent.attempts` has it, for `nbagent.analysis`.
    """
    sim = _Simulated(policy, model, random.Random(seed) if seed is not None else policy.rng())
    # failures draw from their own stream, so the jitter stream is `random.Random(seed)` alone
    fails = random.Random(f"nbagent.simulate.failures/{seed}" if seed is not None else None)
    dur = max(0.0, float(attempt_duration_s))
    t = 0.0
    width = max(4, len(str(n_runs)))
    for k in range(1, n_runs + 1):
        run = f"sim-{k:0{width}d}"
        sim.run(run, t)
        attempt = 1
        while True:
            error: ProviderError | None = None
            if fails.random() < fail_rate:  # never below 0, always below 1 (a draw is in [0, 1))
                error = (
                    RateLimited("simulated rate limit", status_code=429, retry_after=retry_after_s)
                    if retry_after_s is not None
                    else ServerError("simulated failure", status_code=503)
                )
            plan = sim.decide(attempt, error)
            sim.attempt(run, t, attempt, t + dur, error, plan)
            t += dur
            if plan is None:
                break
            t += plan.delay_s
            attempt += 1
    return sim.log.frame()


# -- contention ------------------------------------------------------------------------------


def simulate_contention(
    n_clients: int = 20,
    jitter: ContentionJitter = "full",
    server: Server = "single",
    *,
    rate: float = 10.0,
    burst: int = 1,
    seed: int | None = 0,
    policy: RetryPolicy | None = None,
    service_time_s: float = 0.05,
    reject_time_s: float = 0.005,
    start_spread_s: float = 0.0,
    send_retry_after: bool = False,
) -> pd.DataFrame:
    """N clients, one request each, racing for one server, in virtual time.

    `server="single"`: the server handles one request at a time (`service_time_s`); a request
    that arrives while it is busy is rejected at once with a 503. `server="token_bucket"`: any
    number at a time, but each request takes a token from a bucket of `burst` tokens refilled
    at `rate` per second; without a token it gets a 429 (with the time until the next token as
    Retry-After when `send_retry_after`, which then replaces the jitter).

    `jitter` is the strategy under test: "full", "equal", a fraction, None (plain exponential
    backoff), or "decorrelated" (`sleep = min(cap, uniform(base, prev * 3))`, prev starting at
    base; base and cap are the policy's `initial_delay` and `max_delay`). The policy defaults
    to `RetryPolicy(max_attempts=1000, initial_delay=0.1, max_delay=10, seed=seed)`; with a
    policy given, its jitter is replaced by `jitter`. A client that runs out of attempts gives
    up (its last row has action "fail").

    Clients start at `uniform(0, start_spread_s)` (all at 0 by default). Simultaneous arrivals
    are served in client order. One `run_id` per client ("client-001", ...), turn 1.

    Args:
        n_clients: How many clients.
        jitter: The jitter strategy under test (or "decorrelated").
        server: "single" (one request at a time, 503 when busy) or "token_bucket" (429 without a
            token).
        rate: The token bucket's refill, in requests per second.
        burst: The token bucket's size.
        seed: Seeds the jitter draws and the start times.
        policy: The retry policy; None for the one above.
        service_time_s: How long a served request takes, in virtual seconds.
        reject_time_s: How long a rejection takes.
        start_spread_s: Clients start at uniform(0, this).
        send_retry_after: Whether a 429 carries the time until the next token as Retry-After.

    Returns:
        An attempt frame with one `run_id` per client.
    """
    rng = random.Random(seed) if seed is not None else random.Random()
    base = policy or RetryPolicy(
        max_attempts=1000, initial_delay=0.1, max_delay=10.0, multiplier=2.0, seed=seed
    )
    # an infinite Retry-After cap: the token bucket's wish is always honoured
    pol = dataclasses.replace(base, jitter=jitter, max_retry_after=float("inf"))
    sim = _Simulated(pol, f"contention/{server}", rng)
    starts = random.Random(f"nbagent.simulate.starts/{seed}") if seed is not None else rng
    width = max(3, len(str(n_clients)))
    runs = [f"client-{i + 1:0{width}d}" for i in range(n_clients)]

    # (arrival time, client, attempt) on a heap; ties go to the lower client number
    heap: list[tuple[float, int, int]] = []
    previous: list[float | None] = [None] * n_clients  # each client's last wait
    for c in range(n_clients):
        t0 = starts.uniform(0.0, start_spread_s) if start_spread_s > 0 else 0.0
        sim.run(runs[c], t0)
        heapq.heappush(heap, (t0, c, 1))

    busy_until = -1.0
    bucket = TokenBucket(float(max(1, burst)), max(1e-9, float(rate)))
    service = max(0.0, float(service_time_s))
    reject = max(0.0, float(reject_time_s))

    while heap:
        t, c, attempt = heapq.heappop(heap)
        error: ProviderError | None = None
        if server == "single":
            if t >= busy_until:
                busy_until = t + service
            else:
                error = ServerError("server busy", status_code=503)
        else:
            wait = bucket.take(t)
            if wait is not None:
                wish = wait if send_retry_after else None
                error = RateLimited("no token", status_code=429, retry_after=wish)
        end = t + (service if error is None else reject)
        plan = sim.decide(attempt, error, previous[c])
        sim.attempt(runs[c], t, attempt, end, error, plan)
        if plan is not None:
            previous[c] = plan.delay_s
            heapq.heappush(heap, (end + plan.delay_s, c, attempt + 1))
    return sim.log.frame()


class ContentionOptions(TypedDict, total=False):
    """The keywords `compare_jitter` passes on to `simulate_contention` (see it for each)."""

    rate: float
    burst: int
    seed: int | None
    policy: RetryPolicy | None
    service_time_s: float
    reject_time_s: float
    start_spread_s: float
    send_retry_after: bool


def compare_jitter(
    n_clients: int | Sequence[int] = 20,
    strategies: Iterable[ContentionJitter] = (None, "full", "equal", "decorrelated"),
    server: Server = "single",
    **options: Unpack[ContentionOptions],
) -> pd.DataFrame:
    """Run `simulate_contention` for each jitter strategy (and each client count) and
    summarise: `n_clients, jitter, total_calls, failed_calls, calls_per_client,
    max_calls_per_client, makespan_s` (when the last client got through or gave up),
    `total_wait_s`, `gave_up` (clients that ran out of attempts).

    Args:
        n_clients: How many clients; a list for several counts.
        strategies: The jitter strategies to compare.
        server: As for `simulate_contention`.
        **options: As for `simulate_contention`: `rate`, `burst`, `seed` (0 unless given),
            `policy`, `service_time_s`, `reject_time_s`, `start_spread_s`, `send_retry_after`.

    Returns:
        One row per client count and strategy.

    Raises:
        TypeError: A keyword `simulate_contention` does not take (a misspelling, say).
    """
    taken = ContentionOptions.__annotations__
    unknown = sorted(set(options) - set(taken))
    if unknown:  # said now, not only once a strategy runs (none may)
        raise TypeError(
            f"compare_jitter() got an unexpected keyword argument {unknown[0]!r}; "
            f"it passes on {', '.join(taken)}."
        )
    counts = [n_clients] if isinstance(n_clients, int) else list(n_clients)
    rows: list[dict[str, object]] = []
    for n in counts:
        for strategy in strategies:
            df = simulate_contention(n, strategy, server, **options)
            per_client = df.groupby("run_id", observed=True).size()
            last = df.groupby("run_id", observed=True).tail(1)
            rows.append(
                {
                    "n_clients": n,
                    "jitter": "none" if strategy is None else str(strategy),
                    "total_calls": len(df),
                    "failed_calls": int((df["outcome"] == "error").sum()),
                    "calls_per_client": float(per_client.mean()) if len(df) else 0.0,
                    "max_calls_per_client": int(per_client.max()) if len(df) else 0,
                    "makespan_s": float(df["ended_at"].max()) if len(df) else 0.0,
                    "total_wait_s": float(df["delay_s"].sum()),
                    "gave_up": int((last["outcome"] != "ok").sum()),
                }
            )
    out: pd.DataFrame = pd.DataFrame(rows)
    return out
