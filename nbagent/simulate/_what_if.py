"""What another retry policy would have done against the server a recording shows.

`what_if` runs the recorded workload against the `ServerModel` of the recording in virtual time,
with the agent's own decision (`decide`) under the new policy, and lays the recorded attempts
beside it: two attempt frames with the columns of `agent.attempts`, and one table comparing
them. The model's limits are in `_server_model`'s docstring (and the README).
"""

from __future__ import annotations

import dataclasses
import heapq
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass

import pandas as pd

from .._core._numbers import is_whole
from .._core._policy import RetryPlan
from .._core._retry import RetryPolicy
from ..errors import ConfigError, ProviderError, RateLimited
from ..recording import Recording
from ._backoff import TokenBucket, _Simulated
from ._server_model import ServerModel, by_request, server_model


@dataclass
class WhatIf:
    """The answer of `what_if`.

    `attempts`: the new policy's attempts (every client), `recorded`: the recorded ones, both
    with the columns of `agent.attempts`; `comparison`: one row each ("recorded", "what if")
    with `policy, clients, requests, makespan_s, attempts, rejected, waiting_s, succeeded,
    outcome`; `server`: the model that answered. `attempts, comparison = what_if(...)` unpacks.

    Attributes:
        attempts: The new policy's attempts.
        recorded: The recorded attempts.
        comparison: One row each for "recorded" and "what if".
        server: The server model that answered.
        policy: The policy that was tried.
    """

    attempts: pd.DataFrame
    recorded: pd.DataFrame
    comparison: pd.DataFrame
    server: ServerModel
    policy: RetryPolicy

    def __iter__(self) -> Iterator[pd.DataFrame]:
        return iter((self.attempts, self.comparison))

    def _repr_html_(self) -> str:
        return self.comparison.to_html()

    def __repr__(self) -> str:
        return f"WhatIf({self.server.source}, {len(self.attempts)} attempts)\n{self.comparison}"


def _recorded_frame(model: ServerModel) -> pd.DataFrame:
    requests = by_request(model.answers)
    # as many attempts as the most one recorded request got
    sim = _Simulated(RetryPolicy(max_attempts=max(len(mine) for mine in requests)), model.model)
    for n, mine in enumerate(requests):
        run = f"recorded-{n + 1:03d}"
        sim.run(run, mine[0].at)
        for k, a in enumerate(mine, start=1):
            end = a.at + a.duration_s
            plan = None
            if a.error is not None and k < len(mine):  # the recorded retry
                delay = max(0.0, mine[k].at - end)
                plan = RetryPlan(delay, delay, a.error.retry_after)
            sim.attempt(run, a.at, k, end, a.error, plan)
    return sim.log.frame()


def _simulate(
    model: ServerModel, policy: RetryPolicy, clients: int, rng: random.Random
) -> pd.DataFrame:
    sim = _Simulated(policy, model.model, rng)
    fitted = model.bucket
    bucket = TokenBucket(fitted.capacity, fitted.rate) if fitted is not None else None
    width = max(2, len(str(clients)))
    # (time, client, request, attempt, previous delay)
    heap: list[tuple[float, int, int, int, float | None]] = []
    for c in range(clients):
        heapq.heappush(heap, (model.requests[0].gap_s, c, 0, 1, None))
    successes = 0
    quota = model.quota
    while heap:
        t, c, n, attempt, previous = heapq.heappop(heap)
        run = f"client-{c + 1:0{width}d}/{n + 1:03d}"
        if attempt == 1:
            sim.run(run, t)
        error: ProviderError | None
        spent = quota is not None and successes >= quota.after_successes
        wait = bucket.take(t) if bucket is not None and not spent else None
        if spent and quota is not None:
            error, duration = quota.answer.error, quota.answer.duration_s
        elif wait is not None and fitted is not None:
            wish = fitted.wish(wait)
            error = RateLimited(
                "rate limit (the recording's bucket)",
                provider=model.provider,
                status_code=429,
                retry_after=wish,
            )
            duration = fitted.reject_duration_s
        else:
            held = model.held(t)  # a success takes as long as the recorded request's did
            if held is not None and held.error is not None:
                error, duration = held.error, held.duration_s
            else:
                error, duration = None, model.requests[n].ok_duration_s
        end = t + duration
        if error is None:
            successes += 1
        plan = sim.decide(attempt, error, previous)
        sim.attempt(run, t, attempt, end, error, plan)
        if plan is not None:
            heapq.heappush(heap, (end + plan.delay_s, c, n, attempt + 1, plan.delay_s))
        elif n + 1 < len(model.requests):  # the next request
            heapq.heappush(heap, (end + model.requests[n + 1].gap_s, c, n + 1, 1, None))
    return sim.log.frame()


def _row(label: str, policy: str, clients: int, df: pd.DataFrame) -> dict[str, object]:
    req = df[df["phase"] == "request"]
    last = req.groupby("run_id", observed=True).tail(1)
    ok = int((last["outcome"] == "ok").sum())
    total = len(last)
    failed = last[last["outcome"] != "ok"]
    kinds = sorted({str(k) for k in failed["error_kind"].dropna()})
    outcome = (
        f"all {total} ok"
        if ok == total
        else f"{ok} of {total} ok; {total - ok} failed ({', '.join(kinds) or 'error'})"
    )
    span = float(req["ended_at"].max() - req["started_at"].min()) if len(req) else 0.0
    return {
        "behaviour": label,
        "policy": policy,
        "clients": clients,
        "requests": total,
        "makespan_s": span,
        "attempts": len(req),
        "rejected": int((req["outcome"] == "error").sum()),
        "waiting_s": float(req["delay_s"].fillna(0.0).sum()),
        "succeeded": ok,
        "outcome": outcome,
    }


def _describe(policy: RetryPolicy) -> str:
    return (
        f"max_attempts={policy.max_attempts}, initial_delay={policy.initial_delay:g}, "
        f"max_delay={policy.max_delay:g}, jitter={policy.jitter!r}, "
        f"max_retry_after={policy.max_retry_after:g}"
    )


def what_if(
    recording_or_attempts: Recording | str | os.PathLike[str] | pd.DataFrame,
    policy: RetryPolicy | None = None,
    clients: int = 1,
    *,
    seed: int | None = 0,
) -> WhatIf:
    """Replay what the server did (its answers over time, its Retry-Afters, its rate limit as
    the recording shows it) against `policy`, in virtual time, for `clients` copies of the
    recorded workload starting together; compare with what was recorded.

    `recording_or_attempts`: a `Recording`, a recording's path, or an attempt frame
    (`agent.attempts`, `read_attempts(...)`). The jitter draws come from `random.Random(seed)`
    (`seed=None`: the policy's own). Raises `ConfigError` for a source with no requests or a
    file that is not a recording. The model and its limits: `nbagent.simulate._server_model`.

    Args:
        recording_or_attempts: A `Recording`, a recording's path, or an attempt frame.
        policy: The retry policy to try; None for `RetryPolicy()`.
        clients: How many copies of the recorded workload start together.
        seed: Seeds the jitter draws; None for the policy's own.

    Returns:
        The new attempts, the recorded ones, a comparison table, the server model and the policy.

    Raises:
        ConfigError: A source with no requests, or a file that is not a recording.
    """
    if policy is None:
        policy = RetryPolicy()
    if not isinstance(policy, RetryPolicy):
        raise ConfigError("policy= takes a RetryPolicy(...), e.g. RetryPolicy(max_attempts=6).")
    if not is_whole(clients) or clients < 1:
        raise ConfigError(f"clients must be a whole number of at least 1, not {clients!r}.")
    model = server_model(recording_or_attempts)
    rng = random.Random(seed) if seed is not None else policy.rng()
    attempts = _simulate(model, policy, clients, rng)
    recorded = _recorded_frame(model)
    table = pd.DataFrame(
        [
            _row("recorded", "as recorded", 1, recorded),
            _row("what if", _describe(policy), clients, attempts),
        ]
    ).set_index("behaviour")
    return WhatIf(attempts, recorded, table, model, dataclasses.replace(policy))
