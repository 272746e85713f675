"""The shared client-side rate limiter and the retry budget."""

from __future__ import annotations

import asyncio
import heapq
from collections.abc import Iterator

import pytest
from clock_support import drive, until

from nbagent import Agent, RateLimiter, RetryBudget, RetryPolicy, ScriptedModel, VirtualClock
from nbagent._core._clock import RealClock
from nbagent._core._pacing import PaceRequest
from nbagent._loop._limiter import limiter_key, reset_shared_limiters, shared_limiter
from nbagent._loop._slot_wait import LATE_NOTE
from nbagent.mock import RateLimit, serve
from nbagent.mock._ratelimit import anthropic_headers
from nbagent.providers._anthropic import AnthropicProvider


@pytest.fixture(autouse=True)
def _fresh_limiters() -> Iterator[None]:
    reset_shared_limiters()
    yield
    reset_shared_limiters()


# --- the limiter against a simulated token-bucket server, in virtual time --------------------


def simulate(
    n: int,
    rate: float = 10.0,
    burst: int = 5,
    latency: float = 0.005,
    lim: RateLimiter | None = None,
) -> tuple[float, int, RateLimiter]:
    """`n` clients that each need one success; returns (makespan, rejected, limiter)."""
    now = [0.0]
    bucket = RateLimit(requests_per_s=rate, burst=burst, now=lambda: now[0])
    lim = lim if lim is not None else RateLimiter()
    # events: (time, seq, client, kind, epoch)
    queue: list[tuple[float, int, int, str, int]] = []
    seq = 0
    for c in range(n):
        queue.append((0.0, seq, c, "ask", -1))
        seq += 1
    heapq.heapify(queue)
    done: set[int] = set()
    rejected = 0
    while queue:
        t, _, c, kind, epoch = heapq.heappop(queue)
        now[0] = t
        if kind == "slot" and lim.epoch != epoch:
            kind = "ask"  # the reservation was voided by a 429 meanwhile
        if kind == "ask":
            e = lim.epoch
            delay, slot = lim.reserve(t)
            if slot and delay <= 0:
                kind = "slot"
            else:
                heapq.heappush(queue, (t + delay, seq, c, "slot" if slot else "ask", e))
                seq += 1
                continue
        decision = bucket.acquire()
        headers = anthropic_headers(decision)
        answered = t + latency
        if decision.allowed:
            lim.on_success(answered, headers)
            done.add(c)
            continue
        rejected += 1
        lim.on_rate_limited(answered, decision.retry_after_s)
        heapq.heappush(queue, (answered + decision.retry_after_s, seq, c, "ask", -1))
        seq += 1
    assert done == set(range(n))
    return now[0], rejected, lim


def test_limiter_learns_the_rate_and_paces() -> None:
    span, rejected, lim = simulate(64)
    ideal = 64 / 10.0
    assert span <= 1.1 * ideal
    assert rejected <= 8  # a few to learn from, not a storm
    assert lim.rate is not None and 9.0 <= lim.rate <= 10.0
    assert lim.capacity == 5
    assert lim.paced > 40  # most requests waited for their own slot


def test_limiter_with_a_slow_server_and_a_big_burst() -> None:
    span, rejected, lim = simulate(40, rate=2.0, burst=10, latency=0.05)
    assert rejected <= 6
    assert span <= 1.15 * (40 - 10) / 2.0 + 1.0
    assert lim.rate is not None and 1.8 <= lim.rate <= 2.0 * 1.001  # measured, not guessed


def test_a_rate_learned_too_fast_is_corrected_within_a_few_429s() -> None:
    # as a restarted cluster limiter, or one that heard its Retry-Afters late, may have it:
    # pacing at 28/s against a server that refills 20/s
    lim = RateLimiter()
    lim.interval, lim.tokens = 1 / 28, 0.0
    span, rejected, lim = simulate(100, rate=20.0, lim=lim)
    assert rejected <= 5  # slowing 2 % per 429 alone took 17
    assert lim.rate is not None and 19.0 <= lim.rate <= 20.0 * 1.001
    assert span <= 1.1 * (100 - 5) / 20.0


def test_a_429_after_the_bucket_had_filled_up_measures_nothing() -> None:
    lim = RateLimiter()
    lim.interval, lim.tokens, lim.capacity = 0.1, 0.0, 5.0
    lim.on_rate_limited(0.0, 0.1)  # D1 = 0.1 (and 2 % slower)
    for t in (0.1, 0.2, 0.3):
        assert lim.reserve(t)[1]
        lim.on_success(t, {})
    lim.reserve(10.0)  # idle long enough for the bucket to fill: refill was lost meanwhile
    for t in (10.0, 10.0, 10.0):
        lim.on_success(t, {})
    lim.on_rate_limited(10.0, 0.1)
    # 2 % slower again, not 50 % (what (10.1 - 0.1) / 6 admissions would have said)
    assert lim.interval == pytest.approx(0.1 * lim.slowdown**2)


def test_no_headers_no_limit_means_a_quick_slow_start() -> None:
    lim = RateLimiter()
    granted = 0
    t = 0.0
    for _ in range(6):  # each success widens the window by one: 1, 2, 4, 8, ... per round
        batch = 0
        while True:
            delay, slot = lim.reserve(t)
            if not slot:
                break
            batch += 1
        granted += batch
        for _ in range(batch):
            lim.on_success(t, {})
        t += 0.01
    assert granted == 1 + 2 + 4 + 8 + 16 + 32


def test_a_probe_that_never_answers_does_not_block_forever() -> None:
    lim = RateLimiter(probe_timeout=1.0)
    assert lim.reserve(0.0) == (0.0, True)  # the probe; its run is then cancelled mid-stream
    delay, slot = lim.reserve(0.1)
    assert not slot and delay > 0
    assert lim.reserve(1.5)[1]  # the lost probe no longer holds the others back


def test_a_429_blocks_everyone_until_its_retry_after_and_voids_reservations() -> None:
    lim = RateLimiter()
    lim.on_success(
        0.0,
        {
            "x-ratelimit-limit-requests": "2",
            "x-ratelimit-remaining-requests": "1",
            "x-ratelimit-reset-requests": "500ms",
        },
    )
    assert lim.rate is not None and lim.rate == pytest.approx(2.0 / lim.margin)
    epoch = lim.epoch
    lim.reserve(0.0)
    lim.reserve(0.0)
    lim.on_rate_limited(0.1, 2.0)
    assert lim.epoch != epoch
    delay, slot = lim.reserve(0.5)
    assert not slot and delay == pytest.approx(1.6)
    delay, slot = lim.reserve(2.1)
    assert slot and delay == pytest.approx(0.0, abs=1e-9)


def test_release_hands_a_cancelled_slot_back() -> None:
    lim = RateLimiter()
    lim.on_success(
        0.0,
        {
            "x-ratelimit-limit-requests": "1",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "1s",
        },
    )
    e = lim.epoch
    d1, _ = lim.reserve(0.0)
    d2, _ = lim.reserve(0.0)
    assert d2 > d1
    lim.release(0.0, e)
    d3, _ = lim.reserve(0.0)
    assert d3 == pytest.approx(d2)


def test_slots_handed_back_late_do_not_overfill_the_bucket() -> None:
    # a worker that took four paced slots and, busy, handed them back a second later: the
    # bucket filled to its capacity meanwhile, and holds no more for the slots coming back
    lim = _paced(rate=20.0)
    lim.capacity = lim.tokens = 2.0
    e = lim.epoch
    taken = [lim.reserve(0.0) for _ in range(4)]
    assert [slot for _, slot in taken] == [True] * 4 and taken[-1][0] > 0
    for _ in taken:
        lim.release(1.0, e)
    now_free = [lim.reserve(1.0)[0] for _ in range(4)]
    assert sum(d == 0 for d in now_free) == 2  # the capacity's worth at once, then paced
    assert now_free[2] == pytest.approx(0.05) and now_free[3] == pytest.approx(0.10)


# --- a busy process: timers that fire late -------------------------------------------------


def _paced(rate: float = 20.0) -> RateLimiter:
    """A limiter that knows the rate and a bucket of one, as after learning them."""
    lim = RateLimiter()
    lim.interval, lim.capacity, lim.tokens, lim._t = 1.0 / rate, 1.0, 1.0, 0.0
    return lim


def _agents(
    lim: RateLimiter, clock: VirtualClock, n: int, provider: RateLimit
) -> tuple[list[asyncio.Task[None]], list[bool], list[str]]:
    admitted: list[bool] = []
    reasons: list[str] = []
    ask = PaceRequest(None, 60.0, "x", lambda delay, reason: reasons.append(reason))

    async def agent() -> None:
        await lim.acquire(clock, ask)
        admitted.append(provider.acquire().allowed)

    return [asyncio.create_task(agent()) for _ in range(n)], admitted, reasons


def test_slots_that_came_due_while_the_loop_was_blocked_do_not_all_leave_at_once() -> None:
    # eight agents paced 50 ms apart; the process is then busy for a second (a long cell, a
    # loaded machine) and no timer fires: when it wakes, seven slots are due at once. Sent
    # together, the provider's bucket of one would take one and reject six
    clock = VirtualClock(auto_advance=False)
    provider = RateLimit(requests_per_s=20, burst=1, now=clock.now)

    async def main() -> tuple[list[bool], list[str]]:
        tasks, admitted, reasons = _agents(_paced(), clock, 8, provider)
        await until(lambda: clock.sleepers == 7)
        clock.advance(1.0)  # blocked: every timer fires at t=1.0
        await drive(clock, tasks, 0.005)
        return admitted, reasons

    admitted, reasons = asyncio.run(main())
    assert admitted == [True] * 8  # no 429: the late slots were taken again, one apart
    assert clock.now() == pytest.approx(1.3, abs=0.01)  # 1.0, then 1.05 ... 1.30
    assert sum(LATE_NOTE in r for r in reasons) == 6  # each second wait says why


def test_a_slot_a_little_late_is_spent_and_a_late_one_is_taken_again_only_once() -> None:
    clock = VirtualClock(auto_advance=False)
    provider = RateLimit(requests_per_s=1000, burst=100, now=clock.now)

    async def main() -> list[str]:
        tasks, _, reasons = _agents(_paced(), clock, 4, provider)
        await drive(clock, tasks, 0.03)  # timers fire up to 30 ms late: a busy loop's jitter
        assert not any(LATE_NOTE in r for r in reasons)
        # a machine that is always slow: blocked again before each second slot; still sent
        tasks, _, reasons = _agents(_paced(), clock, 3, provider)
        for sleeping in (2, 1):  # the second agent's new slot is free at once, the third's not
            await until(lambda: clock.sleepers == sleeping)  # noqa: B023 (awaited at once)
            clock.advance(2.0)
        await drive(clock, tasks, 0.005)
        return reasons

    reasons = asyncio.run(main())
    assert sum(LATE_NOTE in r for r in reasons) == 1  # renewed once, then spent however late


# --- the retry budget --------------------------------------------------------------------------


def test_retry_budget_drains_on_an_outage_and_refills_on_success() -> None:
    budget = RetryBudget(capacity=20)
    assert [budget.withdraw() for _ in range(5)] == [True, True, True, True, False]
    assert budget.tokens == 0 and budget.refused == 1
    budget.refill()  # a success after a retry gives back that retry's cost
    assert budget.tokens == 5
    budget.refill()  # a success without a retry gives back 1
    assert budget.tokens == 6
    assert not budget.withdraw(timeout=True)  # a timeout costs 10
    budget.reset()
    assert budget.tokens == 20


@pytest.mark.e2e
def test_the_retry_budget_stops_a_storm_against_an_always_503_server() -> None:
    budget = RetryBudget(capacity=50)  # room for 10 retries, across everybody
    lim = RateLimiter(budget=budget)
    policy = RetryPolicy(max_attempts=50, initial_delay=0.001, max_delay=0.002)

    async def main(url: str) -> list[BaseException | object]:
        agents = [Agent("demo", base_url=url, retry=policy, limiter=lim) for _ in range(8)]
        try:
            return await asyncio.gather(
                *(a.run("hi", show=False) for a in agents), return_exceptions=True
            )
        finally:
            for a in agents:
                messages.extend(a.attempts["message"].dropna().tolist())
                await a.aclose()

    messages: list[str] = []

    with serve(fault_rates={"503": 1.0}) as server:
        results = asyncio.run(main(server.url))
        requests = len(server.requests)
    assert all(isinstance(r, Exception) for r in results)
    assert budget.retries == 10
    assert requests == 8 + 10  # each agent's first attempt, then the budget's ten retries
    assert sum("retry budget exhausted" in m for m in messages) == 8


# --- agents sharing a limiter ------------------------------------------------------------------


def _paced_limiter(interval_headers: str = "1s") -> RateLimiter:
    lim = RateLimiter()
    lim.on_success(
        0.0,
        {
            "x-ratelimit-limit-requests": "1",
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": interval_headers,
        },
    )
    return lim


def test_agents_sharing_the_limiter_log_paced_rows() -> None:
    clock = VirtualClock()
    lim = _paced_limiter()

    async def main() -> None:
        agents = [Agent(ScriptedModel(["hello"]), clock=clock, limiter=lim) for _ in range(3)]
        await asyncio.gather(*(a.run("hi", show=False) for a in agents))
        paced = [a.attempts[a.attempts["action"] == "paced"] for a in agents]
        # virtual time moves on at each sleep: each agent waits one interval after the last
        interval = 1.0 * lim.margin
        assert [float(p["delay_s"].sum()) for p in paced] == pytest.approx([interval] * 3)
        assert clock.now() == pytest.approx(3 * interval)
        for p in paced:
            assert (p["phase"] == "request").all()
            assert p["message"].str.contains("pacing").all()

    asyncio.run(main())


def test_limiter_false_switches_it_off() -> None:
    clock = VirtualClock()

    async def main() -> None:
        agents = [Agent(ScriptedModel(["hello"]), clock=clock, limiter=False) for _ in range(3)]
        assert agents[0].pacer_for(agents[0].providers[0]) is None
        await asyncio.gather(*(a.run("hi", show=False) for a in agents))
        for a in agents:
            assert not (a.attempts["action"] == "paced").any()
        assert clock.now() == 0.0

    asyncio.run(main())


@pytest.mark.e2e
def test_rate_limited_agents_on_the_mock_server_are_paced() -> None:
    async def main(url: str) -> list[Agent]:
        agents = [Agent("demo", base_url=url) for _ in range(12)]
        await asyncio.gather(*(a.run("hi", show=False) for a in agents))
        for a in agents:
            await a.aclose()
        return agents

    with serve(rate_limit=RateLimit(requests_per_s=40, burst=2)) as server:
        agents = asyncio.run(main(server.url))
        statuses = [r.status for r in server.requests]
    assert statuses.count(200) == 12
    assert statuses.count(429) <= 6
    rows = [a.attempts for a in agents]
    assert sum(int((df["action"] == "paced").sum()) for df in rows) > 0


# --- the registry ------------------------------------------------------------------------------


def test_shared_limiter_is_per_provider_endpoint_key_and_clock() -> None:
    real = RealClock()
    a = AnthropicProvider("m", api_key="sk-secret-1", base_url="http://127.0.0.1:1")
    b = AnthropicProvider("m", api_key="sk-secret-1", base_url="http://127.0.0.1:1")
    c = AnthropicProvider("m", api_key="sk-secret-2", base_url="http://127.0.0.1:1")
    d = AnthropicProvider("m", api_key="sk-secret-1", base_url="http://127.0.0.1:2")
    assert shared_limiter(a, real) is shared_limiter(b, real)
    assert shared_limiter(a, real) is not shared_limiter(c, real)
    assert shared_limiter(a, real) is not shared_limiter(d, real)
    v1, v2 = VirtualClock(), VirtualClock()
    assert shared_limiter(a, v1) is shared_limiter(b, v1)
    assert shared_limiter(a, v1) is not shared_limiter(a, v2)
    assert shared_limiter(a, v1) is not shared_limiter(a, real)
    assert "sk-secret-1" not in repr(limiter_key(a)) + repr(shared_limiter(a, real))
    before = shared_limiter(a, real)
    reset_shared_limiters()
    assert shared_limiter(a, real) is not before
