"""`decide`: the one decision about a failed attempt, as a pure function of its facts."""

from __future__ import annotations

import random

import pytest

from nbagent import errors as E
from nbagent._core._decision import AttemptState, Failure, decide, may_have_reached
from nbagent._core._retry import RetryPolicy

POLICY = RetryPolicy(max_attempts=4, initial_delay=1.0, jitter=None, max_retry_after=60)


def test_a_retryable_error_is_retried_after_the_backoff() -> None:
    d = decide(Failure(E.ServerError("503", status_code=503), AttemptState(2)), POLICY)
    assert d.action == "retry" and d.plan is not None
    assert (d.plan.delay_s, d.plan.policy_delay_s, d.plan.retry_after_s) == (2.0, 2.0, None)
    assert d.why == ""


def test_the_servers_wish_replaces_the_backoff_and_is_not_jittered() -> None:
    policy = RetryPolicy(jitter="full", seed=3)
    d = decide(Failure(E.RateLimited("429", retry_after=7.5), AttemptState(1)), policy)
    assert d.action == "retry" and d.plan is not None and d.plan.delay_s == 7.5
    assert d.plan.retry_after_s == 7.5


def test_a_wish_beyond_max_retry_after_becomes_a_final_quota_error() -> None:
    err = E.RateLimited("429", provider="anthropic", retry_after=6300)
    d = decide(Failure(err, AttemptState(1)), POLICY)
    assert d.action == "fail"
    assert isinstance(d.error, E.QuotaExceeded)
    assert str(d.error).startswith("Anthropic rate limit reached. Resets in 1 h 45 min.")


def test_no_attempt_left_is_final() -> None:
    d = decide(Failure(E.Overloaded("529"), AttemptState(4)), POLICY)
    assert d.action == "fail" and d.plan is None


def test_a_wait_past_the_deadline_is_not_taken() -> None:
    assert (
        decide(Failure(E.ServerError("x"), AttemptState(1), time_left=0.5), POLICY).action == "fail"
    )
    assert (
        decide(Failure(E.ServerError("x"), AttemptState(1), time_left=1.5), POLICY).action
        == "retry"
    )


def test_a_spent_retry_budget_makes_it_final_and_says_why() -> None:
    d = decide(Failure(E.ServerError("x"), AttemptState(1), budget_spent=True), POLICY)
    assert d.action == "fail" and "retry budget" in d.why


def test_an_empty_reply_is_retried_once() -> None:
    first = decide(Failure(E.EmptyResponse("empty"), AttemptState(1)), POLICY)
    again = decide(Failure(E.EmptyResponse("empty"), AttemptState(2, empty_replies=1)), POLICY)
    assert (first.action, again.action) == ("retry", "fail")


@pytest.mark.parametrize(
    ("mode", "text", "thinking", "action"),
    [
        ("always", "partial", "", "retry"),
        ("never", "partial", "", "fail"),
        ("never", "", "thought", "fail"),
        ("reasoning_only", "", "thought", "retry"),
        ("reasoning_only", "partial", "", "fail"),
    ],
)
def test_what_streamed_before_the_failure_may_forbid_a_retry(
    mode: str, text: str, thinking: str, action: str
) -> None:
    policy = RetryPolicy(retry_after_partial=mode)  # type: ignore[arg-type]
    facts = Failure(
        E.StreamInterrupted("cut"),
        AttemptState(1),
        discarded_text=text,
        discarded_thinking=thinking,
    )
    assert decide(facts, policy).action == action


def test_an_overflow_compacts_while_the_step_may_compact() -> None:
    err = E.ContextOverflow("prompt is too long")
    assert decide(Failure(err, AttemptState(1), max_compactions=1), POLICY).action == "compact"
    assert decide(Failure(err, AttemptState(1), max_compactions=0), POLICY).action == "fail"


@pytest.mark.parametrize(
    "err",
    [E.AuthFailed("401"), E.BadRequest("400"), E.ContentFiltered("x"), E.InvalidResponse("x")],
)
def test_final_errors_fail_and_do_not_fall_back(err: E.ProviderError) -> None:
    assert decide(Failure(err, AttemptState(1), can_fall_back=True), POLICY).action == "fail"


def test_a_missing_model_or_a_spent_retry_falls_back_when_a_next_model_exists() -> None:
    missing = Failure(E.ModelNotFound("404"), AttemptState(1), can_fall_back=True)
    spent = Failure(E.ServerError("503"), AttemptState(4), can_fall_back=True)
    assert decide(missing, POLICY).action == "fallback"
    assert decide(spent, POLICY).action == "fallback"
    assert decide(Failure(E.ServerError("503"), AttemptState(4)), POLICY).action == "fail"


def test_x_should_retry_overrides_the_table() -> None:
    told = E.BadRequest("400", should_retry=True)
    refused = E.ServerError("503", should_retry=False)
    assert decide(Failure(told, AttemptState(1)), POLICY).action == "retry"
    assert decide(Failure(refused, AttemptState(1)), POLICY).action == "fail"


def test_cancellation_is_never_retried() -> None:
    assert decide(Failure(E.Aborted("stop"), AttemptState(1)), POLICY).action == "fail"


def test_it_is_pure_given_the_same_random_state() -> None:
    policy = RetryPolicy(jitter="full")
    facts = Failure(E.ServerError("x"), AttemptState(3))
    one = decide(facts, policy, rng=random.Random(5))
    two = decide(facts, policy, rng=random.Random(5))
    assert one == two


def test_decorrelated_jitter_grows_from_the_previous_wait() -> None:
    policy = RetryPolicy(jitter="decorrelated", initial_delay=1.0, max_delay=20.0)
    rng = random.Random(0)
    previous = None
    for attempt in range(1, 4):
        d = decide(
            Failure(E.ServerError("x"), AttemptState(attempt, previous_delay=previous)),
            policy,
            rng=rng,
        )
        assert d.plan is not None
        low, high = 1.0, min(20.0, 3 * (previous or 1.0))
        assert low <= d.plan.delay_s <= high
        previous = d.plan.delay_s


def test_an_answer_off_its_schema_is_reasked_while_output_retries_allows() -> None:
    err = E.OutputInvalid([E.OutputIssue("age", "Input should be a valid integer")])
    assert decide(Failure(err, AttemptState(1), max_reasks=2), POLICY).action == "reask"
    spent = decide(Failure(err, AttemptState(1), max_reasks=0), POLICY)
    assert spent.action == "fail" and "output_retries" in spent.why
    # a reask is never a fallback: the next model would get the same schema
    assert decide(Failure(err, AttemptState(1), can_fall_back=True), POLICY).action == "fail"


def test_a_truncated_answer_and_a_rejected_schema_fail_at_once() -> None:
    for err in (E.OutputTruncated(100, 100), E.SchemaRejected("bad", status_code=400)):
        d = decide(Failure(err, AttemptState(1), max_reasks=2, can_fall_back=True), POLICY)
        assert d.action == "fail"


def test_a_refused_form_with_another_to_send_is_sent_again_at_once() -> None:
    # output_mode="auto" after the server refused the native form: no wait, even on the last
    # attempt, and the row says what is sent next; any other error ignores the fact
    rejected = E.SchemaRejected("response_format.type: Input should be ...", status_code=500)
    then = "output_mode=auto: native refused by the server; trying tool"
    d = decide(Failure(rejected, AttemptState(4), other_form=then), POLICY)
    assert d.action == "retry" and d.plan is not None and d.plan.delay_s == 0.0
    assert d.why == then
    other = decide(
        Failure(E.BadRequest("bad", status_code=400), AttemptState(1), other_form=then), POLICY
    )
    assert other.action == "fail"


def test_the_decision_steps_the_attempt_state() -> None:
    retried = decide(Failure(E.EmptyResponse("empty"), AttemptState(1)), POLICY)
    assert retried.state == AttemptState(1, empty_replies=1, previous_delay=retried.plan.delay_s)
    assert retried.state.begin().attempt == 2
    err = E.OutputInvalid([E.OutputIssue("$.x", "missing")], "{}")
    reasked = decide(Failure(err, AttemptState(3, compactions=1), max_reasks=2), POLICY)
    assert reasked.state == AttemptState(0, reasks=1, compactions=1)  # a new question
    final = decide(Failure(err, reasked.state.begin(), max_reasks=1), POLICY)
    assert final.action == "fail"
    assert "after 1 reask" in str(final.error)  # the final error says how many came before
    overflow = decide(Failure(E.ContextOverflow("long"), max_compactions=1), POLICY)
    assert overflow.state.compactions == 1
    assert AttemptState.from_json(reasked.state.to_json()) == reasked.state


def test_a_request_that_may_have_arrived_is_not_sent_twice() -> None:
    assert may_have_reached(E.ServerError("503", status_code=503))
    assert may_have_reached(E.TransportError("reset"))
    assert may_have_reached(E.StreamInterrupted("cut"))
    assert may_have_reached(ValueError("user code"))
    assert not may_have_reached(E.RateLimited("429", status_code=429))
    assert not may_have_reached(E.BadRequest("400", status_code=400))
    once = Failure(E.ServerError("503", status_code=503), idempotent=False)
    d = decide(once, POLICY)
    assert d.action == "fail" and "only after a 429" in d.why
    again = decide(Failure(E.RateLimited("429", retry_after=1.0), idempotent=False), POLICY)
    assert again.action == "retry"
