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
from ._attempts import AttemptLoop, generic_table
from ._clock import Clock, RealClock
from ._decision import OnRetry, RetryPlan
from ._numbers import is_number, is_whole

__all__ = ["JitterSpec", "RetryPlan", "RetryPolicy", "format_duration"]

T = TypeVar("T")
JitterSpec = Literal["full", "equal", "decorrelated"] | float | jitters.Jitter | None
"""A jitter strategy or its shorthand (`RetryPolicy(jitter=...)`): "full" (`FullJitter`),
"equal" (`EqualJitter`), "decorrelated" (`DecorrelatedJitter`), a fraction 0..1
(`ProportionalJitter`), None (`NoJitter`), or any `Jitter` object."""
RetryAfterPartial = Literal["always", "reasoning_only", "never"]
"""Whether a request whose reply had begun to stream may be retried (`RetryPolicy`)."""

_SHORTHAND: dict[str, jitters.Jitter] = {
    "full": jitters.FullJitter(),
    "equal": jitters.EqualJitter(),
    "decorrelated": jitters.DecorrelatedJitter(),
}
_JITTER_HINT = "use 'full', 'equal', 'decorrelated', a fraction 0..1, None, or a Jitter object"


@dataclass(frozen=True)
class RetryPolicy:
    """How often to try and how long to wait between tries: a small frozen value.

    The delay before attempt n+1 is `min(max_delay, initial_delay * multiplier**(n-1))`, then
    jittered: "full" uniform 0..d, "equal" d/2 + uniform 0..d/2, a fraction f d·(1 ± f), None
    none, "decorrelated" `min(max_delay, uniform(initial_delay, previous * 3))`. A server's wish
    (Retry-After and the rate-limit reset headers) replaces the computed delay and is never
    jittered. Whether to retry at all is `classify`'s table; the policy only says how long.

    Out-of-range numbers are replaced, never rejected (a teacher typing `multiplier=0.5` should
    see backoff, not a traceback), and each replacement is announced by one `UserWarning`
    naming the argument, the value given and the value used.

    Attributes:
        max_attempts: Attempts in all, the first one included (below 1: 1).
        initial_delay: The first backoff delay, in seconds (0 or less: no wait at all).
        max_delay: The cap on a computed delay, in seconds (0 or less: 30).
        multiplier: How much each delay grows over the last (below 1: 2).
        jitter: The jitter strategy or its shorthand ("full" by default, the widest spread
            and so the fewest collisions); a fraction above 1 is read as 1, below 0 as None.
        max_retry_after: The longest server wish worth waiting for, in seconds: a longer one
            makes the error final (a rate limit becomes `QuotaExceeded`, saying when it
            resets).
        seed: Seeds the jitter, so a run's waits repeat exactly; None for fresh randomness.
        retry_after_partial: Whether a request whose reply had begun to stream may be retried:
            "always" (the default; the partial reply is discarded), "reasoning_only" (only
            when nothing but reasoning had streamed), "never".
        max_empty_retries: How often an empty reply is retried (a model that answers nothing
            twice will likely do it again).

    Raises:
        ConfigError: A setting is not a number at all, `jitter` or `retry_after_partial` is
            not one of the values above, or `seed` is not a whole number.
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
            if not is_number(value):
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
        if self.seed is not None and not is_whole(self.seed):
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
        if not is_number(j):
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
        """The un-jittered delay before attempt `attempt + 1`.

        Args:
            attempt: The attempt that failed, counting from 1.

        Returns:
            `min(max_delay, initial_delay * multiplier**(attempt-1))` in seconds; 0 when
            `initial_delay` is 0.
        """
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
        """A delay, spread by the policy's jitter strategy.

        Args:
            delay: The un-jittered delay, in seconds (`base_delay`).
            rng: The generator to draw from; None for the policy's own (seeded by `seed`).
            previous: The wait taken before, for decorrelated jitter; None before the first.

        Returns:
            The delay to wait, in seconds.
        """
        span = jitters.Span(self.initial_delay, self.max_delay, previous)
        return self._strategy.apply(delay, rng or self._rng, span)

    def envelope(self, attempt: int) -> tuple[float, float, float]:
        """The range of the jittered delay before attempt `attempt + 1` (the plots' band).

        Args:
            attempt: The attempt that failed, counting from 1.

        Returns:
            `(min, max, expected)` in seconds.
        """
        span = jitters.Span(self.initial_delay, self.max_delay, attempt=attempt)
        return self._strategy.envelope(self.base_delay(attempt), span)

    def rng(self) -> random.Random:
        """A fresh generator seeded like this policy (each agent draws from its own).

        Returns:
            `random.Random(seed)`, or an unseeded one when `seed` is None.
        """
        return random.Random(self.seed) if self.seed is not None else random.Random()

    # -- what a failure's wait is ---------------------------------------------------------

    def escalate(self, error: ProviderError) -> ProviderError:
        """Read a rate limit whose reset is further away than `max_retry_after` as final.

        Args:
            error: The provider's error.

        Returns:
            A `QuotaExceeded` saying when the limit resets ("Anthropic rate limit reached.
            Resets in 1 h 45 min."), or `error` itself when it is not such a rate limit.
        """
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

        It does not ask whether the error is worth retrying (that is `classify`'s); only when
        and whether the policy allows it.

        Args:
            error: The failure; its `retry_after` (a `ProviderError`'s) replaces the delay.
            attempt: The attempt that just failed, counting from 1.
            rng: The generator for the jitter; None for the policy's own.
            time_left: Seconds until the run's deadline: a wait that would end past it is not
                taken. None for no deadline.
            previous: The wait taken before that attempt (for decorrelated jitter).

        Returns:
            The plan, or None when the attempts are spent, the server's wish is beyond
            `max_retry_after`, or the wait would pass the deadline.
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
        """Call `fn()` under this policy, through the attempt loop the agent uses.

        Cancellation, `Aborted` and KeyboardInterrupt are never retried.

        Args:
            fn: The function to call, with no arguments (wrap yours in a lambda).
            should_retry: Says whether an error is worth retrying; None for `classify`'s
                table (rate limits, overloads, 5xx, transport errors and broken streams).
            idempotent: False for a call that must not happen twice: only a 429 is retried
                then, since it proves the request was not acted on.
            sleep: What waits between attempts (`time.sleep`; a test passes a recorder).
            on_retry: Told `(attempt, error, plan)` before each wait.

        Returns:
            What `fn()` returned, on the first attempt that did not raise.

        Raises:
            Exception: The last attempt's error when no attempt succeeded, or the first error
                not worth retrying; a rate limit beyond `max_retry_after` as `QuotaExceeded`.
        """
        table = generic_table(should_retry)
        loop = AttemptLoop(self, table=table, on_retry=on_retry, idempotent=idempotent)
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
        """Await `fn()` under this policy: the asynchronous twin of `call`.

        Args:
            fn: An async function to await, with no arguments.
            should_retry: Says whether an error is worth retrying; None for `classify`'s table.
            idempotent: False for a call that must not happen twice (only a 429 is retried).
            clock: What waits go through; None for real time (a `VirtualClock` runs them in
                no time).
            on_retry: Told `(attempt, error, plan)` before each wait.

        Returns:
            What `fn()` gave, on the first attempt that did not raise.

        Raises:
            Exception: As for `call`.
        """
        loop = AttemptLoop(
            self,
            clock=clock or RealClock(),
            table=generic_table(should_retry),
            on_retry=on_retry,
            idempotent=idempotent,
        )
        return await loop.run(lambda _n: fn())


def format_duration(seconds: float) -> str:
    """A duration as people read it: `6300` -> `1 h 45 min`; `42.5` -> `43 s`.

    Args:
        seconds: The duration; rounded up to whole seconds.

    Returns:
        Days and hours, hours and minutes, minutes and seconds, or seconds; "an unknown time"
        for an infinite or NaN duration.
    """
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
