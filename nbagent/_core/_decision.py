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

What one request carries from attempt to attempt is one small value, `AttemptState` (attempt
number, empty replies, reasks, compactions, the previous wait); `decide` steps it (the decision's
`state`), and both the live attempt loop (`_attempts.AttemptLoop`) and a provider batch's
resubmission (`batch._provider_items`, which keeps it in its state file) carry the decision out
with it. `may_have_reached` says whether a failed request may have done its work at the server:
a request that must not happen twice (`Failure.idempotent=False`) is never retried then.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..errors import (
    Action,
    EmptyResponse,
    ModelNotFound,
    OutputInvalid,
    Overloaded,
    ProviderError,
    RateLimited,
    SchemaRejected,
    ServerError,
    classify,
)
from ._event_types import FailureAction
from ._policy import Policy, RetryPlan

Table = Callable[[BaseException], Action]
"""Error -> action. `classify` for model requests; `RetryPolicy.call` brings its own."""

OnRetry = Callable[[int, BaseException, RetryPlan], None]
"""Told `(attempt, error, plan)` before each wait of `RetryPolicy.call` / `acall`."""


@dataclass(frozen=True)
class AttemptState:
    """What one request carries from one attempt to the next; `decide` steps it.

    Attributes:
        attempt: The attempt that failed (counting from 1; 0 before the first). A reask asks
            anew, so its attempts count from one again.
        empty_replies: Empty replies retried so far for the current question.
        reasks: Reasks so far (a structured answer off its schema asked for again).
        compactions: Compactions so far.
        previous_delay: The wait taken before this attempt, in seconds.
    """

    attempt: int = 0
    empty_replies: int = 0
    reasks: int = 0
    compactions: int = 0
    previous_delay: float | None = None

    def begin(self) -> AttemptState:
        """The state of the next attempt."""
        return replace(self, attempt=self.attempt + 1)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in vars(self).items() if v}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> AttemptState:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class Failure:
    """The facts of one failed attempt that the decision depends on."""

    error: BaseException
    state: AttemptState = AttemptState(1)
    discarded_text: str = ""
    discarded_thinking: str = ""
    time_left: float | None = None  # seconds to the run's deadline
    max_compactions: int = 0  # how often this step may compact in all
    can_fall_back: bool = False  # a next model is there
    budget_spent: bool = False  # the retry budget refused to pay for a retry
    max_reasks: int = 0  # how often a structured answer may be reasked in all
    other_form: str = ""  # the output form auto sends next after a refusal of this one
    idempotent: bool = True  # False: sending it twice could do its work twice


@dataclass(frozen=True)
class Decision:
    """What happens next. `error` is the error as decided about (possibly escalated); `plan`
    the wait when the action is "retry"; `why` says what overrode the table, if anything;
    `state` what the request carries to its next attempt."""

    action: FailureAction  # what its `AttemptFailed` says as its `action`
    error: BaseException
    plan: RetryPlan | None = None
    why: str = ""
    state: AttemptState = AttemptState()


def may_have_reached(err: BaseException) -> bool:
    """Whether the request that failed with `err` may have reached the server and done its
    work there. Only an answer that says it was turned away proves it did not: a 429, an
    overload, another 4xx. A lost connection, a timeout, a 5xx, a broken stream, any other
    exception: it may have."""
    if isinstance(err, (RateLimited, Overloaded)):
        return False
    if isinstance(err, ProviderError) and not isinstance(err, ServerError):
        status = err.status_code
        return not (status is not None and 400 <= status < 500)
    return True


_NOT_TWICE = "not sent again: it could do its work twice; retried only after a 429"


def decide(
    failure: Failure,
    policy: Policy,
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
    err, state = failure.error, failure.state
    if failure.other_form and isinstance(err, SchemaRejected):
        at_once = RetryPlan(0.0, 0.0, None)
        after = replace(state, previous_delay=0.0)
        return Decision("retry", err, at_once, failure.other_form, after)
    if isinstance(err, ProviderError):
        err = policy.escalate(err)
    action = table(err)
    why = ""
    plan: RetryPlan | None = None
    if action is Action.RETRY:
        action, why, plan = _retry(err, failure, policy, rng)
    if action is Action.COMPACT and state.compactions >= failure.max_compactions:
        action = Action.FAIL
    if action is Action.REASK and state.reasks >= failure.max_reasks:
        action, why = Action.FAIL, "the reasks output_retries allows are spent"
    if (
        action is Action.FAIL
        and failure.can_fall_back
        and (isinstance(err, ModelNotFound) or table(err) is Action.RETRY)
    ):
        return Decision("fallback", err, None, why, state)
    if action is Action.RETRY:
        assert plan is not None
        empty = state.empty_replies + isinstance(err, EmptyResponse)
        after = replace(state, empty_replies=empty, previous_delay=plan.delay_s)
        return Decision("retry", err, plan, why, after)
    if action is Action.COMPACT:
        return Decision(
            "compact", err, None, why, replace(state, compactions=state.compactions + 1)
        )
    if action is Action.REASK:  # a new question: its attempts count from one again
        after = AttemptState(reasks=state.reasks + 1, compactions=state.compactions)
        return Decision("reask", err, None, why, after)
    if isinstance(err, OutputInvalid) and state.reasks:  # the final error says how many came
        err = err.with_reasks(state.reasks)
    return Decision("fail", err, None, why, state)


def _retry(
    err: BaseException, failure: Failure, policy: Policy, rng: random.Random | None
) -> tuple[Action, str, RetryPlan | None]:
    """Whether a retry the table asks for is taken, why not, and its wait."""
    state = failure.state
    if failure.budget_spent:
        return Action.FAIL, "retry budget exhausted: too many failures lately", None
    if isinstance(err, EmptyResponse) and state.empty_replies >= policy.max_empty_retries:
        return Action.FAIL, "the reply was empty again", None
    if _partial_forbids_retry(policy, failure):
        return Action.FAIL, "part of the reply had streamed", None
    if not failure.idempotent and may_have_reached(err):
        return Action.FAIL, _NOT_TWICE, None
    plan = policy.plan(
        err, state.attempt, rng=rng, time_left=failure.time_left, previous=state.previous_delay
    )
    return (Action.FAIL if plan is None else Action.RETRY), "", plan


def _partial_forbids_retry(policy: Policy, failure: Failure) -> bool:
    mode = policy.retry_after_partial
    if mode == "never":
        return bool(failure.discarded_text or failure.discarded_thinking)
    if mode == "reasoning_only":
        return bool(failure.discarded_text)
    return False
