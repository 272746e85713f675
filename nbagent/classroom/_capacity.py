"""The room's shared capacity: one token bucket for every request of every student.

It is the mock's own `RateLimit` (the same 429s and rate-limit headers a real provider sends),
rebuilt when the teacher sets a new capacity; a refusal is a 429 with Retry-After or, when the
room is set to overload instead, a 529 with none (what Anthropic sends when it is busy).
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from typing import Literal

from ..mock import RateDecision, RateLimit

__all__ = ["Capacity", "Refusal", "check_capacity"]

Refusal = Literal["429", "529"]


def check_capacity(rps: object) -> float:
    """A capacity in requests per second, or ValueError with a sentence."""
    if isinstance(rps, bool) or not isinstance(rps, (int, float)):
        raise ValueError(f"capacity must be a number of requests per second, got {rps!r}.")
    value = float(rps)
    if not (math.isfinite(value) and 0 < value <= 100_000):
        raise ValueError(f"capacity must be between 0 and 100000 requests per second, got {rps!r}.")
    return value


class Capacity:
    """Requests per second for the whole room; past it, `refusal` (429 or 529).

    Args:
        rps: Requests per second (also the burst: a full second's worth at once).
        refusal: "429" (rate limited, with Retry-After) or "529" (overloaded).
        now: The monotonic clock.
    """

    def __init__(
        self,
        rps: float,
        *,
        refusal: Refusal = "429",
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        if refusal not in ("429", "529"):
            raise ValueError(f"refusal must be '429' or '529', got {refusal!r}.")
        self.refusal: Refusal = refusal
        self._now = now
        self._lock = threading.Lock()
        self.rps = check_capacity(rps)
        self._bucket = self._make(self.rps)

    def _make(self, rps: float) -> RateLimit:
        return RateLimit(requests_per_s=rps, burst=max(1, round(rps)), now=self._now)

    def set(self, rps: float) -> None:
        """Take a new capacity from now on (a full bucket)."""
        value = check_capacity(rps)
        with self._lock:
            self.rps = value
            self._bucket = self._make(value)

    def admit(self, rps: float | None = None) -> RateDecision:
        """Take one request from the bucket, at `rps` when a scenario tightens it."""
        with self._lock:
            if rps is not None and rps != self._bucket.requests_per_s:
                self._bucket = self._make(rps)
            elif rps is None and self._bucket.requests_per_s != self.rps:
                self._bucket = self._make(self.rps)
            bucket = self._bucket
        return bucket.acquire()
