"""`RetryPolicy`: how often to try and how long to wait, around any function too.

The values and the waits they give are `_policy.Policy`'s; `policy.call(fn)` /
`await policy.acall(fn)` apply the policy to any function, through the same attempt loop the
agent uses.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from ._attempts import AttemptLoop, generic_table
from ._clock import Clock, RealClock
from ._decision import OnRetry
from ._policy import Policy

T = TypeVar("T")


@dataclass(frozen=True)  # else only its fields are frozen, and a misspelt one is set silently
class RetryPolicy(Policy):
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
