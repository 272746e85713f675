from __future__ import annotations

import math
import random

import pandas as pd
import pytest
from test_attempts import check_schema

from nbagent._core._retry import RetryPolicy
from nbagent.simulate import compare_jitter, simulate_contention, simulate_retries


def test_simulate_retries_delays_follow_the_policy() -> None:
    policy = RetryPolicy(max_attempts=5, initial_delay=0.5, max_delay=4.0, seed=99)
    df = simulate_retries(policy, fail_rate=0.5, n_runs=40, seed=7)
    check_schema(df)
    waits = df[df["delay_s"].notna()]
    assert len(waits) > 10
    # the same draws, recomputed: one jitter per wait, in order, from random.Random(seed)
    rng = random.Random(7)
    expected = [
        policy.jittered(policy.base_delay(int(n)), rng) for n in waits["attempt"].to_numpy()
    ]
    assert list(waits["delay_s"]) == expected
    assert list(waits["policy_delay_s"]) == expected
    assert (waits["action"] == "retry").all()
    for n, d in zip(waits["attempt"], waits["delay_s"], strict=True):
        lo, hi, _ = policy.envelope(int(n))
        assert lo <= d <= hi


def test_simulate_retries_rows() -> None:
    policy = RetryPolicy(max_attempts=3, initial_delay=1.0, jitter=None)
    df = simulate_retries(policy, fail_rate=1.0, n_runs=2, seed=0, attempt_duration_s=0.5)
    check_schema(df)
    assert list(df["run_id"]) == ["sim-0001"] * 3 + ["sim-0002"] * 3
    assert list(df["attempt"]) == [1, 2, 3, 1, 2, 3]
    assert list(df["action"]) == ["retry", "retry", "fail"] * 2
    assert list(df["delay_s"].fillna(-1)) == [1.0, 2.0, -1] * 2
    # virtual time: attempt, wait, attempt, ...; the next run starts where the last ended
    assert list(df["started_at"]) == [0.0, 1.5, 4.0, 4.5, 6.0, 8.5]
    assert (df["duration_s"] == 0.5).all()
    assert (df["status_code"] == 503).all() and (df["error_kind"] == "ServerError").all()

    ok = simulate_retries(policy, fail_rate=0.0, n_runs=5, seed=0)
    assert len(ok) == 5 and (ok["outcome"] == "ok").all() and ok["delay_s"].isna().all()


def test_simulate_retries_is_reproducible() -> None:
    policy = RetryPolicy(max_attempts=6)
    a = simulate_retries(policy, 0.4, 30, seed=11)
    b = simulate_retries(policy, 0.4, 30, seed=11)
    pd.testing.assert_frame_equal(a, b)
    c = simulate_retries(policy, 0.4, 30, seed=12)
    assert not a.equals(c)


def test_simulate_retries_with_retry_after() -> None:
    policy = RetryPolicy(max_attempts=4, max_retry_after=60.0)
    df = simulate_retries(policy, 1.0, 1, seed=1, retry_after_s=2.5)
    waits = df[df["delay_s"].notna()]
    assert list(waits["delay_s"]) == [2.5, 2.5, 2.5]
    assert (waits["retry_after_s"] == 2.5).all()
    assert (waits["policy_delay_s"] != 2.5).all()  # what the policy alone would have said
    assert (df["status_code"] == 429).all()
    # a wish beyond max_retry_after is final at once
    far = simulate_retries(policy, 1.0, 1, seed=1, retry_after_s=600.0)
    assert list(far["action"]) == ["fail"] and far["delay_s"].isna().all()


def test_contention_full_jitter_beats_no_jitter() -> None:
    n = 20
    none = simulate_contention(n, None, seed=0)
    full = simulate_contention(n, "full", seed=0)
    check_schema(none)
    check_schema(full)
    # without jitter the clients move in lock-step: one gets through per round
    assert len(none) == n * (n + 1) // 2
    assert len(full) < len(none)
    assert full["ended_at"].max() < none["ended_at"].max()
    for df in (none, full):
        assert df["run_id"].nunique() == n
        last = df.groupby("run_id").tail(1)
        assert (last["outcome"] == "ok").all()


def test_compare_jitter_names_a_misspelt_keyword_even_with_no_strategy_to_run() -> None:
    for strategies in ([], [None]):
        with pytest.raises(TypeError, match="unexpected keyword argument 'rat'; it passes on rate"):
            compare_jitter(5, strategies, rat=2.0)  # type: ignore[call-arg]


def test_contention_table_ordering_under_fixed_seed() -> None:
    table = compare_jitter(30, seed=0)
    assert list(table["jitter"]) == ["none", "full", "equal", "decorrelated"]
    calls = dict(zip(table["jitter"], table["total_calls"], strict=True))
    assert calls["full"] < calls["none"]
    assert calls["equal"] < calls["none"]
    assert calls["decorrelated"] < calls["none"]
    assert (table["gave_up"] == 0).all()
    assert table.loc[0, "calls_per_client"] == pytest.approx((30 + 1) / 2)
    many = compare_jitter([5, 10], strategies=["full", None], seed=1)
    assert list(many["n_clients"]) == [5, 5, 10, 10]


def test_contention_is_reproducible() -> None:
    a = simulate_contention(10, "equal", seed=3)
    b = simulate_contention(10, "equal", seed=3)
    pd.testing.assert_frame_equal(a, b)


def test_decorrelated_jitter_bounds() -> None:
    policy = RetryPolicy(max_attempts=50, initial_delay=0.2, max_delay=3.0)
    df = simulate_contention(15, "decorrelated", policy=policy, seed=4)
    waits = df["delay_s"].dropna()
    assert len(waits) > 0
    assert waits.min() >= 0.2 and waits.max() <= 3.0
    # each client's sleep is drawn from [base, 3 * previous sleep]
    for _, g in df.groupby("run_id"):
        d = g["delay_s"].dropna().to_list()
        prev = 0.2
        for x in d:
            assert 0.2 <= x <= min(3.0, prev * 3) + 1e-12
            prev = x


def test_token_bucket() -> None:
    df = simulate_contention(10, "full", "token_bucket", rate=5.0, burst=2, seed=0)
    check_schema(df)
    assert (df[df["outcome"] == "error"]["status_code"] == 429).all()
    ok = df[df["outcome"] == "ok"].sort_values("started_at")
    assert len(ok) == 10
    # at most `burst` right away, then no faster than the refill rate
    starts = ok["started_at"].to_list()
    assert sum(1 for s in starts if s == 0.0) == 2
    assert starts[-1] >= (10 - 2) / 5.0 - 1e-9

    wished = simulate_contention(
        10, "full", "token_bucket", rate=5.0, seed=0, send_retry_after=True
    )
    waits = wished[wished["delay_s"].notna()]
    assert (waits["delay_s"] == waits["retry_after_s"]).all()
    assert not math.isnan(waits["retry_after_s"].iloc[0])


def test_give_up_after_max_attempts() -> None:
    policy = RetryPolicy(max_attempts=2, initial_delay=0.1)
    df = simulate_contention(6, None, policy=policy, seed=0)
    last = df.groupby("run_id").tail(1)
    assert (last["outcome"] == "error").sum() == 4
    assert (last[last["outcome"] == "error"]["action"] == "fail").all()
    assert compare_jitter(6, [None], policy=policy).loc[0, "gave_up"] == 4
