"""Jitter strategies: how a computed backoff is spread so that clients do not retry in step.

Each strategy is a small value with two methods: `apply` draws one delay, `envelope` says the
range (and the mean) `apply` can draw from, which the backoff plots draw as a band. A
`RetryPolicy` takes a strategy or its shorthand: "full", "equal", "decorrelated", a fraction
0..1 (proportional), or None (no jitter). See the AWS Architecture Blog post "Exponential
Backoff And Jitter" for why "full" is the default: spread widest, fewest collisions.

A strategy of one's own needs only the two methods of `Jitter`.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

INF = float("inf")


@dataclass(frozen=True)
class Span:
    """What a strategy may use besides the computed delay.

    Attributes:
        floor: The policy's `initial_delay`, in seconds.
        cap: The policy's `max_delay`, in seconds.
        previous: The wait taken before the attempt that failed; None before the first retry.
        attempt: The number of the attempt that failed, counting from 1.
    """

    floor: float = 0.0
    cap: float = INF
    previous: float | None = None
    attempt: int = 1


ANY_SPAN = Span()


@runtime_checkable
class Jitter(Protocol):
    """A jitter strategy: turns the backoff's delay into the one waited.

    Give your own to `RetryPolicy(jitter=...)`: any object with these two methods. `envelope`
    lets plots and the playground draw its range.
    """

    def apply(self, delay: float, rng: random.Random, span: Span = ANY_SPAN) -> float:
        """One jittered delay.

        Args:
            delay: The backoff's own (un-jittered) delay, in seconds.
            rng: The generator to draw from (the policy's, seeded by `seed`), so runs repeat.
            span: The policy's floor and cap, the previous wait and the attempt number, for a
                strategy that needs more than the delay (decorrelated jitter).

        Returns:
            The delay to wait, in seconds.
        """
        ...

    def envelope(self, delay: float, span: Span = ANY_SPAN) -> tuple[float, float, float]:
        """The range `apply` draws from for this `delay`.

        Args:
            delay: The backoff's own delay, in seconds.
            span: As for `apply`.

        Returns:
            `(min, max, mean)` of what `apply` can return, in seconds.
        """
        ...


class _Spread:
    """A strategy that spreads the computed delay alone: a subclass gives `_draw` (one delay)
    and `_bounds` (their range), both of the delay only."""

    def _draw(self, delay: float, rng: random.Random) -> float:
        raise NotImplementedError

    def _bounds(self, delay: float) -> tuple[float, float, float]:
        raise NotImplementedError

    def apply(self, delay: float, rng: random.Random, span: Span = ANY_SPAN) -> float:
        """One jittered delay, spread around the computed one (see the class).

        Args:
            delay: The backoff's own delay, in seconds.
            rng: The generator to draw from (the policy's, seeded by `seed`), so runs repeat.
            span: Not used: the spread depends on the delay alone.

        Returns:
            The delay to wait, in seconds (0 or less is returned as it is).
        """
        return self._draw(delay, rng) if delay > 0 else delay

    def envelope(self, delay: float, span: Span = ANY_SPAN) -> tuple[float, float, float]:
        """The range `apply` draws from for this `delay`.

        Args:
            delay: The backoff's own delay, in seconds.
            span: Not used.

        Returns:
            `(min, max, mean)` of what `apply` can return, in seconds.
        """
        return self._bounds(delay)


@dataclass(frozen=True)
class NoJitter(_Spread):
    """The backoff as computed: clients that failed together retry together (min, max and
    mean are the delay)."""

    def _draw(self, delay: float, rng: random.Random) -> float:
        return delay

    def _bounds(self, delay: float) -> tuple[float, float, float]:
        return delay, delay, delay

    def __str__(self) -> str:
        return "none"


@dataclass(frozen=True)
class FullJitter(_Spread):
    """Uniform between 0 and the delay (mean half of it)."""

    def _draw(self, delay: float, rng: random.Random) -> float:
        return rng.uniform(0.0, delay)

    def _bounds(self, delay: float) -> tuple[float, float, float]:
        return 0.0, delay, delay / 2

    def __str__(self) -> str:
        return "full"


@dataclass(frozen=True)
class EqualJitter(_Spread):
    """Half the delay, plus uniform up to the other half: never shorter than half (mean three
    quarters of the delay)."""

    def _draw(self, delay: float, rng: random.Random) -> float:
        return delay / 2 + rng.uniform(0.0, delay / 2)

    def _bounds(self, delay: float) -> tuple[float, float, float]:
        return delay / 2, delay, 0.75 * delay

    def __str__(self) -> str:
        return "equal"


@dataclass(frozen=True)
class ProportionalJitter(_Spread):
    """The delay times (1 ± fraction), uniform: a light spread around the computed value (mean
    the delay).

    `RetryPolicy(jitter=0.2)` is shorthand for `ProportionalJitter(0.2)`.

    Attributes:
        fraction: How far either way, as a share of the delay (0..1).
    """

    fraction: float

    def _draw(self, delay: float, rng: random.Random) -> float:
        return delay * (1 + rng.uniform(-self.fraction, self.fraction))

    def _bounds(self, delay: float) -> tuple[float, float, float]:
        return delay * (1 - self.fraction), delay * (1 + self.fraction), delay

    def __str__(self) -> str:
        return f"{self.fraction:g}"


@dataclass(frozen=True)
class DecorrelatedJitter:
    """`min(cap, uniform(floor, previous * 3))`, previous starting at the floor: each wait
    grows from the last one drawn rather than from the attempt number (the computed
    exponential delay is not used)."""

    def apply(self, delay: float, rng: random.Random, span: Span = ANY_SPAN) -> float:
        """One wait, grown from the previous one.

        Args:
            delay: Not used: the wait depends on the previous wait, not the attempt number.
            rng: The generator to draw from.
            span: The policy's floor and cap and the previous wait.

        Returns:
            The delay to wait, in seconds.
        """
        last = span.floor if span.previous is None else max(span.floor, span.previous)
        return min(span.cap, rng.uniform(span.floor, max(span.floor, last * 3)))

    def envelope(self, delay: float, span: Span = ANY_SPAN) -> tuple[float, float, float]:
        """The widest range the wait before `span.attempt + 1` can fall in.

        Args:
            delay: Not used.
            span: The policy's floor and cap and the attempt number.

        Returns:
            `(min, max, mean)` in seconds: from the floor to the floor times 3 per attempt,
            capped.
        """
        high = min(span.cap, span.floor * 3 ** max(1, span.attempt))
        return span.floor, high, (span.floor + high) / 2

    def __str__(self) -> str:
        return "decorrelated"
