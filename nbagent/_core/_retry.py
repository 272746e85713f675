"""How long to wait before trying again: `RetryPolicy`, a small value.

Exponential backoff with a cap and a jitter strategy; the server's wish (Retry-After and the
rate-limit reset headers, parsed by the providers into `error.retry_after`) replaces the computed
delay and is never jittered; a wish beyond `max_retry_after` makes the error final. Whether to
retry at all is `nbagent.errors.classify`'s table, applied by `_decision.decide`; the policy only
says how long.

Out-of-range settings are normalised, never rejected, because a teacher typing
`multiplier=0.5` into a notebook should see backoff, not a traceback; but never silently: each
replacement is announced by one `UserWarning` naming the argument, the value given and the value
used. A value that is not a number at all is a mistake to point out (`ConfigError`).

`policy.call(fn)` / `await policy.acall(fn)` apply the policy to any function, through the same
attempt loop the agent uses.
"""

from __future__ import annotations

import math
import random
import time
import warnings
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Literal, TypeVar

from ..errors import ConfigError, ProviderError, QuotaExceeded, RateLimited
from . import _jitter as jitters
from ._clock import Clock, RealClock

__all__ = ["JitterSpec", "RetryPlan", "RetryPolicy", "format_duration"]

T = TypeVar("T")
JitterSpec = Literal["full", "equal", "decorrelated"] | float | jitters.Jitter | None
"""A jitter strategy or its shorthand: "full", "equal", "decorrelated", a fraction, None."""
RetryAfterPartial = Literal["always", "reasoning_only", "never"]
OnRetry = Callable[[int, BaseException, "RetryPlan"], None]

_SHORTHAND: dict[str, jitters.Jitter] = {
    "full": jitters.FullJitter(),
    "equal": jitters.EqualJitter(),
    "decorrelated": jitters.DecorrelatedJitter(),
}
_JITTER_HINT = "use 'full', 'equal', 'decorrelated', a fraction 0..1, None, or a Jitter object"


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
    "full" uniform 0..d, "equal" d/2 + uniform 0..d/2, a fraction f: d*(1 ± f), None: none,
    "decorrelated" min(max_delay, uniform(initial_delay, previous * 3)).
    `retry_after_partial`: may a request be retried after part of its reply streamed?
    `max_empty_retries`: how often an empty reply is retried (DESIGN: at most once).
    """

    max_attempts: int = 4
    initial_delay: float = 0.5
    max_delay: float = 30.0
    multiplier: float = 2.0
    jitter: JitterSpec = "full"
    max_retry_after: float = 60.0
    seed: int | None = None
    retry_after_partial: RetryAfterPartial = "always"
    max_empty_retries: int = 1
    _strategy: jitters.Jitter = field(init=False, repr=False, compare=False)
    _rng: random.Random = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
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
        self._normalise("max_attempts", max(1, int(self.max_attempts)), "at least one attempt")
        if not self.initial_delay > 0:  # also catches NaN
            self._normalise("initial_delay", 0.0, "no wait before a retry")
        if not self.max_delay > 0:
            self._normalise("max_delay", 30.0, "the default cap")
        if not self.multiplier >= 1:
            self._normalise("multiplier", 2.0, "backoff must grow")
        if not self.max_retry_after >= 0:
            self._normalise("max_retry_after", 60.0, "the default cap on a server's wish")
        self._normalise(
            "max_empty_retries", max(0, int(self.max_empty_retries)), "a whole number, >= 0"
        )
        object.__setattr__(self, "_strategy", self._jitter_strategy())
        object.__setattr__(self, "_rng", random.Random(self.seed))
        if self.retry_after_partial not in ("always", "reasoning_only", "never"):
            raise ConfigError(
                f"unknown retry_after_partial {self.retry_after_partial!r}: "
                "use 'always', 'reasoning_only' or 'never'"
            )
        if self.seed is not None and (
            not isinstance(self.seed, int) or isinstance(self.seed, bool)
        ):
            raise ConfigError(f"RetryPolicy seed must be a whole number or None, not {self.seed!r}")

    def _normalise(self, name: str, used: object, why: str, *, depth: int = 0) -> None:
        given = getattr(self, name)
        object.__setattr__(self, name, used)
        if given == used:  # 4.0 -> 4 is the same number: nothing to announce
            return
        warnings.warn(
            f"RetryPolicy {name}={given!r} is out of range; using {name}={used!r} ({why})",
            UserWarning,
            stacklevel=4 + depth,  # the caller of RetryPolicy(...), past __init__
        )

    def _jitter_strategy(self) -> jitters.Jitter:
        j = self.jitter
        if j is None:
            return jitters.NoJitter()
        if isinstance(j, str):
            strategy = _SHORTHAND.get(j)
            if strategy is None:
                raise ConfigError(f"unknown jitter {j!r}: {_JITTER_HINT}")
            return strategy
        if isinstance(j, bool) or not isinstance(j, (int, float)):
            if isinstance(j, jitters.Jitter):
                return j
            raise ConfigError(f"unknown jitter {j!r}: {_JITTER_HINT}")
        f = float(j)
        if f == 0:
            object.__setattr__(self, "jitter", None)  # a spread of 0 is no jitter
            return jitters.NoJitter()
        if not f > 0:
            self._normalise("jitter", None, "a negative fraction means no jitter", depth=1)
            return jitters.NoJitter()
        if f > 1:
            self._normalise("jitter", 1.0, "a fraction is at most 1", depth=1)
            f = 1.0
        return jitters.ProportionalJitter(f)

    @property
    def strategy(self) -> jitters.Jitter:
        """The jitter strategy object (`jitter` may be its shorthand)."""
        return self._strategy

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

    def jittered(
        self, delay: float, rng: random.Random | None = None, *, previous: float | None = None
    ) -> float:
        span = jitters.Span(self.initial_delay, self.max_delay, previous)
        return self._strategy.apply(delay, rng or self._rng, span)

    def envelope(self, attempt: int) -> tuple[float, float, float]:
        """(min, max, expected) of the jittered delay before attempt `attempt + 1`."""
        span = jitters.Span(self.initial_delay, self.max_delay, attempt=attempt)
        return self._strategy.envelope(self.base_delay(attempt), span)

    def rng(self) -> random.Random:
        """A fresh generator seeded like this policy."""
        return random.Random(self.seed) if self.seed is not None else random.Random()

    # -- what a failure's wait is ---------------------------------------------------------

    def escalate(self, error: ProviderError) -> ProviderError:
        """A rate limit whose reset is further away than `max_retry_after` is a final error."""
        if (
            isinstance(error, RateLimited)
            and not isinstance(error, QuotaExceeded)
            and error.retry_after is not None
            and error.retry_after > self.max_retry_after
        ):
            sentence = (
                f"{error.provider_label} rate limit reached. "
                f"Resets in {format_duration(error.retry_after)}."
            )
            return error.recast(QuotaExceeded, sentence)
        return error

    def plan(
        self,
        error: BaseException,
        attempt: int,
        *,
        rng: random.Random | None = None,
        time_left: float | None = None,
        previous: float | None = None,
    ) -> RetryPlan | None:
        """The wait before the next attempt, or None when there is to be no next attempt.

        `attempt` is the 1-based number of the attempt that just failed; `time_left` the seconds
        until the run's deadline (a wait that would end past it is not taken); `previous` the
        wait taken before that attempt (for decorrelated jitter).
        """
        if attempt >= self.max_attempts:
            return None
        policy_delay = self.jittered(self.base_delay(attempt), rng, previous=previous)
        wish = error.retry_after if isinstance(error, ProviderError) else None
        if wish is not None and wish > self.max_retry_after:
            return None
        delay = max(0.0, wish) if wish is not None else policy_delay
        if time_left is not None and delay > time_left:
            return None
        return RetryPlan(delay, policy_delay, wish)

    # -- the policy around any function ---------------------------------------------------

    def call(
        self,
        fn: Callable[[], T],
        *,
        should_retry: Callable[[Exception], bool] | None = None,
        idempotent: bool = True,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: OnRetry | None = None,
    ) -> T:
        """Call `fn()` under this policy: retried as `classify` says (or `should_retry`).

        `idempotent=False`: only a 429 is retried (it proves the request was not acted on).
        `on_retry(attempt, error, plan)` is told before each wait. Cancellation, `Aborted` and
        KeyboardInterrupt are never retried.
        """
        from ._attempts import AttemptLoop, generic_table

        loop = AttemptLoop(self, table=generic_table(idempotent, should_retry), on_retry=on_retry)
        return loop.run_sync(lambda _n: fn(), sleep)

    async def acall(
        self,
        fn: Callable[[], Awaitable[T]],
        *,
        should_retry: Callable[[Exception], bool] | None = None,
        idempotent: bool = True,
        clock: Clock | None = None,
        on_retry: OnRetry | None = None,
    ) -> T:
        """Await `fn()` under this policy (the asynchronous twin of `call`); waits go through
        `clock` (a `VirtualClock` runs them in no time)."""
        from ._attempts import AttemptLoop, generic_table

        loop = AttemptLoop(
            self,
            clock=clock or RealClock(),
            table=generic_table(idempotent, should_retry),
            on_retry=on_retry,
        )
        return await loop.run(lambda _n: fn())


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
