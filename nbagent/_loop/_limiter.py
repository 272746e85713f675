"""A client-side rate limiter shared by every agent that uses the same provider and key.

Many agents racing one rate-limited provider turn 429s into a retry storm: they all learn the
limit the hard way, all wait the same Retry-After, and all come back at once. The shared
limiter learns the limit once for everybody and paces requests so few are rejected. It mirrors
the provider's token bucket:

- **capacity and what is left** come from the rate-limit headers of successful replies
  (`anthropic-ratelimit-requests-limit`/`-remaining`, `x-ratelimit-limit-requests`/
  `-remaining-requests`); a `remaining` only ever lowers our estimate, because replies arrive
  out of order and an older one tells of a fuller bucket;
- **the refill rate** is measured from two honest Retry-Afters: a 429 names the moment the bucket
  holds one request again (`D1`); after `k` admissions, the next 429 names `D2`, and
  `(D2 - D1) / k` is one refill interval (`k` of 3 or more spreads the error of the rounded
  Retry-Afters). The requests in between go one at a time, so `k` is exact. OpenAI's
  millisecond `x-ratelimit-reset-requests` gives the rate at once;
- **pacing**: once the rate is known each request reserves its own future slot, so waiters leave
  one interval apart instead of all at once; a 429 after that blocks everyone until its
  Retry-After, slows the rate a little and voids every reservation (the `epoch` moves on), so
  the queue is rebuilt from what the server just said; a slot that came due while the process
  was busy (its event loop blocked) is dropped and taken again at the back of the queue, once,
  so the waiters it held do not all leave together;
- **correcting a rate measured too fast** (Retry-Afters heard late on a busy machine, outcomes
  reported out of order by other processes): 429s while pacing, with `k` admissions between
  the first and the last (`k` of 3 or more) and a bucket that never filled up meanwhile,
  measure the interval again, `(D2 - D1) / k` as above; if that is slower than the pace, the
  pace moves to it (by at most `MAX_STEP` at a time), so a wrong rate costs three or four 429s
  instead of one per 2 % of error;
- **knowing nothing** (no headers, no 429 yet): requests are let through in a slow start, one,
  one more after each success (twice as many per round trip; and twice as many again after
  `probe_timeout` without an answer), so a
  server without limits is barely slowed and a limited one is not flooded.

It also keeps a retry budget, as the AWS SDKs' standard retry mode does: a token bucket that
retries draw from (5 tokens, 10 for a timeout) and successes refill (the retry's cost when the
success followed a retry by the same run, else 1 token), so a provider outage cannot become a
retry storm: once the budget is empty, failures are final until successes refill it.

Times are seconds on the caller's clock (`clock.now()`), so virtual time works. Everything is
thread-safe.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Mapping

from .._core._clock import Clock
from .._core._pacing import PaceRequest
from ..errors import RateLimited, TransportError
from ._rate_headers import request_limits
from ._retry_budget import RetryBudget
from ._slot_wait import sleep_for_slot, too_late

POLL_S = 0.02
"""How often a request held back behind a probe looks again."""
MAX_STEP = 1.5
"""The most one 429 while pacing slows the pace by (a measurement can undercount admissions)."""


class RateLimiter:
    """Paces requests to one provider and key. See the module docstring for how.

    It is the attempt loop's `Pacer` (`acquire`, `succeeded`, `failed`, `allow_retry`). Below
    that: `reserve(now)` says how long to wait; `on_success`, `on_rate_limited` and `on_other`
    report how each request ended; `release` hands back a slot that was never used.

    `Agent(limiter=True)` (the default) shares one per provider, endpoint and key in the
    process; pass your own to share one across agents you choose, or to set its numbers.

    Args:
        margin: Pace this much slower than the measured rate (1.0: exactly at it).
        slowdown: Slow the pace by this factor after each 429 while pacing.
        probe_timeout: Seconds a probe (a request sent while the rate is unknown) may go
            unanswered before the next is let through.
        learn_admissions: How many admissions between two 429s a rate measurement spans (at
            least 1; 3 or more spreads the error of rounded Retry-Afters).
        budget: The retry budget; None for a fresh `RetryBudget()`.

    Attributes:
        margin: The pace's margin over the measured rate.
        slowdown: The factor applied after each 429 while pacing.
        probe_timeout: Seconds a probe may go unanswered.
        learn_admissions: Admissions a measurement spans.
        budget: The retry budget every agent sharing this limiter draws from.
        capacity: The provider's burst (requests), from its headers; None until known.
        interval: Seconds per request once the rate is learned; None until then.
        tokens: Our mirror of the provider's bucket; None while unknown.
        blocked_until: Until when (on the clock) everyone waits after a 429's Retry-After.
        epoch: Moves on at each 429: reservations made before it are void.
        rejected: 429s seen.
        admitted: Successes seen.
        paced: Requests held back to keep the pace.
        succeeded: `on_success`, by the name the `Pacer` seam calls it.
    """

    def __init__(
        self,
        *,
        margin: float = 1.0,
        slowdown: float = 1.02,
        probe_timeout: float = 1.0,
        learn_admissions: int = 3,
        budget: RetryBudget | None = None,
    ) -> None:
        self.margin = margin  # pace this much slower than the measured rate
        self.slowdown = slowdown  # and this much slower again after each 429
        self.probe_timeout = probe_timeout
        self.learn_admissions = max(1, learn_admissions)  # admissions a measurement spans
        self.budget = budget if budget is not None else RetryBudget()
        self._lock = threading.Lock()
        self.capacity: float | None = None  # the provider's burst, from headers
        self.interval: float | None = None  # seconds per request, once learned
        self.tokens: float | None = None  # our mirror of the provider's bucket (None: unknown)
        self._t = 0.0  # when `tokens` was last brought up to date
        self.blocked_until = 0.0
        self.epoch = 0  # moves on at each 429: reservations made before it are void
        self._probes: list[float] = []  # start times of requests sent while the rate is unknown
        self._window = 1.0  # how many of those may be in flight (slow start)
        self._anchor: float | None = None  # D1: the moment a 429 named, to measure the rate
        self._since_anchor = 0  # admissions since that 429
        self._anchor_at = 0.0  # when that 429 happened: admissions older than it do not count
        self._filled = False  # our bucket filled up since the anchor: no measurement from it
        self.rejected = 0
        self.admitted = 0
        self.paced = 0

    def __repr__(self) -> str:
        rate = f"{1 / self.interval:.2f}/s" if self.interval else "unknown"
        cap = "unknown" if self.capacity is None else f"{self.capacity:g}"
        return (
            f"RateLimiter(rate={rate}, capacity={cap}, admitted={self.admitted}, "
            f"rejected={self.rejected}, budget={self.budget.tokens:g}/{self.budget.capacity:g})"
        )

    @property
    def rate(self) -> float | None:
        """Requests per second we pace at, once known."""
        return None if not self.interval else 1.0 / self.interval

    # -- what it learned (the cluster-wide limiter shares it) ------------------------------

    def snapshot(self, now: float) -> dict[str, float | None]:
        """What this limiter has learned, as plain numbers (the cluster-wide limiter shares it).

        Args:
            now: The time, on the clock the limiter is used with.

        Returns:
            "rate" (requests per second it paces at, or None), "capacity", "blocked_s" (how
            long everyone still waits), the counters "admitted", "rejected" and "paced", and
            "budget" (the retry budget's tokens).
        """
        with self._lock:
            return {
                "rate": self.rate,
                "capacity": self.capacity,
                "blocked_s": max(0.0, self.blocked_until - now),
                "admitted": float(self.admitted),
                "rejected": float(self.rejected),
                "paced": float(self.paced),
                "budget": self.budget.tokens,
            }

    def restore(self, learned: Mapping[str, float | None], now: float) -> None:
        """Start from what another limiter learned: rate, capacity and any wait still due.

        A restarted cluster limiter is seeded by its workers this way. The bucket is taken as
        empty, so a restart never bursts; it refills at the learned rate. Nothing changes once
        this limiter has measured the rate itself.

        Args:
            learned: A `snapshot` of another limiter.
            now: The time, on this limiter's clock.
        """
        with self._lock:
            if self.interval is not None:
                return  # it has measured the rate itself meanwhile
            rate, cap = learned.get("rate"), learned.get("capacity")
            if rate:
                # successes it heard of before the seed came (replies to requests sent under
                # the old limiter) taught it no rate; the probes still out took their slots
                self.interval = 1.0 / rate
                self.tokens = min(0.0, self.tokens or 0.0) - len(self._probes)
                self._t = now
                self._probes.clear()
                self._anchor = None
            if cap and self.capacity is None:
                self.capacity = cap
            self.blocked_until = max(self.blocked_until, now + (learned.get("blocked_s") or 0.0))

    # -- asking for a slot ---------------------------------------------------------------

    def _refill(self, now: float) -> None:
        if self.tokens is not None and self.interval:
            cap = self.capacity if self.capacity is not None else 1.0
            if self.tokens < cap:
                self.tokens = min(cap, self.tokens + max(0.0, now - self._t) / self.interval)
            if self.tokens >= cap:
                self._filled = True
        self._t = now

    def reserve(self, now: float) -> tuple[float, bool]:
        """Ask for a slot to send a request in.

        Args:
            now: The time, on the caller's clock.

        Returns:
            `(delay, holds_slot)`. With a slot: wait `delay` seconds, then send (if `epoch`
            has not moved on meanwhile; if it has, ask again). Without one: wait `delay` and
            ask again.
        """
        with self._lock:
            if now < self.blocked_until:
                return self.blocked_until - now, False
            self._refill(now)
            if self.interval is not None and self.tokens is not None:
                # the rate is known: take the next slot, even one in the future
                self.tokens -= 1
                delay = max(0.0, -self.tokens * self.interval)
                if delay > 0:
                    self.paced += 1
                return delay, True
            if self.tokens is not None and self.tokens >= 1 - 1e-9:
                self.tokens -= 1  # the headers said this much is left
                self._probes.append(now)
                return 0.0, True
            # the rate is unknown and nothing is known to be left: probe, a few at a time
            window = 1.0 if self.tokens is not None else self._window
            if self._probes and now - self._probes[0] > self.probe_timeout:
                # a probe with no answer for long: it may have been cancelled, or be a long
                # reply; stop waiting for it
                self._probes.pop(0)
                self._window = min(1e6, self._window * 2)
            if len(self._probes) < window:
                self._probes.append(now)
                return 0.0, True
            return POLL_S, False

    def release(self, now: float, epoch: int | None = None) -> None:
        """Hand back a slot that was reserved but not used (the wait for it was cancelled).

        Args:
            now: The time, on the caller's clock.
            epoch: The `epoch` the slot was reserved in; a slot a 429 voided meanwhile is not
                handed back. None to hand it back regardless.
        """
        with self._lock:
            if epoch is not None and epoch != self.epoch:
                return
            if self.interval is not None and self.tokens is not None:
                # a slot handed back late (a busy worker's report) finds a bucket that may
                # have filled meanwhile: it holds no more than its capacity, or a burst follows
                self._refill(now)
                cap = self.capacity if self.capacity is not None else 1.0
                self.tokens = min(max(cap, self.tokens), self.tokens + 1)
            elif self._probes:
                self._probes.pop()
                if self.tokens is not None:
                    self.tokens += 1

    # -- the Pacer seam ------------------------------------------------------------------

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        """Wait for a slot: the `Pacer` seam the attempt loop calls before every request.

        Short holds behind a probe add up to one announced wait; a reservation that a 429
        voided meanwhile (the epoch moved on) is made again; a cancelled wait hands its slot
        back.

        Args:
            clock: The clock to sleep on (the agent's).
            ask: The run's deadline, the longest wait worth taking, and whom to tell of waits.

        Raises:
            RateLimited: The wait would pass the deadline or `ask.max_wait` (nothing was sent).
        """
        held = 0.0
        renewed = False
        while True:
            epoch = self.epoch
            delay, slot = self.reserve(clock.now())
            if slot and delay <= 0:
                break
            slept_at = await sleep_for_slot(
                clock, ask, delay, slot, epoch, renewed=renewed, who="shared", release=self.release
            )
            if slept_at is not None:
                if slot and self.epoch == epoch:
                    if renewed or not too_late(clock, slept_at, delay, self.interval):
                        break
                    renewed = True  # dropped, not handed back: see `too_late`
                continue
            held += delay
            await clock.sleep(delay)
        if held > 0:
            ask.on_wait(held, "held back while another request probes the rate limit")

    def failed(self, now: float, error: BaseException) -> None:
        """A sent request failed (the `Pacer` seam): a 429 teaches the limit.

        Args:
            now: When it ended.
            error: Why.
        """
        if isinstance(error, RateLimited):
            self.on_rate_limited(now, error.retry_after)
        else:
            self.on_other()

    def allow_retry(self, error: BaseException) -> bool:
        """Take one retry's cost from the retry budget (a transport error costs more).

        Args:
            error: The failure to be retried.

        Returns:
            Whether the budget paid; False makes the failure final.
        """
        return self.budget.withdraw(timeout=isinstance(error, TransportError))

    # -- how it went ---------------------------------------------------------------------

    def on_success(self, now: float, headers: Mapping[str, str] | None = None) -> None:
        """Learn from a success: capacity and what is left from the rate-limit headers
        (OpenAI's reset header gives the rate at once), and refill the retry budget.

        Args:
            now: When it ended.
            headers: Its response headers, or None.
        """
        limit, remaining, reset = request_limits(headers)
        with self._lock:
            self.admitted += 1
            others = max(0, len(self._probes) - 1)
            if self._probes:
                self._probes.pop(0)
            if limit is not None and limit >= 1:
                self.capacity = limit
            if (
                self.interval is None
                and reset is not None
                and limit is not None
                and remaining is not None
                and limit > remaining
                and reset > 0
            ):
                # OpenAI: `reset` (ms precision) until the bucket is full again
                self.interval = reset / (limit - remaining) * self.margin
                self._refill(now)
                self.tokens = min(self.tokens if self.tokens is not None else remaining, remaining)
            if self.interval is None:
                if remaining is not None:
                    left = max(0.0, remaining - others)  # those in flight will take theirs
                    if self.tokens is None or others == 0:
                        self.tokens = left
                    else:
                        self.tokens = min(self.tokens, left)
                    self._t = now
                elif self.tokens is None:
                    self._window = min(1e6, self._window + 1)  # slow start: x2 per round trip
            if self._anchor is not None and now >= self._anchor_at:
                self._since_anchor += 1
        self.budget.refill()

    def on_rate_limited(self, now: float, retry_after: float | None) -> None:
        """Learn from a 429: everyone waits until its Retry-After, reservations are voided, and
        two honest Retry-Afters measure the refill rate.

        Args:
            now: When it came.
            retry_after: The server's wish in seconds, or None (then the pace only slows).
        """
        with self._lock:
            self.rejected += 1
            alone = len(self._probes) <= 1
            if self._probes:
                self._probes.pop(0)
            self.epoch += 1
            if retry_after is None or not retry_after >= 0:
                # no word on when: the retry policy's backoff decides; we only slow down
                if self.interval is not None:
                    self.interval *= self.slowdown
                elif self.tokens is None or self.tokens > 0:
                    self.tokens = 0.0
                self._anchor = None
                return
            due = now + retry_after
            self.blocked_until = max(self.blocked_until, due)
            if self.interval is None:
                if not alone:
                    self._anchor = None  # others in flight: admissions cannot be counted
                elif self._anchor is None:
                    self._start_measuring(now, due)  # D1
                elif self._since_anchor >= self.learn_admissions:
                    measured = (due - self._anchor) / self._since_anchor
                    if measured > 0:
                        self.interval = measured * self.margin
                    self._anchor = None
            else:
                self._slow_down(now, due)
            # paced: the provider's bucket holds one request at `due`, not before; reservations
            # made before this are void (the epoch moved on) and will be made again
            self._t = now
            self.tokens = 0.0 if self.interval is None else 1.0 - retry_after / self.interval

    def _start_measuring(self, now: float, due: float) -> None:
        self._anchor, self._anchor_at, self._since_anchor, self._filled = due, now, 0, False

    def _slow_down(self, now: float, due: float) -> None:
        """A 429 while pacing: we were too fast. Slow down a little, or to what the admissions
        since the last such 429 measure, when that is slower (see the module docstring)."""
        assert self.interval is not None
        slower = self.interval * self.slowdown
        k = self._since_anchor
        if self._anchor is None or self._filled:
            self._start_measuring(now, due)
        elif k >= self.learn_admissions:
            measured = (due - self._anchor) / k * self.margin
            slower = min(max(slower, measured), self.interval * MAX_STEP)
            self._start_measuring(now, due)
        # else: too few admissions yet; the measurement goes on over the next 429s
        self.interval = slower

    succeeded = on_success  # a request went through: the `Pacer` seam's name for it

    def on_other(self) -> None:
        """An attempt ended without telling us about the limit (an error other than 429)."""
        with self._lock:
            if self._probes:
                self._probes.pop(0)
            self._anchor = None


_registry: dict[tuple[str, ...], RateLimiter] = {}
# limiters of other clocks (virtual time) live and die with their clock: a new clock that
# happens to get a dead one's id() must not inherit its limiter
_by_clock: weakref.WeakKeyDictionary[object, dict[tuple[str, ...], RateLimiter]] = (
    weakref.WeakKeyDictionary()
)
_registry_lock = threading.Lock()


def limiter_key(provider: object) -> tuple[str, ...]:
    """Provider, endpoint and a fingerprint of the key (never the key itself): the provider's
    `rate_key` when it has one (every HTTP provider does), else its name."""
    key = getattr(provider, "rate_key", None)
    if isinstance(key, tuple) and all(isinstance(k, str) for k in key):
        return key
    return (str(getattr(provider, "name", type(provider).__name__)), "", "")


def shared_limiter(provider: object, clock: object) -> RateLimiter:
    """The process-wide limiter for this provider, key and clock.

    Agents on the real clock share one per provider, endpoint and key; agents on another clock
    (a `VirtualClock`) share one only with agents on the same clock object.
    """
    key = limiter_key(provider)
    with _registry_lock:
        if type(clock).__name__ == "RealClock":
            table = _registry
        else:
            try:
                table = _by_clock.setdefault(clock, {})
            except TypeError:  # a clock that cannot be weakly referenced: no sharing
                return RateLimiter()
        lim = table.get(key)
        if lim is None:
            lim = table[key] = RateLimiter()
        return lim


def reset_shared_limiters() -> None:
    """Forget every shared limiter (for tests and benchmarks: a fresh start)."""
    with _registry_lock:
        _registry.clear()
        _by_clock.clear()
