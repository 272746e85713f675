"""Jitter strategies as small values: each draw stays inside its envelope; shorthands and
objects are interchangeable; a strategy of one's own plugs into the policy."""

from __future__ import annotations

import random
from dataclasses import dataclass

import pytest

from nbagent import errors as E
from nbagent._core._jitter import (
    ANY_SPAN,
    DecorrelatedJitter,
    EqualJitter,
    FullJitter,
    NoJitter,
    ProportionalJitter,
    Span,
)
from nbagent._core._retry import RetryPolicy


@pytest.mark.parametrize(
    ("spec", "strategy"),
    [
        ("full", FullJitter()),
        ("equal", EqualJitter()),
        ("decorrelated", DecorrelatedJitter()),
        (None, NoJitter()),
        (0.3, ProportionalJitter(0.3)),
    ],
)
def test_shorthands_name_the_strategies(spec: object, strategy: object) -> None:
    policy = RetryPolicy(jitter=spec)  # type: ignore[arg-type]
    assert policy.strategy == strategy
    assert RetryPolicy(jitter=strategy).strategy == strategy  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ["full", "equal", None, 0.3, "decorrelated"])
def test_every_draw_lies_inside_the_envelope(spec: object) -> None:
    policy = RetryPolicy(jitter=spec, initial_delay=0.5, max_delay=8.0)  # type: ignore[arg-type]
    rng = random.Random(1)
    for attempt in range(1, 8):
        low, high, mean = policy.envelope(attempt)
        assert low <= mean <= high
        for _ in range(200):
            plan = policy.plan(E.ServerError("x"), min(attempt, policy.max_attempts - 1), rng=rng)
            assert plan is not None
            lo, hi, _ = policy.envelope(min(attempt, policy.max_attempts - 1))
            assert lo - 1e-9 <= plan.delay_s <= hi + 1e-9


def test_a_strategy_of_ones_own_is_used_by_the_policy() -> None:
    @dataclass(frozen=True)
    class Fixed:
        seconds: float

        def apply(self, delay: float, rng: random.Random, span: Span = ANY_SPAN) -> float:
            return self.seconds

        def envelope(self, delay: float, span: Span = ANY_SPAN) -> tuple[float, float, float]:
            return self.seconds, self.seconds, self.seconds

    policy = RetryPolicy(jitter=Fixed(0.25))
    plan = policy.plan(E.ServerError("x"), 1)
    assert plan is not None and plan.delay_s == 0.25


def test_an_unknown_jitter_is_one_sentence() -> None:
    with pytest.raises(E.ConfigError, match="unknown jitter 'wobbly'"):
        RetryPolicy(jitter="wobbly")  # type: ignore[arg-type]
