"""A client-side rate limiter shared by every agent that uses the same provider and key.

Many agents racing one rate-limited provider turn 429s into a retry storm: they all learn the
limit the hard way, all wait the same Retry-After, and all come back at once. The shared
limiter learns the limit once for everybody and paces requests so few are rejected:

- it mirrors the provider's token bucket: its capacity comes from the rate-limit headers
  (`anthropic-ratelimit-requests-limit`, `x-ratelimit-limit-requests`) and `remaining`; its
  refill rate is measured from an honest Retry-After (a request released at the moment the
  server named, then a probe right after it: the probe's Retry-After plus the gap between the
  two is one refill interval);
- until the rate is known, at most one request probes beyond what the headers said remains;
- each request reserves its own slot, so waiters leave one by one instead of all at once;
- a 429 blocks everyone until its Retry-After and slows the learned rate a little.

It also keeps a retry budget, as the AWS SDKs' standard retry mode does: a token bucket that
retries draw from and successes refill, so a provider outage cannot become a retry storm.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["RateLimiter", "RetryBudget", "limiter_key", "shared_limiter"]

_POLL = 0.02  # how often a request held back behind a probe looks again


@dataclass
class RetryBudget:
    """Retries cost tokens; successes give some back. Empty means: stop retrying."""

    capacity: float = 500.0
    retry_cost: float = 5.0
    timeout_cost: float = 10.0
    success_refill: float = 1.0

    def __post_init__(self) -> None:
        self.tokens = self.capacity
        self._lock = threading.Lock()

    def withdraw(self, *, timeout: bool = False) -> bool:
        cost = self.timeout_cost if timeout else self.retry_cost
        with self._lock:
            if self.tokens < cost:
                return False
            self.tokens -= cost
            return True

    def refill(self, amount: float | None = None) -> None:
        with self._lock:
            self.tokens = min(self.capacity, self.tokens + (amount or self.success_refill))


def _first_int(headers: Mapping[str, str], *names: str) -> int | None:
    for n in names:
        v = headers.get(n)
        if v is not None:
            try:
                return int(float(v))
            except ValueError:
                continue
    return None


class RateLimiter:
    """Paces requests to one provider+key. Times are seconds on the caller's clock."""

    def __init__(self, *, margin: float = 1.03, budget: RetryBudget | None = None) -> None:
        self.margin = margin
        self.budget = budget or RetryBudget()
        self._lock = threading.Lock()
        self.capacity: float | None = None  # the provider's burst, from headers
        self.interval: float | None = None  # seconds per request, once learned
        self.tokens: float | None = None  # our mirror of the provider's bucket
        self._t: float = 0.0  # when `tokens` was last brought up to date
        self.blocked_until = 0.0
        self._probe = False  # a request beyond what we know is in flight
        self._exact_admit: float | None = None  # a release at the server's named moment
        self._due: float | None = None  # the moment the last 429 named
        self.rejected = 0
        self.admitted = 0

    def __repr__(self) -> str:
        rate = f"{1 / self.interval:.2f}/s" if self.interval else "unknown"
        return f"RateLimiter(rate={rate}, capacity={self.capacity}, rejected={self.rejected})"

    def _refill(self, now: float) -> None:
        if self.tokens is None:
            return
        if self.interval:
            cap = self.capacity if self.capacity is not None else 1.0
            self.tokens = min(cap, self.tokens + (now - self._t) / self.interval)
        self._t = now

    def reserve(self, now: float) -> tuple[float, bool]:
        """(delay, holds_slot). With a slot, wait `delay` and send; without one (blocked by a
        429, or behind a probe), wait `delay` and ask again."""
        with self._lock:
            if now < self.blocked_until:
                return self.blocked_until - now, False
            self._refill(now)
            if self.tokens is not None and self.tokens >= 1 - 1e-9:
                self.tokens -= 1
                return 0.0, True
            if self.interval is not None and self.tokens is not None:
                # reserve the next refill: waiters line up one interval apart
                self.tokens -= 1
                return max(0.0, -self.tokens * self.interval), True
            if self._probe:
                return _POLL, False
            self._probe = True
            return 0.0, True

    def on_success(self, now: float, headers: Mapping[str, str] | None = None) -> None:
        h = {k.lower(): v for k, v in (headers or {}).items()}
        limit = _first_int(h, "anthropic-ratelimit-requests-limit", "x-ratelimit-limit-requests")
        remaining = _first_int(
            h, "anthropic-ratelimit-requests-remaining", "x-ratelimit-remaining-requests"
        )
        with self._lock:
            self.admitted += 1
            self._probe = False
            if limit is not None and limit > 0:
                self.capacity = float(limit)
            if self.interval is None and remaining is not None:
                self.tokens = float(remaining)
                self._t = now
            if self._due is not None and abs(now - self._due) < 0.5:
                self._exact_admit = now
            self._due = None
        self.budget.refill()

    def on_rate_limited(self, now: float, retry_after: float | None) -> None:
        with self._lock:
            self.rejected += 1
            self._probe = False
            if retry_after is None or not retry_after >= 0:
                # no word on when: the retry policy's backoff decides, we only slow down
                if self.interval is not None:
                    self.interval *= 1.05
                return
            wait = retry_after
            if self.interval is None and self._exact_admit is not None:
                # the last admission left the bucket empty; this probe says when one refills
                self.interval = (wait + (now - self._exact_admit)) * self.margin
                self._exact_admit = None
            elif self.interval is not None:
                self.interval *= 1.05  # we were too fast: slow down a little
            self.blocked_until = max(self.blocked_until, now + wait)
            self._due = now + wait
            if self.interval is not None:
                # the provider's bucket holds one request at now + wait, not before
                self._refill(now)
                empty = 1 - wait / self.interval
                self.tokens = empty if self.tokens is None else min(self.tokens, empty)

    def on_other(self) -> None:
        """An attempt ended without telling us about the limit (an error other than 429)."""
        with self._lock:
            self._probe = False


_registry: dict[tuple[str, ...], RateLimiter] = {}
_registry_lock = threading.Lock()


def limiter_key(provider: object, clock: object) -> tuple[str, ...]:
    """Provider, endpoint and a fingerprint of the key (never the key itself), per clock kind."""
    name = str(getattr(provider, "name", type(provider).__name__))
    base = str(getattr(provider, "base_url", ""))
    secret = getattr(provider, "_api_key", None) or ""
    fp = hashlib.sha256(str(secret).encode()).hexdigest()[:12] if secret else ""
    clock_id = "real" if type(clock).__name__ == "RealClock" else f"clock-{id(clock)}"
    return (name, base, fp, clock_id)


def shared_limiter(provider: object, clock: object) -> RateLimiter:
    """The process-wide limiter for this provider, key and clock."""
    key = limiter_key(provider, clock)
    with _registry_lock:
        lim = _registry.get(key)
        if lim is None:
            lim = _registry[key] = RateLimiter()
        return lim
