"""What a failed attempt leads to: the one decision, as a pure function.

`classify` (nbagent.errors) is the table: an error's kind gives one of the four actions. `decide`
applies it to one failure in its situation and says what happens next:

    escalate    a rate limit whose reset is beyond max_retry_after becomes QuotaExceeded
    classify    the table: retry, compact, fail (x-should-retry overrides it)
    retry  ->   fail when the retry budget is spent, the empty reply came again, part of the
                reply had streamed and the policy forbids retrying then, no attempt is left,
                the server's wish is beyond max_retry_after, or the wait would pass the deadline;
                else the plan: how long to wait (the server's wish, or the jittered backoff)
    compact ->  fail when this step has compacted as often as it may
    reask  ->   fail when the reasks `output_retries` allows are spent (a structured answer off
                its schema: the errors go back to the model, the next attempt is a new request)
    reform      a server refusing the output's form (`SchemaRejected`) while `output_mode="auto"`
                has another form to send: retry at once, with that form
    fail   ->   fallback to the next model of the chain, for a missing model or a failure that
                retrying could have fixed (a spent retry is worth another model)

The attempt loop (`_attempts.AttemptLoop`) is the only caller in the agent; it brings the facts
(attempt number, time left, what streamed, what the budget says) and carries the decision out.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from ..errors import Action, EmptyResponse, ModelNotFound, ProviderError, SchemaRejected, classify

if TYPE_CHECKING:
    from ._retry import RetryPolicy

__all__ = ["Decision", "Failure", "RetryPlan", "Table", "decide"]

Table = Callable[[BaseException], Action]
"""Error -> action. `classify` for model requests; `RetryPolicy.call` brings its own."""

Next = Literal["retry", "compact", "reask", "fallback", "fail"]


@dataclass(frozen=True)
class RetryPlan:
    """One scheduled retry (what `RetryPolicy.plan` returns and `on_retry` is told).

    Attributes:
        delay_s: The wait to take, in seconds: the server's wish when it gave one, else the
            policy's delay.
        policy_delay_s: What the backoff with jitter alone said, in seconds.
        retry_after_s: The server's wish in seconds, or None.
    """

    delay_s: float
    policy_delay_s: float
    retry_after_s: float | None


@dataclass(frozen=True)
class Failure:
    """The facts of one failed attempt that the decision depends on."""

    error: BaseException
    attempt: int
    discarded_text: str = ""
    discarded_thinking: str = ""
    time_left: float | None = None  # seconds to the run's deadline
    previous_delay: float | None = None  # the wait taken before this attempt
    empty_retries: int = 0  # empty replies retried so far in this request
    compactions_left: int = 0  # how often this step may still compact
    can_fall_back: bool = False  # a next model is there
    budget_spent: bool = False  # the retry budget refused to pay for a retry
    reasks_left: int = 0  # how many more times a structured answer may be reasked
    other_form: str = ""  # the output form auto sends next after a refusal of this one


@dataclass(frozen=True)
class Decision:
    """What happens next. `error` is the error as decided about (possibly escalated); `plan`
    the wait when the action is "retry"; `why` says what overrode the table, if anything."""

    action: Next
    error: BaseException
    plan: RetryPlan | None = None
    why: str = ""


def decide(
    failure: Failure,
    policy: RetryPolicy,
    *,
    rng: random.Random | None = None,
    table: Table = classify,
) -> Decision:
    """The decision about `failure` under `policy` (see the module docstring).

    Args:
        failure: The facts of the failed attempt.
        policy: The retry policy in force.
        rng: The random source of the jitter (the policy's own when None).
        table: Error -> action; `classify` for model requests.

    Returns:
        What happens next, with the error as decided about and the wait when it is a retry.
    """
    err = failure.error
    if failure.other_form and isinstance(err, SchemaRejected):
        return Decision("retry", err, RetryPlan(0.0, 0.0, None), failure.other_form)
    if isinstance(err, ProviderError):
        err = policy.escalate(err)
    action = table(err)
    why = ""
    plan = None
    if action is Action.RETRY:
        if failure.budget_spent:
            action, why = Action.FAIL, "retry budget exhausted: too many failures lately"
        elif isinstance(err, EmptyResponse) and failure.empty_retries >= policy.max_empty_retries:
            action, why = Action.FAIL, "the reply was empty again"
        elif _partial_forbids_retry(policy, failure):
            action, why = Action.FAIL, "part of the reply had streamed"
        else:
            plan = policy.plan(
                err,
                failure.attempt,
                rng=rng,
                time_left=failure.time_left,
                previous=failure.previous_delay,
            )
            if plan is None:
                action = Action.FAIL
    if action is Action.COMPACT and failure.compactions_left <= 0:
        action = Action.FAIL
    if action is Action.REASK and failure.reasks_left <= 0:
        action, why = Action.FAIL, "the reasks output_retries allows are spent"
    if (
        action is Action.FAIL
        and failure.can_fall_back
        and (isinstance(err, ModelNotFound) or table(err) is Action.RETRY)
    ):
        return Decision("fallback", err, None, why)
    if action is Action.RETRY:
        return Decision("retry", err, plan, why)
    if action is Action.COMPACT:
        return Decision("compact", err, None, why)
    if action is Action.REASK:
        return Decision("reask", err, None, why)
    return Decision("fail", err, None, why)


def _partial_forbids_retry(policy: RetryPolicy, failure: Failure) -> bool:
    mode = policy.retry_after_partial
    if mode == "never":
        return bool(failure.discarded_text or failure.discarded_thinking)
    if mode == "reasoning_only":
        return bool(failure.discarded_text)
    return False
