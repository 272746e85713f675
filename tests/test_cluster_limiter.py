"""The cluster-wide limiter without Ray: `LimiterCore` on an injected clock, `ClusterPacer`s
talking to it in-process, as the Ray actor and its workers do."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from clock_support import drive, until

from nbagent import RateLimited, RealClock, VirtualClock
from nbagent._core._pacing import PaceRequest
from nbagent._loop._slot_wait import LATE_NOTE
from nbagent.batch._cluster_limiter import (
    LEASE_TOKENS,
    LONG_POLL_S,
    ClusterPacer,
    LimiterCore,
)
from nbagent.errors import ServerError
from nbagent.mock import RateLimit


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_a_429_one_worker_saw_holds_every_worker_back() -> None:
    clock = Clock()
    core = LimiterCore(now=clock)
    first = core.reserve("a", 1, 0.0)
    assert first["slots"] == [(0.0, True)]
    core.report("a", [("limited", 0.0, 2.0)])  # worker a met a 429: wait 2 s
    ((delay, slot),) = core.reserve("b", 1, 0.0)["slots"]
    assert not slot and delay == pytest.approx(2.0)
    clock.t += 2.0
    ((delay, slot),) = core.reserve("b", 1, 0.0)["slots"]
    assert slot and delay == 0.0


def test_a_429_reported_late_is_dated_when_it_happened() -> None:
    clock = Clock()
    core = LimiterCore(now=clock)
    core.reserve("a", 1, 0.0)
    core.report("a", [("limited", 0.5, 2.0)])  # it happened 0.5 s before the report arrived
    ((delay, slot),) = core.reserve("b", 1, 0.0)["slots"]
    assert not slot and delay == pytest.approx(1.5)


def test_workers_hold_shares_of_one_retry_budget_and_give_them_back() -> None:
    core = LimiterCore(now=Clock())
    budget = core.limiter.budget
    full = budget.tokens
    assert core.reserve("a", 0, 0.0)["grant"] == LEASE_TOKENS
    assert core.reserve("b", 0, 0.0)["grant"] == LEASE_TOKENS
    assert budget.tokens == full - 2 * LEASE_TOKENS
    assert core.reserve("a", 0, LEASE_TOKENS - 5)["grant"] == 5  # topped up, not doubled
    core.report("a", [("refill", LEASE_TOKENS)])  # a worker that finished hands it back
    assert budget.tokens == full - LEASE_TOKENS - 5  # b's share is b's; a's retry stays spent


def test_a_restarted_core_seeded_with_what_was_learned_paces_at_once_without_a_burst() -> None:
    clock = Clock()
    old = LimiterCore(now=clock)
    old.limiter.interval, old.limiter.capacity, old.limiter.tokens = 0.05, 10.0, 10.0
    learned = old.limiter.snapshot(clock())
    new = LimiterCore(now=clock)
    slots = new.reserve("a", 3, 0.0, seed=learned)["slots"]
    assert [round(d, 3) for d, _ in slots] == [0.05, 0.1, 0.15]  # one interval apart
    assert all(slot for _, slot in slots)
    assert new.stats()["rate"] == pytest.approx(20.0)


def test_a_restarted_core_that_heard_replies_first_still_takes_the_seeded_rate() -> None:
    clock = Clock()
    new = LimiterCore(now=clock)
    # replies to requests the old core let through reach the new one before any seed does
    new.report("a", [("ok", 0.0, {"anthropic-ratelimit-requests-limit": "10"})])
    assert new.reserve("a", 1, 0.0)["slots"] == [(0.0, True)]  # a probe: the rate is unknown
    seed = {"rate": 20.0, "capacity": 10.0, "blocked_s": 0.0}
    slots = new.reserve("b", 2, 0.0, seed=seed)["slots"]
    # the probe still out holds a slot: the next two leave one and two intervals after it
    assert [round(d, 3) for d, _ in slots] == [0.1, 0.15]
    assert new.stats()["rate"] == pytest.approx(20.0)


def test_a_success_reported_after_a_429_but_older_than_it_does_not_count() -> None:
    clock = Clock()
    core = LimiterCore(now=clock)
    lim = core.limiter
    core.reserve("a", 1, 0.0)
    core.report("a", [("limited", 0.0, 0.2)])  # D1 = 100.2
    # worker b's reply came back 0.3 s before that 429 (admitted before the bucket was empty)
    core.report("b", [("ok", 0.3, {})])
    clock.t += 0.2
    for _ in range(3):  # three admissions, one at a time, 0.1 s apart
        core.reserve("a", 1, 0.0)
        core.report("a", [("ok", 0.0, {})])
        clock.t += 0.1
    core.reserve("a", 1, 0.0)
    core.report("a", [("limited", 0.0, 0.1)])  # D2 = 100.6
    # three admissions refilled (100.6 - 100.2) s: 0.133 s each, not 0.1 (which counting the
    # old reply would measure, 25 % too fast)
    assert lim.interval == pytest.approx(0.4 / 3)


class Link:
    """The pacer's two channels to an in-process core; `down` makes asks fail (restarting)."""

    def __init__(self, core: LimiterCore) -> None:
        self.core, self.down, self.asks, self.seeds = core, 0, 0, []  # type: ignore[var-annotated]

    def report(self, worker: str, outcomes: list[Any]) -> None:
        self.core.report(worker, outcomes)

    async def ask(self, worker: str, wants: int, held: float, seed: Any, after: Any) -> Any:
        self.asks += 1
        self.seeds.append(seed)
        if self.down:
            self.down -= 1
            raise ConnectionError("the limiter actor is restarting")
        return await self.core.ask(worker, wants, held, seed, after)


def _noop(delay: float, reason: str) -> None:
    pass


def test_agents_of_two_workers_leave_one_interval_apart() -> None:
    # the core's clock stands still and the agents' sleeps are virtual: what is checked is the
    # plan (when each request may leave), which a busy machine cannot blur
    planned: list[float] = []

    def on_wait(delay: float, reason: str) -> None:
        planned.append(delay)

    async def main() -> None:
        core = LimiterCore(now=Clock())
        core.limiter.interval, core.limiter.capacity, core.limiter.tokens = 0.02, 1.0, 1.0
        core.limiter._t = core._now()
        link = Link(core)
        pacers = [ClusterPacer(link.report, link.ask, w) for w in ("a", "b")]
        clock = VirtualClock()
        ask = PaceRequest(None, 60, "x", on_wait)
        await asyncio.gather(*(pacers[k % 2].acquire(clock, ask) for k in range(6)))

    asyncio.run(main())
    # one request at once, the five others one interval apart, whichever worker sends them
    assert sorted(planned) == pytest.approx([0.02, 0.04, 0.06, 0.08, 0.1])


def test_slots_that_came_due_while_a_worker_was_busy_do_not_all_leave_at_once() -> None:
    # eight agents of one worker paced 50 ms apart; the worker is then busy for a second (a
    # loaded machine, or the check before sending answered late) and no timer fires: seven
    # slots are due at once when it wakes. Sent together, the provider's bucket of one would
    # take one and reject six
    clock = VirtualClock(auto_advance=False)
    provider = RateLimit(requests_per_s=20, burst=1, now=clock.now)
    admitted: list[bool] = []
    reasons: list[str] = []

    async def main() -> None:
        core = LimiterCore(now=clock.now)
        core.limiter.interval, core.limiter.capacity, core.limiter.tokens = 0.05, 1.0, 1.0
        core.limiter._t = clock.now()
        link = Link(core)
        pacer = ClusterPacer(link.report, link.ask, "a")
        ask = PaceRequest(None, 60, "x", lambda delay, reason: reasons.append(reason))

        async def agent() -> None:
            await pacer.acquire(clock, ask)
            admitted.append(provider.acquire().allowed)

        tasks = [asyncio.create_task(agent()) for _ in range(8)]
        await until(lambda: clock.sleepers == 7)
        clock.advance(1.0)  # busy: every timer fires at t=1.0
        await drive(clock, tasks, 0.005)

    asyncio.run(main())
    assert admitted == [True] * 8  # no 429: the late slots were taken again, one apart
    assert clock.now() == pytest.approx(1.3, abs=0.01)
    assert sum(LATE_NOTE in r for r in reasons) == 6


def test_while_the_core_is_down_a_worker_waits_then_seeds_the_new_one() -> None:
    async def main() -> tuple[Link, ClusterPacer]:
        old = LimiterCore()
        link = Link(old)
        pacer = ClusterPacer(link.report, link.ask, "a")
        clock = RealClock()
        await pacer.acquire(clock, PaceRequest(None, 60, "x", _noop))
        pacer.succeeded(clock.now(), {"anthropic-ratelimit-requests-limit": "10"})
        await asyncio.sleep(0.01)
        await pacer.acquire(clock, PaceRequest(None, 60, "x", _noop))
        link.core, link.down = LimiterCore(), 2  # killed; two asks fail while it restarts
        await pacer.acquire(clock, PaceRequest(None, 60, "x", _noop))
        return link, pacer

    link, pacer = asyncio.run(main())
    assert link.asks == 5 and link.down == 0
    assert link.seeds[-1] is not None and link.seeds[-1]["capacity"] == 10  # told the new core
    assert link.core.limiter.capacity == 10
    assert pacer.incarnation == link.core.incarnation


def test_a_wait_longer_than_allowed_is_a_rate_limit_error_and_the_slot_goes_back() -> None:
    async def main() -> LimiterCore:
        core = LimiterCore()
        core.report("a", [("limited", 0.0, 30.0)])
        link = Link(core)
        pacer = ClusterPacer(link.report, link.ask, "a")
        with pytest.raises(RateLimited, match="cluster-wide rate limiter asks to wait"):
            await pacer.acquire(RealClock(), PaceRequest(None, 5, "x", _noop))
        return core

    core = asyncio.run(main())
    assert core.limiter.admitted == 0


def test_the_retry_budget_is_spent_from_the_workers_share() -> None:
    async def main() -> tuple[list[bool], LimiterCore]:
        core = LimiterCore()
        link = Link(core)
        pacer = ClusterPacer(link.report, link.ask, "a")
        await pacer.acquire(RealClock(), PaceRequest(None, 60, "x", _noop))
        answers = [pacer.allow_retry(ServerError("boom", provider="x")) for _ in range(10)]
        await asyncio.sleep(0.01)
        return answers, core

    answers, core = asyncio.run(main())
    per_retry = core.limiter.budget.retry_cost
    allowed = int(LEASE_TOKENS // per_retry)
    assert answers == [True] * allowed + [False] * (10 - allowed)
    assert core.limiter.budget.retries == allowed and core.limiter.budget.refused == 10 - allowed


def test_a_held_back_ask_that_hears_no_news_is_answered_not_failed() -> None:
    # on Python 3.10 the long poll's timeout raised asyncio.TimeoutError (not yet the built-in
    # TimeoutError): the ask failed instead of being answered when no news came
    async def main() -> dict[str, Any]:
        core = LimiterCore()
        return await core.ask("a", 1, 0.0, None, core.version)

    reply = asyncio.run(main())
    assert reply["slots"] == [(0.0, True)]


def test_a_probe_that_never_reports_does_not_hold_every_worker_back_for_ever() -> None:
    # a probe slot whose outcome never comes (its release was voided by a 429's epoch) while
    # every other request is held back: no outcome moves the core on, so only the core's
    # probe timeout frees the queue, which it can do only if the held-back asks are answered
    async def main() -> int:
        core = LimiterCore()
        assert core.reserve("a", 1, 0.0)["slots"] == [(0.0, True)]  # the lost probe
        link = Link(core)
        pacers = [ClusterPacer(link.report, link.ask, w) for w in ("a", "b")]
        clock = RealClock()
        ask = PaceRequest(None, 60, "x", _noop)
        # the design's bound: the probe timeout, plus a long poll; 30 s is generous
        bound = core.limiter.probe_timeout + 120 * LONG_POLL_S
        await asyncio.wait_for(asyncio.gather(*(p.acquire(clock, ask) for p in pacers)), bound)
        return core.limiter.admitted + len(core.limiter._probes)

    assert asyncio.run(main()) == 2  # both got a slot (their probes are out)


def test_a_restarted_core_that_answers_before_it_is_seeded_gives_no_burst() -> None:
    # Ray retries a call in flight on the restarted limiter actor: the new core answers it
    # knowing only what replies sent under the old one told it (a bucket with 5 left, once)
    planned: list[float] = []

    def on_wait(delay: float, reason: str) -> None:
        planned.append(delay)

    async def main() -> LimiterCore:
        clock = Clock()
        old = LimiterCore(now=clock)
        old.limiter.interval, old.limiter.capacity, old.limiter.tokens = 0.05, 5.0, 0.0
        old.limiter._t = clock()
        link = Link(old)
        pacer = ClusterPacer(link.report, link.ask, "a")
        ask = PaceRequest(None, 60, "x", on_wait)
        await pacer.acquire(VirtualClock(), ask)  # it learns the rate from the old core
        new = LimiterCore(now=clock)
        new.report("a", [("ok", 0.0, {"anthropic-ratelimit-requests-remaining": "5"})])
        link.core = new
        planned.clear()
        await asyncio.gather(*(pacer.acquire(VirtualClock(), ask) for _ in range(4)))
        return new

    new = asyncio.run(main())
    assert new.limiter.rate == pytest.approx(20.0)  # seeded before it handed out a slot
    # paced from an empty bucket, one interval apart; not four at once
    assert sorted(planned) == pytest.approx([0.05, 0.1, 0.15, 0.2])
