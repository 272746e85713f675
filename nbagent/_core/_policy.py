"""A retry policy's values and the waits they give: `Policy`, the base of `RetryPolicy`.

Exponential backoff with a cap and a jitter strategy; the server's wish (Retry-After and the
rate-limit reset headers, parsed by the providers into `error.retry_after`) replaces the computed
delay and is never jittered; a wish beyond `max_retry_after` makes the error final. Whether to
retry at all is `nbagent.errors.classify`'s table, applied by `_decision.decide`; the policy only
says how long.

Out-of-range settings are normalised, never rejected, because a teacher typing
`multiplier=0.5` into a notebook should see backoff, not a traceback; but never silently: each
replacement is announced by one `UserWarning` naming the argument, the value given and the value
used. A value that is not a number at all is a mistake to point out (`ConfigError`).

`decide` and the attempt loop take a `Policy`; `RetryPolicy` (`_retry`) adds running any
function under it through that loop, which is why the two are apart: the loop needs the policy,
and `RetryPolicy.call` the loop.
"""

from __future__ import annotations

import math
import random
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ConfigError, ProviderError, QuotaExceeded, RateLimited
from . import _jitter as jitters
from ._numbers import is_number, is_whole

JitterSpec = Literal["full", "equal", "decorrelated"] | float | jitters.Jitter | None
"""A jitter strategy or its shorthand (`RetryPolicy(jitter=...)`): "full" (`FullJitter`),
"equal" (`EqualJitter`), "decorrelated" (`DecorrelatedJitter`), a fraction 0..1
(`ProportionalJitter`), None (`NoJitter`), or any `Jitter` object."""
RetryAfterPartial = Literal["always", "reasoning_only", "never"]
"""Whether a request whose reply had begun to stream may be retried (`RetryPolicy`)."""

_SHORTHAND: dict[str | None, jitters.Jitter] = {
    None: jitters.NoJitter(),
    "full": jitters.FullJitter(),
    "equal": jitters.EqualJitter(),
    "decorrelated": jitters.DecorrelatedJitter(),
}
# each number setting: the value used for a given one (itself when in range; a NaN is out of
# every range), and why a value out of range is replaced
_RANGES: dict[str, tuple[Callable[[Any], float], str]] = {
    "max_attempts": (lambda v: max(1, int(v)), "at least one attempt"),
    "initial_delay": (lambda v: v if v > 0 else 0.0, "no wait before a retry"),
    "max_delay": (lambda v: v if v > 0 else 30.0, "the default cap"),
    "multiplier": (lambda v: v if v >= 1 else 2.0, "backoff must grow"),
    "max_retry_after": (lambda v: v if v >= 0 else 60.0, "the default cap on a server's wish"),
    "max_empty_retries": (lambda v: max(0, int(v)), "a whole number, >= 0"),
}
_JITTER_HINT = "use 'full', 'equal', 'decorrelated', a fraction 0..1, None, or a Jitter object"


@dataclass(frozen=True)
class RetryPlan:
    """One scheduled retry (what `RetryPolicy.plan` returns and `on_retry` is told).

    Attributes:
        delay_s: The wait to take, in seconds: the server's wish when it gave one, else the
            policy's delay.
        policy_delay_s: What the backoff with jitter alone said, in seconds.
        retry_after_s: The server's wish in seconds, or None.
    """

    delay_s: float
    policy_delay_s: float
    retry_after_s: float | None


@dataclass(frozen=True)
class Policy:
    """The values of a retry policy (`RetryPolicy`'s, which documents them) and the waits they
    give: what `decide` and the attempt loop ask of a policy."""

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
        for name in _RANGES:
            value = getattr(self, name)
            if not is_number(value):
                raise ConfigError(
                    f"RetryPolicy {name} must be a number, not {value!r}, "
                    f"e.g. RetryPolicy({name}={getattr(Policy, name)!r})"
                )
            if name in ("max_attempts", "max_empty_retries") and not math.isfinite(value):
                raise ConfigError(f"RetryPolicy {name} must be a whole number, not {value!r}")
        for name, (used, why) in _RANGES.items():
            self._normalise(name, used(getattr(self, name)), why)
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
        if isinstance(j, jitters.Jitter):
            return j
        if not is_number(j):
            strategy = _SHORTHAND.get(j) if j is None or isinstance(j, str) else None
            if strategy is None:
                raise ConfigError(f"unknown jitter {j!r}: {_JITTER_HINT}")
            return strategy
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
