"""The one attempt loop: events in order, waits on the clock, the pacer asked and told,
compaction and fallback handed back, cancellation never retried, the synchronous driver."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import pytest

from nbagent import errors as E
from nbagent._core._attempts import AttemptFailure, AttemptLoop, Fallback, Sent
from nbagent._core._budget import Usage
from nbagent._core._clock import Clock, VirtualClock
from nbagent._core._pacing import Pacer, PaceRequest
from nbagent._core._retry import RetryPolicy
from nbagent.events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    PacedWait,
    RetryScheduled,
)

POLICY = RetryPolicy(max_attempts=4, initial_delay=1.0, jitter=None)


def script(*outcomes: object):  # type: ignore[no-untyped-def]
    """An attempt function playing `outcomes` in order (an exception is raised)."""
    queue = list(outcomes)
    calls: list[int] = []

    async def attempt(n: int) -> object:
        calls.append(n)
        item = queue.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item

    attempt.calls = calls  # type: ignore[attr-defined]
    return attempt


def kinds(events: list[Event]) -> list[str]:
    return [type(e).__name__ for e in events]


def test_a_retry_is_announced_before_its_wait_and_the_same_request_is_tried_again() -> None:
    clock = VirtualClock(auto_advance=False)
    events: list[Event] = []
    loop = AttemptLoop(POLICY, clock=clock, emit=events.append, model="m")
    attempt = script(E.ServerError("503", status_code=503), "answer")

    async def main() -> object:
        task = asyncio.create_task(loop.run(attempt))
        while clock.sleepers == 0:
            await asyncio.sleep(0)
        # mid-wait: the failure and the retry are already announced
        assert kinds(events) == ["AttemptStarted", "AttemptFailed", "RetryScheduled"]
        retry = events[-1]
        assert isinstance(retry, RetryScheduled) and retry.delay_s == 1.0
        assert (retry.attempt, retry.next_attempt, retry.status_code) == (1, 2, 503)
        clock.advance(1.0)
        return await task

    assert asyncio.run(main()) == "answer"
    assert attempt.calls == [1, 2]  # type: ignore[attr-defined]
    assert kinds(events)[-2:] == ["AttemptStarted", "AttemptSucceeded"]
    assert clock.now() == 1.0


def test_the_final_error_is_raised_with_every_attempt_announced() -> None:
    events: list[Event] = []
    loop = AttemptLoop(
        RetryPolicy(max_attempts=2, jitter=None), clock=VirtualClock(), emit=events.append
    )
    attempt = script(E.Overloaded("529"), E.Overloaded("529 again"))
    with pytest.raises(E.Overloaded, match="529 again"):
        asyncio.run(loop.run(attempt))
    failed = [e for e in events if isinstance(e, AttemptFailed)]
    assert [(f.attempt, f.action) for f in failed] == [(1, "retry"), (2, "fail")]


def test_what_streamed_before_a_failure_is_reported_as_discarded() -> None:
    events: list[Event] = []
    loop = AttemptLoop(POLICY, clock=VirtualClock(), emit=events.append)
    broken = AttemptFailure(E.StreamInterrupted("cut"), text="Hel", thinking="hm", ttft_s=0.2)
    asyncio.run(loop.run(script(broken, "ok")))
    failed = next(e for e in events if isinstance(e, AttemptFailed))
    retry = next(e for e in events if isinstance(e, RetryScheduled))
    assert (failed.discarded_text, failed.discarded_thinking, failed.ttft_s) == ("Hel", "hm", 0.2)
    assert (retry.discarded_text, retry.discarded_thinking) == ("Hel", "hm")


def test_success_reports_what_describe_says() -> None:
    events: list[Event] = []
    loop = AttemptLoop(POLICY, clock=VirtualClock(), emit=events.append)
    asyncio.run(
        loop.run(
            script("ok"),
            describe=lambda _r: Sent(
                Usage(input_tokens=7, cache_read_tokens=3), request_id="req_1"
            ),
        )
    )
    ok = events[-1]
    assert isinstance(ok, AttemptSucceeded)
    assert (ok.request_id, ok.input_tokens, ok.cache_read_tokens) == ("req_1", 7, 3)


class FakePacer:
    def __init__(self, *, wait: float = 0.0, refuse: Exception | None = None, budget: int = 99):
        self.wait, self.refuse, self.budget = wait, refuse, budget
        self.told: list[str] = []

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        self.told.append("acquire")
        if self.refuse is not None:
            raise self.refuse
        if self.wait:
            ask.on_wait(self.wait, "pacing")
            await clock.sleep(self.wait)

    def succeeded(self, now: float, headers: Mapping[str, str]) -> None:
        self.told.append("succeeded")

    def failed(self, now: float, error: BaseException) -> None:
        self.told.append(f"failed:{type(error).__name__}")

    def allow_retry(self, error: BaseException) -> bool:
        self.budget -= 1
        return self.budget >= 0


def test_the_pacer_is_asked_before_each_attempt_and_told_how_it_went() -> None:
    pacer = FakePacer(wait=0.5)
    assert isinstance(pacer, Pacer)
    events: list[Event] = []
    clock = VirtualClock()
    loop = AttemptLoop(POLICY, clock=clock, emit=events.append, pacer=pacer)
    asyncio.run(loop.run(script(E.RateLimited("429", retry_after=2.0), "ok")))
    assert pacer.told == ["acquire", "failed:RateLimited", "acquire", "succeeded"]
    waits = [e for e in events if isinstance(e, PacedWait)]
    assert [w.delay_s for w in waits] == [0.5, 0.5]
    assert clock.now() == 0.5 + 2.0 + 0.5


def test_an_empty_retry_budget_makes_the_failure_final_and_the_event_says_why() -> None:
    events: list[Event] = []
    loop = AttemptLoop(POLICY, clock=VirtualClock(), emit=events.append, pacer=FakePacer(budget=0))
    with pytest.raises(E.ServerError):
        asyncio.run(loop.run(script(E.ServerError("503"))))
    failed = next(e for e in events if isinstance(e, AttemptFailed))
    assert failed.action == "fail" and "retry budget exhausted" in failed.message


def test_a_wait_the_pacer_will_not_take_is_decided_like_a_429_but_not_reported_to_it() -> None:
    far = E.RateLimited("wait too long", retry_after=3600)
    pacer = FakePacer(refuse=far)
    loop = AttemptLoop(POLICY, clock=VirtualClock(), pacer=pacer)
    with pytest.raises(E.QuotaExceeded):
        asyncio.run(loop.run(script("never sent")))
    assert pacer.told == ["acquire"]  # nothing was sent: nothing to learn, no budget drawn
    assert pacer.budget == 99


def test_an_overflow_is_compacted_then_tried_again_and_fails_when_nothing_is_left() -> None:
    overflow = E.ContextOverflow("prompt is too long")
    shed: list[str] = []

    async def compact(err: E.ContextOverflow) -> bool:
        shed.append(str(err.message))
        return len(shed) == 1

    loop = AttemptLoop(POLICY, clock=VirtualClock(), compactions_left=3)
    assert asyncio.run(loop.run(script(overflow, "fits"), compact=compact)) == "fits"
    loop = AttemptLoop(POLICY, clock=VirtualClock(), compactions_left=3)
    with pytest.raises(E.ContextOverflow):
        asyncio.run(loop.run(script(overflow, overflow), compact=compact))
    assert len(shed) == 2


def test_a_fallback_is_handed_to_the_caller() -> None:
    loop = AttemptLoop(POLICY, clock=VirtualClock(), can_fall_back=True)
    with pytest.raises(Fallback) as info:
        asyncio.run(loop.run(script(E.ModelNotFound("no such model"))))
    assert isinstance(info.value.error, E.ModelNotFound)


def test_cancellation_is_announced_and_never_retried() -> None:
    clock = VirtualClock(auto_advance=False)
    events: list[Event] = []
    loop = AttemptLoop(POLICY, clock=clock, emit=events.append)
    started = asyncio.Event()

    async def slow(n: int) -> str:
        started.set()
        await clock.sleep(100)
        return "late"

    async def main() -> None:
        task = asyncio.create_task(loop.run(slow))
        await started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert kinds(events) == ["AttemptStarted", "AttemptFailed"]
    last = events[-1]
    assert isinstance(last, AttemptFailed) and last.cancelled and last.error == "Aborted"


def test_the_synchronous_driver_waits_with_the_given_sleep() -> None:
    slept: list[float] = []
    told: list[tuple[int, str, float]] = []
    results = iter([E.ServerError("a"), E.ServerError("b"), "done"])

    def fn(_n: int) -> str:
        r = next(results)
        if isinstance(r, Exception):
            raise r
        return r

    loop = AttemptLoop(
        POLICY, on_retry=lambda n, err, plan: told.append((n, str(err.message), plan.delay_s))
    )
    assert loop.run_sync(fn, slept.append) == "done"
    assert slept == [1.0, 2.0]
    assert told == [(1, "a", 1.0), (2, "b", 2.0)]


def test_attempts_are_numbered_and_labelled() -> None:
    events: list[Event] = []
    loop = AttemptLoop(
        POLICY, clock=VirtualClock(), emit=events.append, phase="compaction", model="x"
    )
    asyncio.run(loop.run(script(E.ServerError("a"), "ok")))
    starts = [e for e in events if isinstance(e, AttemptStarted)]
    assert [(s.attempt, s.max_attempts, s.phase, s.model) for s in starts] == [
        (1, 4, "compaction", "x"),
        (2, 4, "compaction", "x"),
    ]
