"""RetryPolicy exactly as DESIGN.md specifies, and the generic call/acall."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import warnings
from datetime import datetime, timezone
from email.utils import format_datetime

import pytest

from nbagent import errors as E
from nbagent._core._clock import VirtualClock
from nbagent._core._policy import format_duration
from nbagent._core._retry import RetryPolicy
from nbagent.providers._server_wish import parse_duration, parse_retry_after, server_wish

NOW = 1_750_000_000.0


def test_defaults_match_the_design() -> None:
    p = RetryPolicy()
    assert (p.max_attempts, p.initial_delay, p.max_delay, p.multiplier) == (4, 0.5, 30.0, 2.0)
    assert (p.jitter, p.max_retry_after, p.seed) == ("full", 60.0, None)


def test_a_policy_is_a_frozen_value() -> None:
    # a typo'd setting must not be taken silently: a policy is changed with dataclasses.replace
    p = RetryPolicy()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.max_attempts = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.max_attemps = 5  # type: ignore[attr-defined]
    assert dataclasses.replace(p, max_attempts=5) == RetryPolicy(max_attempts=5)


def test_exponential_delay_with_cap() -> None:
    p = RetryPolicy(jitter=None, initial_delay=0.5, multiplier=2, max_delay=3)
    assert [p.base_delay(n) for n in range(1, 6)] == [0.5, 1.0, 2.0, 3.0, 3.0]
    assert p.base_delay(10_000) == 3.0  # no overflow on absurd attempt numbers


@pytest.mark.parametrize(
    ("kwargs", "field", "expected"),
    [
        ({"max_attempts": 0}, "max_attempts", 1),
        ({"max_attempts": -3}, "max_attempts", 1),
        ({"initial_delay": 0}, "initial_delay", 0.0),
        ({"initial_delay": -1}, "initial_delay", 0.0),
        ({"max_delay": 0}, "max_delay", 30.0),
        ({"max_delay": -2}, "max_delay", 30.0),
        ({"multiplier": 0.5}, "multiplier", 2.0),
        ({"multiplier": -1}, "multiplier", 2.0),
        ({"jitter": -0.2}, "jitter", None),
        ({"jitter": 0.0}, "jitter", None),
        ({"jitter": 1.7}, "jitter", 1.0),
        ({"jitter": 0.25}, "jitter", 0.25),
    ],
)
def test_out_of_range_values_are_normalised_not_rejected(
    kwargs: dict[str, object], field: str, expected: object
) -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        policy = RetryPolicy(**kwargs)  # type: ignore[arg-type]
    assert getattr(policy, field) == expected
    given = kwargs[field]
    if given == expected or (given == 0.0 and field == "jitter"):  # a spread of 0 is no jitter
        assert caught == []
    else:  # one sentence naming the argument, the value given and the value used
        assert len(caught) == 1 and caught[0].category is UserWarning
        text = str(caught[0].message)
        assert f"{field}={given!r}" in text and f"{field}={expected!r}" in text
        assert caught[0].filename == __file__  # points at the caller's line


def test_each_replaced_argument_is_announced_once() -> None:
    with pytest.warns(UserWarning) as record:
        RetryPolicy(
            max_attempts=0, initial_delay=-1, max_delay=-5, multiplier=0.5, max_retry_after=-3
        )
    said = sorted(str(w.message).split("=")[0] for w in record)
    assert said == [
        "RetryPolicy initial_delay",
        "RetryPolicy max_attempts",
        "RetryPolicy max_delay",
        "RetryPolicy max_retry_after",
        "RetryPolicy multiplier",
    ]
    # a normalised policy copied with dataclasses.replace says nothing again
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        dataclasses.replace(RetryPolicy(max_attempts=3), seed=1)


def test_no_wait_when_initial_delay_is_not_positive() -> None:
    with pytest.warns(UserWarning, match="initial_delay=-1"):
        p = RetryPolicy(initial_delay=-1)
    plan = p.plan(E.ServerError("x"), 1)
    assert plan is not None and plan.delay_s == 0.0


def test_unknown_jitter_name_is_a_config_error_with_the_fix() -> None:
    with pytest.raises(E.ConfigError, match="'full', 'equal'"):
        RetryPolicy(jitter="fuzzy")  # type: ignore[arg-type]


def test_jitter_kinds_stay_in_their_envelopes() -> None:
    rng = random.Random(7)
    for jitter in ("full", "equal", 0.3, None):
        p = RetryPolicy(jitter=jitter, initial_delay=1, multiplier=2, max_delay=100)
        for n in (1, 2, 3):
            lo, hi, _ = p.envelope(n)
            for _ in range(200):
                d = p.jittered(p.base_delay(n), rng)
                assert lo <= d <= hi, (jitter, n, d)
    assert RetryPolicy(jitter="equal").envelope(1) == (0.25, 0.5, 0.375)
    assert RetryPolicy(jitter=0.2).envelope(1) == pytest.approx((0.4, 0.6, 0.5))


def test_seed_makes_jitter_reproducible() -> None:
    def delays(seed: int) -> list[float]:
        p = RetryPolicy(seed=seed, max_attempts=10)
        rng = p.rng()
        out = []
        for n in range(1, 9):
            plan = p.plan(E.ServerError("x"), n, rng=rng)
            assert plan is not None
            out.append(plan.delay_s)
        return out

    assert delays(3) == delays(3)
    assert delays(3) != delays(4)


def test_attempts_count_the_first_one() -> None:
    p = RetryPolicy(max_attempts=3)
    assert p.plan(E.ServerError("x"), 1) is not None
    assert p.plan(E.ServerError("x"), 2) is not None
    assert p.plan(E.ServerError("x"), 3) is None


def test_server_wish_replaces_the_delay_unjittered() -> None:
    p = RetryPolicy(seed=1)
    plan = p.plan(E.RateLimited("x", retry_after=7.5), 1)
    assert plan is not None
    assert plan.delay_s == 7.5 and plan.retry_after_s == 7.5
    assert plan.policy_delay_s <= 0.5  # what the policy alone would have waited


def test_server_wish_above_the_cap_makes_the_error_final() -> None:
    p = RetryPolicy(max_retry_after=60)
    err = E.RateLimited("x", provider="anthropic", status_code=429, retry_after=6300)
    assert p.plan(err, 1) is None
    final = p.escalate(err)
    assert isinstance(final, E.QuotaExceeded)
    assert str(final) == "Anthropic rate limit reached. Resets in 1 h 45 min."
    assert E.classify(final) is E.Action.FAIL
    # within the cap, nothing changes
    ok = E.RateLimited("x", retry_after=30)
    assert p.escalate(ok) is ok


def test_a_wait_past_the_deadline_is_not_taken() -> None:
    p = RetryPolicy(jitter=None, initial_delay=2)
    assert p.plan(E.ServerError("x"), 1, time_left=1.0) is None
    assert p.plan(E.ServerError("x"), 1, time_left=3.0) is not None
    assert p.plan(E.RateLimited("x", retry_after=10), 1, time_left=5) is None


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("6m0s", 360.0),
        ("1s", 1.0),
        ("12ms", 0.012),
        ("1h2m3.5s", 3723.5),
        ("0.5s", 0.5),
        ("2", 2.0),
        ("-5", None),  # a negative wish is no wish, bare or with a unit
        ("-5s", None),
        ("", None),
        ("soon", None),
        ("5x", None),
    ],
)
def test_openai_durations(text: str, seconds: float | None) -> None:
    got = parse_duration(text)
    assert got == (pytest.approx(seconds) if seconds is not None else None)


def test_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("3", NOW) == 3.0
    when = datetime.fromtimestamp(NOW + 90, tz=timezone.utc)
    assert parse_retry_after(format_datetime(when, usegmt=True), NOW) == pytest.approx(90)
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", NOW) == 0.0  # in the past
    assert parse_retry_after("nonsense", NOW) is None
    assert parse_retry_after("nan", NOW) is None


def test_server_wish_header_precedence() -> None:
    assert server_wish({"retry-after-ms": "1500", "retry-after": "9"}, NOW) == 1.5
    assert server_wish({"Retry-After": "9"}, NOW) == 9.0
    reset = datetime.fromtimestamp(NOW + 42, tz=timezone.utc).isoformat().replace("+00:00", "Z")
    anth = {
        "anthropic-ratelimit-requests-remaining": "0",
        "anthropic-ratelimit-requests-reset": reset,
        "anthropic-ratelimit-tokens-remaining": "5000",
        "anthropic-ratelimit-tokens-reset": "2020-01-01T00:00:00Z",
    }
    assert server_wish(anth, NOW) == pytest.approx(42)
    oai = {
        "x-ratelimit-remaining-requests": "0",
        "x-ratelimit-reset-requests": "6m0s",
        "x-ratelimit-remaining-tokens": "100",
        "x-ratelimit-reset-tokens": "1s",
    }
    assert server_wish(oai, NOW) == 360.0
    # nothing exhausted: no wish, the policy decides
    assert (
        server_wish(
            {"x-ratelimit-remaining-requests": "3", "x-ratelimit-reset-requests": "1s"}, NOW
        )
        is None
    )
    assert server_wish({}, NOW) is None


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (6300, "1 h 45 min"),
        (3600, "1 h"),
        (90, "1 min 30 s"),
        (42.2, "43 s"),
        (120, "2 min"),
        (90000, "1 d 1 h"),
    ],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_call_retries_then_succeeds_with_policy_delays() -> None:
    slept: list[float] = []
    results = iter([E.ServerError("a"), E.Overloaded("b"), "done"])

    def fn() -> str:
        r = next(results)
        if isinstance(r, Exception):
            raise r
        return r

    p = RetryPolicy(jitter=None, initial_delay=1)
    assert p.call(fn, sleep=slept.append) == "done"
    assert slept == [1.0, 2.0]


def test_call_gives_up_after_max_attempts_with_the_last_error() -> None:
    n = 0

    def fn() -> None:
        nonlocal n
        n += 1
        raise E.ServerError(f"try {n}")

    with pytest.raises(E.ServerError, match="try 3"):
        RetryPolicy(max_attempts=3).call(fn, sleep=lambda s: None)
    assert n == 3


def test_non_idempotent_calls_retry_only_rate_limits() -> None:
    n = 0

    def fn() -> None:
        nonlocal n
        n += 1
        raise E.ServerError("maybe it ran")

    with pytest.raises(E.ServerError):
        RetryPolicy().call(fn, idempotent=False, sleep=lambda s: None)
    assert n == 1

    seq = iter([E.RateLimited("429"), "ok"])

    def limited() -> str:
        r = next(seq)
        if isinstance(r, Exception):
            raise r
        return r

    assert RetryPolicy().call(limited, idempotent=False, sleep=lambda s: None) == "ok"


def test_should_retry_predicate_decides() -> None:
    n = 0

    def fn() -> None:
        nonlocal n
        n += 1
        raise ValueError("flaky")

    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=3).call(
            fn,
            should_retry=lambda e: isinstance(e, ValueError),
            sleep=lambda s: None,
        )
    assert n == 3


def test_acall_in_virtual_time_and_far_reset_becomes_quota() -> None:
    clock = VirtualClock()
    seq = iter([E.RateLimited("x", retry_after=5), "ok"])

    async def fn() -> str:
        r = next(seq)
        if isinstance(r, Exception):
            raise r
        return r

    assert asyncio.run(RetryPolicy().acall(fn, clock=clock)) == "ok"
    assert clock.now() == 5.0

    async def far() -> str:
        raise E.RateLimited("x", provider="openai", retry_after=7200)

    with pytest.raises(E.QuotaExceeded, match="OpenAI rate limit reached. Resets in 2 h."):
        asyncio.run(RetryPolicy().acall(far, clock=clock))


def test_acall_never_retries_cancellation() -> None:
    clock = VirtualClock()
    n = 0

    async def fn() -> None:
        nonlocal n
        n += 1
        raise E.Aborted("stop")

    with pytest.raises(E.Aborted):
        asyncio.run(RetryPolicy().acall(fn, clock=clock, should_retry=lambda e: True))
    assert n == 1
