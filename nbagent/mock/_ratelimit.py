"""A token-bucket rate limiter for the mock server, and the rate-limit headers of both formats."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

_EPSILON = 1e-9


@dataclass(frozen=True)
class RateDecision:
    """The limiter's answer for one request.

    ``retry_after_s`` is the time until the request would be admitted (0 when allowed).
    ``*_reset_s`` is the time until the bucket is full again when allowed, or until the request
    would be admitted when refused (so a client that waits for the reset succeeds).

    Attributes:
        allowed: Whether the request is admitted.
        retry_after_s: Seconds until it would be admitted (0 when allowed).
        requests_limit: The request bucket's size.
        requests_remaining: Requests left in it.
        requests_reset_s: Seconds until it is full again (or until admission, when refused).
        tokens_limit: The token bucket's size, or None without one.
        tokens_remaining: Tokens left in it, or None.
        tokens_reset_s: Seconds until it is full again, or None.
    """

    allowed: bool
    retry_after_s: float
    requests_limit: int
    requests_remaining: int
    requests_reset_s: float
    tokens_limit: int | None = None
    tokens_remaining: int | None = None
    tokens_reset_s: float | None = None


class RateLimit:
    """Token bucket: ``burst`` requests at once, refilled at ``requests_per_s``.

    With ``tokens_per_min``, a second bucket holds prompt tokens (capacity ``tokens_per_min``,
    refilled continuously); a request needs both. A request larger than the whole token bucket is
    admitted when the bucket is full and leaves it in debt. ``now`` is a monotonic clock in seconds,
    injectable for tests. Thread-safe.

    Args:
        requests_per_s: The request bucket's refill, per second.
        burst: The request bucket's size.
        tokens_per_min: The token bucket's size and refill per minute; None for no token limit.
        now: The monotonic clock, in seconds.

    Raises:
        ValueError: A rate or size is not positive.

    Attributes:
        requests_per_s: The request bucket's refill.
        burst: The request bucket's size.
        tokens_per_min: The token bucket's size, or None.
    """

    def __init__(
        self,
        requests_per_s: float = 10.0,
        burst: int = 5,
        tokens_per_min: int | None = None,
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if not (requests_per_s > 0 and math.isfinite(requests_per_s)):
            raise ValueError(f"RateLimit requests_per_s must be positive, got {requests_per_s!r}.")
        if burst < 1:
            raise ValueError(f"RateLimit burst must be at least 1, got {burst!r}.")
        if tokens_per_min is not None and tokens_per_min < 1:
            raise ValueError(f"RateLimit tokens_per_min must be positive, got {tokens_per_min!r}.")
        self.requests_per_s = float(requests_per_s)
        self.burst = int(burst)
        self.tokens_per_min = tokens_per_min
        self._now = now
        self._lock = threading.Lock()
        self._requests = _Bucket(float(burst), self.requests_per_s)
        self._tokens = (
            None if tokens_per_min is None else _Bucket(tokens_per_min, tokens_per_min / 60)
        )
        self._last = now()

    def __repr__(self) -> str:
        return (
            f"RateLimit(requests_per_s={self.requests_per_s:g}, burst={self.burst}, "
            f"tokens_per_min={self.tokens_per_min})"
        )

    def acquire(self, tokens: int = 0) -> RateDecision:
        """Take one request (and ``tokens`` prompt tokens) from the buckets if they are there.

        Args:
            tokens: The request's prompt tokens (estimated).

        Returns:
            Whether it is admitted, and the numbers the rate-limit headers carry.
        """
        with self._lock:
            now = self._now()
            elapsed, self._last = max(0.0, now - self._last), now
            wanted = [(self._requests, 1.0)]
            if self._tokens is not None:
                wanted.append((self._tokens, float(tokens)))
            for bucket, _ in wanted:
                bucket.level = min(bucket.size, bucket.level + elapsed * bucket.rate)
            wait = max(bucket.wait(needed) for bucket, needed in wanted)
            allowed = wait == 0.0
            if allowed:
                for bucket, needed in wanted:
                    bucket.level -= needed  # a request larger than the token bucket leaves a debt
            limit, remaining, reset = self._requests.state(allowed, wait)
            token_state = (
                (None, None, None) if self._tokens is None else self._tokens.state(allowed, wait)
            )
            return RateDecision(
                allowed, wait, limit, remaining if allowed else 0, reset, *token_state
            )


@dataclass
class _Bucket:
    """One token bucket: ``size`` at most, refilled at ``rate`` a second, full at first."""

    size: float
    rate: float
    level: float = field(init=False)

    def __post_init__(self) -> None:
        self.level = self.size

    def wait(self, needed: float) -> float:
        """Seconds until ``needed`` (at most the whole bucket) is in it: 0 when it is."""
        needed = min(needed, self.size)
        return 0.0 if self.level >= needed - _EPSILON else (needed - self.level) / self.rate

    def state(self, allowed: bool, wait: float) -> tuple[int, int, float]:
        """Its size, what is left in it, and the seconds until it is full again (refused:
        until admission, so a client that waits for the reset succeeds)."""
        reset = (self.size - self.level) / self.rate if allowed else wait
        return int(self.size), max(0, math.floor(self.level + _EPSILON)), max(0.0, reset)


def ceil_ms(seconds: float) -> int:
    """Whole milliseconds, rounded up (a tiny tolerance absorbs float noise)."""
    return max(0, math.ceil(seconds * 1000.0 - 1e-6))


def format_seconds(seconds: float) -> str:
    """Seconds for ``retry-after``, rounded up to the millisecond: ``2``, ``0.1``, ``1.25``."""
    ms = ceil_ms(seconds)
    whole, frac = divmod(ms, 1000)
    return str(whole) if frac == 0 else f"{whole}.{frac:03d}".rstrip("0")


def format_duration(seconds: float) -> str:
    """OpenAI's reset durations: ``120ms``, ``1s``, ``1.5s``, ``6m0s``, ``1h2m3s``."""
    ms = ceil_ms(seconds)
    if ms < 1000:
        return f"{ms}ms"
    hours, rest = divmod(ms, 3_600_000)
    minutes, rest = divmod(rest, 60_000)
    secs = format_seconds(rest / 1000.0)
    if hours:
        return f"{hours}h{minutes}m{secs}s"
    if minutes:
        return f"{minutes}m{secs}s"
    return f"{secs}s"


def rfc3339(seconds: float, timespec: str = "microseconds", nanos: bool = False) -> str:
    """A moment as an RFC 3339 UTC timestamp, Z-normalized, to ``timespec`` (``nanos``: with
    nanoseconds, as Google writes it)."""
    moment = datetime.fromtimestamp(seconds, tz=timezone.utc).isoformat(timespec=timespec)
    return moment.replace("+00:00", "000Z" if nanos else "Z")


def rfc3339_after(seconds: float, *, wall: Callable[[], float] = time.time) -> str:
    """The wall-clock time ``seconds`` from now, rounded up to the whole second, in RFC 3339."""
    return rfc3339(math.ceil(wall() + max(0.0, seconds)), "seconds")


def _bucket_headers(
    decision: RateDecision, name: Callable[[str, str], str], reset: Callable[[float], str]
) -> dict[str, str]:
    """The limit, remaining and reset headers of each bucket (requests; tokens when limited),
    named by `name(field, bucket)`, the reset written by `reset(seconds)`."""
    d = decision
    buckets: list[tuple[str, int, int | None, float]] = [
        ("requests", d.requests_limit, d.requests_remaining, d.requests_reset_s)
    ]
    if d.tokens_limit is not None:
        buckets.append(("tokens", d.tokens_limit, d.tokens_remaining, d.tokens_reset_s or 0.0))
    headers: dict[str, str] = {}
    for bucket, limit, remaining, reset_s in buckets:
        headers[name("limit", bucket)] = str(limit)
        headers[name("remaining", bucket)] = str(remaining)
        headers[name("reset", bucket)] = reset(reset_s)
    return headers


def anthropic_headers(decision: RateDecision) -> dict[str, str]:
    """`anthropic-ratelimit-{requests,input-tokens}-{limit,remaining,reset}`, RFC 3339 resets."""

    def name(field: str, bucket: str) -> str:
        return f"anthropic-ratelimit-{'input-tokens' if bucket == 'tokens' else bucket}-{field}"

    return _bucket_headers(decision, name, rfc3339_after)


def openai_headers(decision: RateDecision) -> dict[str, str]:
    """`x-ratelimit-{limit,remaining,reset}-{requests,tokens}`, resets as durations ("6m0s")."""
    return _bucket_headers(
        decision, lambda field, bucket: f"x-ratelimit-{field}-{bucket}", format_duration
    )
