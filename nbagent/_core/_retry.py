"""How long to wait before trying again, and whether to try at all.

`RetryPolicy` is a small value: exponential backoff with a cap and jitter, the server's wish
(Retry-After and the rate-limit reset headers) taking precedence, and a cap on how long a server
may ask us to wait. Out-of-range settings are normalised, never rejected, because a teacher
typing `multiplier=0.5` into a notebook should see backoff, not a traceback.

`call` / `acall` apply a policy to any function, outside the agent loop.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from ..errors import (
    Aborted,
    Action,
    ConfigError,
    ProviderError,
    QuotaExceeded,
    RateLimited,
    _provider_label,
    classify,
)
from ._clock import Clock, RealClock

__all__ = [
    "RetryPlan",
    "RetryPolicy",
    "acall",
    "call",
    "format_duration",
]

T = TypeVar("T")
Jitter = Literal["full", "equal"] | float | None
RetryAfterPartial = Literal["always", "reasoning_only", "never"]


@dataclass(frozen=True)
class RetryPlan:
    """One scheduled retry: the wait taken, the policy's own delay, the server's wish."""

    delay_s: float
    policy_delay_s: float
    retry_after_s: float | None


@dataclass(frozen=True)
class RetryPolicy:
    """Retry settings. `max_attempts` counts the first attempt.

    Delay before attempt n+1 is `min(max_delay, initial_delay * multiplier**(n-1))`, jittered:
    "full" uniform 0..d, "equal" d/2 + uniform 0..d/2, a fraction f: d*(1 ± f), None: none.
    """

    max_attempts: int = 4
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: Jitter = "full"
    max_retry_after: float = 60.0
    seed: int | None = None
    retry_after_partial: RetryAfterPartial = "always"
    max_empty_retries: int = 1
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        def put(name: str, value: object) -> None:
            object.__setattr__(self, name, value)

        # Out-of-range numbers are normalised below; a value that is not a number at all is
        # a mistake to point out, not to guess at.
        for name in (
            "max_attempts",
            "initial_delay",
            "max_delay",
            "multiplier",
            "max_retry_after",
            "max_empty_retries",
        ):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool):
                raise ConfigError(
                    f"RetryPolicy {name} must be a number, not {value!r}, "
                    f"e.g. RetryPolicy({name}={getattr(RetryPolicy, name)!r})"
                )
            if name in ("max_attempts", "max_empty_retries") and not math.isfinite(value):
                raise ConfigError(f"RetryPolicy {name} must be a whole number, not {value!r}")
        put("max_attempts", max(1, int(self.max_attempts)))
        if not self.initial_delay > 0:  # also catches NaN
            put("initial_delay", 0.0)
        if not self.max_delay > 0:
            put("max_delay", 30.0)
        if not self.multiplier >= 1:
            put("multiplier", 2.0)
        if not self.max_retry_after >= 0:
            put("max_retry_after", 60.0)
        jitter = self.jitter
        if isinstance(jitter, str):
            if jitter not in ("full", "equal"):
                raise ConfigError(
                    f"unknown jitter {jitter!r}: use 'full', 'equal', a fraction 0..1, or None"
                )
        elif jitter is not None:
            if not isinstance(jitter, (int, float)) or isinstance(jitter, bool):
                raise ConfigError(
                    f"unknown jitter {jitter!r}: use 'full', 'equal', a fraction 0..1, or None"
                )
            f = float(jitter)
            put("jitter", None if not f > 0 else min(f, 1.0))
        if self.retry_after_partial not in ("always", "reasoning_only", "never"):
            raise ConfigError(
                f"unknown retry_after_partial {self.retry_after_partial!r}: "
                "use 'always', 'reasoning_only' or 'never'"
            )
        put("max_empty_retries", max(0, int(self.max_empty_retries)))
        put("_rng", random.Random(self.seed))

    # -- delays ---------------------------------------------------------------------------

    def base_delay(self, attempt: int) -> float:
        """The un-jittered delay before attempt `attempt + 1` (attempt is 1-based)."""
        if self.initial_delay <= 0:
            return 0.0
        n = max(1, attempt)
        try:
            d = self.initial_delay * self.multiplier ** (n - 1)
        except OverflowError:
            d = math.inf
        return min(self.max_delay, d)

    def jittered(self, delay: float, rng: random.Random | None = None) -> float:
        r = rng or self._rng
        j = self.jitter
        if j is None or delay <= 0:
            return delay
        if j == "full":
            return r.uniform(0.0, delay)
        if j == "equal":
            return delay / 2 + r.uniform(0.0, delay / 2)
        f = float(j)
        return delay * (1 + r.uniform(-f, f))

    def envelope(self, attempt: int) -> tuple[float, float, float]:
        """(min, max, expected) of the jittered delay before attempt `attempt + 1`."""
        d = self.base_delay(attempt)
        j = self.jitter
        if j is None:
            return d, d, d
        if j == "full":
            return 0.0, d, d / 2
        if j == "equal":
            return d / 2, d, 0.75 * d
        f = float(j)
        return d * (1 - f), d * (1 + f), d

    def rng(self) -> random.Random:
        """A fresh generator seeded like this policy (each run draws its own sequence)."""
        return random.Random(self.seed) if self.seed is not None else random.Random()

    # -- decisions ------------------------------------------------------------------------

    def escalate(self, error: ProviderError) -> ProviderError:
        """A rate limit whose reset is further away than `max_retry_after` is a final error."""
        if (
            isinstance(error, RateLimited)
            and not isinstance(error, QuotaExceeded)
            and error.retry_after is not None
            and error.retry_after > self.max_retry_after
        ):
            who = _provider_label(error.provider)
            sentence = f"{who} rate limit reached. Resets in {format_duration(error.retry_after)}."
            return QuotaExceeded(
                sentence,
                provider=error.provider,
                status_code=error.status_code,
                code=error.code,
                request_id=error.request_id,
                retry_after=error.retry_after,
                headers=error.headers,
            )
        return error

    def plan(
        self,
        error: BaseException,
        attempt: int,
        *,
        rng: random.Random | None = None,
        time_left: float | None = None,
    ) -> RetryPlan | None:
        """The wait before the next attempt, or None when there is to be no next attempt.

        `attempt` is the 1-based number of the attempt that just failed; `time_left` the seconds
        until the run's deadline (a wait that would end past it is not taken).
        """
        if attempt >= self.max_attempts:
            return None
        policy_delay = self.jittered(self.base_delay(attempt), rng)
        wish = error.retry_after if isinstance(error, ProviderError) else None
        if wish is not None and wish > self.max_retry_after:
            return None
        delay = max(0.0, wish) if wish is not None else policy_delay
        if time_left is not None and delay > time_left:
            return None
        return RetryPlan(delay, policy_delay, wish)


def format_duration(seconds: float) -> str:
    """`6300` -> `1 h 45 min`; `42.5` -> `43 s`; `90` -> `1 min 30 s`."""
    if not math.isfinite(seconds):
        return "an unknown time"
    s = max(0, math.ceil(seconds))
    days, rem = divmod(s, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{days} d {hours} h" if hours else f"{days} d"
    if hours:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    if minutes:
        return f"{minutes} min {secs} s" if secs else f"{minutes} min"
    return f"{secs} s"


# -- a policy around any function ----------------------------------------------------------


def _retryable(
    exc: BaseException, idempotent: bool, should_retry: Callable[[Exception], bool] | None
) -> bool:
    if isinstance(exc, (Aborted, asyncio.CancelledError, KeyboardInterrupt)):
        return False
    if not isinstance(exc, Exception):
        return False
    if not idempotent and not isinstance(exc, RateLimited):
        return False  # only a 429 proves the request was not acted on
    if should_retry is not None:
        return should_retry(exc)
    return classify(exc) is Action.RETRY


async def acall(
    fn: Callable[[], Awaitable[T]],
    policy: RetryPolicy | None = None,
    *,
    should_retry: Callable[[Exception], bool] | None = None,
    idempotent: bool = True,
    clock: Clock | None = None,
    on_retry: Callable[[int, BaseException, RetryPlan], None] | None = None,
) -> T:
    """Await `fn()` under `policy`; cancellation is never retried."""
    pol = policy or RetryPolicy()
    clk = clock or RealClock()
    rng = pol.rng()
    attempt = 1
    while True:
        try:
            return await fn()
        except Exception as exc:
            err = pol.escalate(exc) if isinstance(exc, ProviderError) else exc
            if not _retryable(err, idempotent, should_retry):
                if err is exc:
                    raise
                raise err from exc
            plan = pol.plan(err, attempt, rng=rng)
            if plan is None:
                if err is exc:
                    raise
                raise err from exc
            if on_retry is not None:
                on_retry(attempt, err, plan)
            await clk.sleep(plan.delay_s)
            attempt += 1


def call(
    fn: Callable[[], T],
    policy: RetryPolicy | None = None,
    *,
    should_retry: Callable[[Exception], bool] | None = None,
    idempotent: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    on_retry: Callable[[int, BaseException, RetryPlan], None] | None = None,
) -> T:
    """Call `fn()` under `policy` (the synchronous twin of `acall`)."""
    pol = policy or RetryPolicy()
    rng = pol.rng()
    attempt = 1
    while True:
        try:
            return fn()
        except Exception as exc:
            err = pol.escalate(exc) if isinstance(exc, ProviderError) else exc
            plan = (
                pol.plan(err, attempt, rng=rng)
                if _retryable(err, idempotent, should_retry)
                else None
            )
            if plan is None:
                if err is exc:
                    raise
                raise err from exc
            if on_retry is not None:
                on_retry(attempt, err, plan)
            sleep(plan.delay_s)
            attempt += 1
