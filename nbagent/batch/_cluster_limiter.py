"""One rate budget for a whole cluster: a `RateLimiter` in one place, a `Pacer` in each worker.

Four processes that each pace themselves are four clients to the provider: each learns the limit
on its own, each spends the burst, and a 429 one of them meets teaches the others nothing.
`LimiterCore` holds the one `RateLimiter` (and its retry budget) for a provider and key; on Ray it
lives in one actor. Every worker process has one `ClusterPacer`, the attempt loop's `Pacer`,
which talks to it:

- **batched round trips**: a worker has at most one call to the core in flight; slot requests
  and outcomes (success with its rate-limit headers, a 429 with its Retry-After, another error,
  a slot handed back) that arrive meanwhile wait for the next call and go in it together. Agents
  that start together share one call; a busy worker sends a call per round trip, not per request;
- **a slot's epoch**: a 429 anywhere moves the core's epoch on and voids every reservation. A
  worker that slept towards a slot and heard nothing from the core meanwhile asks once more
  before sending, so it does not send into a wait another worker just learned about;
- **a slot that came due late**: agents whose slots fell due while that answer was slow (or
  the worker's event loop busy) would leave together, a burst; a slot more than an interval
  late is dropped and a new one reserved, once (`nbagent._loop._slot_wait.too_late`);
- **a leased retry budget**: `allow_retry` must answer at once, so each worker holds a share of
  the cluster's retry budget (topped up to `LEASE_TOKENS` on every call) and spends from it;
  successes refill the cluster's budget, a finished worker hands its share back;
- **a core that died**: calls fail or hang while Ray restarts it; the workers wait (nothing is
  sent to the provider without a slot) and seed the new core with what the old one had learned
  (rate, capacity, a wait still due), so it paces at once instead of probing from scratch.

Nothing here imports Ray: the core is called through a function, so it runs in-process in tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from .._core._clock import Clock
from .._core._pacing import PaceRequest
from .._loop._limiter import RateLimiter
from .._loop._retry_budget import RetryBudget
from .._loop._slot_wait import sleep_for_slot, too_late
from ..errors import RateLimited, TransportError

LEASE_TOKENS = 40.0
"""The share of the retry budget a worker holds: eight retries, or four after timeouts."""
FRESH_S = 0.01
"""A reply younger than this is news enough: no extra call before sending on a slot."""
LONG_POLL_S = 0.25
"""A held request's ask waits at most this long for news before it is answered anyway."""
RETRY_CALL_S = (0.05, 1.0)
"""While the core does not answer: ask again after this long, doubling up to the second."""

Outcome = tuple[Any, ...]
Report = Callable[[str, list[Outcome]], Any]
"""Send outcomes to the core, without waiting (returns something awaitable, or None)."""
Ask = Callable[
    [str, int, float, "Mapping[str, Any] | None", "int | None"], Awaitable[dict[str, Any]]
]
"""Ask the core for slots: (worker, wants, share held, seed, version seen or None)."""

_drawn: contextvars.ContextVar[float] = contextvars.ContextVar("nbagent_cluster_drawn", default=0.0)


def _aged(o: tuple[Any, ...], sent: float) -> Outcome:
    """An outcome as sent: successes and 429s carry how long ago they happened, so the core
    dates them on its own clock; the others drop their time."""
    if o[0] in ("ok", "limited"):
        return (o[0], max(0.0, sent - o[1]), *o[2:])
    return (o[0], *o[2:])


def rate_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """Only the rate-limit headers travel to the core."""
    return {k.lower(): v for k, v in headers.items() if "ratelimit" in k.lower()}


class LimiterCore:
    """The cluster's one limiter and retry budget (a Ray actor wraps it). See the module doc."""

    def __init__(self, now: Callable[[], float] = time.monotonic) -> None:
        self.limiter = RateLimiter()
        self._now = now
        self.incarnation = uuid.uuid4().hex[:8]
        self.version = 0  # moves on with every outcome applied: what a held request waits for
        self.calls = 0
        self.requests = 0
        self.busy_s = 0.0
        self._news: asyncio.Event | None = None

    def report(self, worker: str, outcomes: list[Outcome]) -> None:
        """Apply a worker's outcomes, oldest first (a held request's `ask` hears of them)."""
        t0 = time.perf_counter()
        now = self._now()
        for o in outcomes:
            self._apply(o, now)
        if outcomes:
            self.version += 1
            if self._news is not None:
                self._news.set()
                self._news = None
        self.calls += 1
        self.busy_s += time.perf_counter() - t0

    def reserve(
        self, worker: str, wants: int, held: float, seed: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Reserve `wants` slots for a worker and top its share of the retry budget up."""
        t0 = time.perf_counter()
        now = self._now()
        lim = self.limiter
        if seed:
            lim.restore(seed, now)
        slots = [lim.reserve(now) for _ in range(wants)]
        grant = lim.budget.lease(max(0.0, LEASE_TOKENS - held))
        self.calls += 1
        self.requests += wants
        reply = {
            "slots": slots,
            "epoch": lim.epoch,
            "version": self.version,
            "grant": grant,
            "incarnation": self.incarnation,
            "learned": lim.snapshot(now),
        }
        self.busy_s += time.perf_counter() - t0
        return reply

    def _apply(self, o: Outcome, now: float) -> None:
        lim, kind = self.limiter, o[0]
        if kind == "ok":
            lim.on_success(now - o[1], o[2])
        elif kind == "limited":
            lim.on_rate_limited(now - o[1], o[2])
        elif kind == "other":
            lim.on_other()
        elif kind == "release":
            lim.release(now, o[1])
        elif kind == "refill":
            lim.budget.refill(o[1])
        elif kind == "retry":
            lim.budget.retries += 1
        elif kind == "refused":
            lim.budget.refused += 1

    def stats(self) -> dict[str, Any]:
        """What it learned and what it cost: µs of its own time per request."""
        return {
            **self.limiter.snapshot(self._now()),
            "incarnation": self.incarnation,
            "calls": self.calls,
            "requests": self.requests,
            "us_per_request": 1e6 * self.busy_s / max(1, self.requests),
        }

    async def ask(
        self,
        worker: str,
        wants: int,
        held: float,
        seed: Mapping[str, Any] | None = None,
        after: int | None = None,
    ) -> dict[str, Any]:
        """`reserve`, as the Ray actor answers it. A request held back while the rate is unknown
        (a probe is out) asks with the version it last saw (`after`); the answer waits until an
        outcome moves the version on (at most `LONG_POLL_S`), so the next probe leaves as soon
        as the last one is answered, not a polling interval later."""
        if after is not None and after == self.version:
            if self._news is None:
                self._news = asyncio.Event()
            # asyncio.wait, which does not raise on timeout: on Python 3.10 `wait_for` raises
            # asyncio.TimeoutError, not yet the built-in TimeoutError, and a long poll that
            # failed instead of answering held every worker back for ever
            news = asyncio.ensure_future(self._news.wait())
            await asyncio.wait({news}, timeout=LONG_POLL_S)
            news.cancel()
        return self.reserve(worker, wants, held, seed)


class ClusterPacer:
    """The attempt loop's `Pacer` in one worker process, shared by all its agents."""

    def __init__(self, report: Report, ask: Ask, worker: str) -> None:
        self._report = report
        self._ask = ask
        self.worker = worker
        # who waits for the next reply: a slot (asked again while held back, or not), or
        # only the reply's epoch (None)
        self._want: list[tuple[asyncio.Future[tuple[float, bool, int]], bool | None]] = []
        self._outcomes: list[tuple[Any, ...]] = []
        self._sending = False
        self._asking: asyncio.Task[None] | None = None
        self._last_report: Any = None
        self._seed_next = False
        self._costs = RetryBudget()
        self.epoch = -1
        self.version = -1
        self.replied_at = -float("inf")
        self.lease = 0.0
        self.learned: dict[str, Any] = {}
        self.incarnation: str | None = None
        self.calls = 0

    def __repr__(self) -> str:
        return f"ClusterPacer(worker={self.worker}, calls={self.calls}, lease={self.lease:g})"

    # -- outcomes: sent at once, one report per turn of the event loop -----------------------

    def _note(self, *outcome: Any) -> None:
        self._outcomes.append((outcome[0], time.monotonic(), *outcome[1:]))
        if not self._sending:
            self._sending = True
            asyncio.get_running_loop().call_soon(self._send)

    def _send(self) -> None:
        self._sending = False
        raw, self._outcomes = self._outcomes, []
        if raw:
            sent = time.monotonic()
            with contextlib.suppress(Exception):  # a core that is gone learns anew
                self._last_report = self._report(self.worker, [_aged(o, sent) for o in raw])

    # -- slots: one ask in flight; what arrives meanwhile goes in the next -------------------

    def _kick(self) -> None:
        if self._asking is None or self._asking.done():
            self._asking = asyncio.get_running_loop().create_task(self._asks())

    async def _asks(self) -> None:
        wait = RETRY_CALL_S[0]
        while self._want or self._seed_next:
            await asyncio.sleep(0)  # agents that start together join this call
            want, self._want = self._want, []
            slots = sum(again is not None for _, again in want)
            held_back = bool(want) and all(again for _, again in want)  # no check among them
            seed = self.learned if self._seed_next and self.learned else None
            try:
                reply = await self._ask(
                    self.worker, slots, self.lease, seed, self.version if held_back else None
                )
            except Exception:  # the core is restarting or unreachable: wait, send nothing
                self._want = want + self._want
                self._seed_next = True
                await asyncio.sleep(wait)
                wait = min(RETRY_CALL_S[1], wait * 2)
                continue
            wait = RETRY_CALL_S[0]
            self._took(reply, seeded=seed is not None)
            if self._seed_next and self.learned:
                # a restarted core that has not been told what the old one knew (Ray retried
                # this call there): its slots may burst; hand them back and tell it first
                for _, slot in reply["slots"]:
                    if slot:
                        self._note("release", self.epoch)
                self._want = want + self._want
                continue
            given = iter(reply["slots"])
            for fut, again in want:
                delay, slot = (0.0, False) if again is None else next(given)
                if fut.done():  # its agent stopped waiting: hand the slot back
                    if slot:
                        self._note("release", self.epoch)
                    continue
                fut.set_result((float(delay), bool(slot), self.epoch))

    def _took(self, reply: Mapping[str, Any], *, seeded: bool) -> None:
        self.calls += 1
        # a new core: tell it what the old one knew (and do not take its word over it)
        new = self.incarnation not in (None, reply["incarnation"]) and not seeded
        self._seed_next = new
        self.incarnation = reply["incarnation"]
        learned = reply["learned"]
        if not new and (learned.get("rate") or learned.get("capacity") or not self.learned):
            self.learned = dict(learned)
        self.epoch = int(reply["epoch"])
        self.version = int(reply["version"])
        self.replied_at = time.monotonic()
        self.lease += float(reply["grant"])

    def _interval(self) -> float | None:
        rate = self.learned.get("rate")
        return 1.0 / rate if rate else None

    async def next_reply(self, again: bool | None) -> tuple[float, bool, int]:
        """(delay, slot, epoch) from the core's next reply: a slot (`again`: asked again while
        held back), or with `again` None no slot, only a reply newer than now and the epoch it
        says (a worker meets the core so before any agent needs a slot: a first call to an
        actor can take seconds on a busy machine)."""
        fut: asyncio.Future[tuple[float, bool, int]] = asyncio.get_running_loop().create_future()
        self._want.append((fut, again))
        self._kick()
        return await fut

    async def close(self) -> None:
        """Hand the retry budget back (the batch is over in this worker)."""
        if self.lease > 0:
            self._note("refill", self.lease)
            self.lease = 0.0
        self._send()
        last, self._last_report = self._last_report, None
        if last is not None and hasattr(last, "__await__"):
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.ensure_future(last), 5.0)

    # -- the Pacer seam ---------------------------------------------------------------------

    def _release(self, now: float, epoch: int) -> None:
        """Hand a slot back to the core (one whose wait was refused or cancelled)."""
        self._note("release", epoch)

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        """Wait for a slot from the cluster's limiter (see `Pacer.acquire`)."""
        held_since: float | None = None
        again = renewed = False
        while True:
            delay, slot, epoch = await self.next_reply(again)
            core = self.incarnation  # a slot is the core's that gave it: a restart voids it
            again = False
            if slot and delay <= 0:
                break
            slept_at = await sleep_for_slot(
                clock,
                ask,
                delay,
                slot,
                epoch,
                renewed=renewed,
                who="cluster-wide",
                release=self._release,
            )
            if slept_at is not None:
                if not slot:
                    continue
                if time.monotonic() - self.replied_at > FRESH_S:
                    await self.next_reply(None)  # a 429 elsewhere may have voided this slot
                if self.epoch == epoch and self.incarnation == core:
                    # slots that came due while this worker was busy, or while the check's
                    # answer was slow, would leave together: a late one is dropped (once)
                    if renewed or not too_late(clock, slept_at, delay, self._interval()):
                        break
                    renewed = True
                continue
            # held back while a probe is out: ask again, answered when the core hears news
            if held_since is None:
                held_since = clock.now()
            again = True
        if held_since is not None:
            ask.on_wait(
                clock.now() - held_since, "held back while another request probes the rate limit"
            )

    def succeeded(self, now: float, headers: Mapping[str, str]) -> None:
        self._note("ok", rate_headers(headers))
        drawn = _drawn.get()
        if drawn:  # the core refills one token per success; the retry's cost comes back here
            _drawn.set(0.0)
            extra = drawn - self._costs.success_refill
            if extra > 0:
                self._note("refill", extra)

    def failed(self, now: float, error: BaseException) -> None:
        if isinstance(error, RateLimited):
            self._note("limited", error.retry_after)
        else:
            self._note("other")

    def allow_retry(self, error: BaseException) -> bool:
        c = self._costs
        cost = c.timeout_cost if isinstance(error, TransportError) else c.retry_cost
        if self.lease < cost:
            self._note("refused")
            return False
        self.lease -= cost
        _drawn.set(cost)
        self._note("retry")
        return True
