"""The one attempt loop: try, decide, announce, wait, try again.

Model requests, summary requests for compaction, and `RetryPolicy.call` / `acall` all run
through `AttemptLoop`. For each attempt it

1. numbers it and announces it (`AttemptStarted`);
2. asks the pacer, if any, whether the request may go now (`Pacer.acquire`; a wait it takes is
   a `PacedWait`; a wait too long to take fails the attempt as a rate limit, nothing sent);
3. runs the attempt; on success tells the pacer and announces it (`AttemptSucceeded`);
4. on failure asks `decide` (the one decision) what happens next, asks the pacer's retry budget
   before a retry, announces the failure and the decision (`AttemptFailed`, then
   `RetryScheduled` before the wait, so a widget can count down), and carries it out: wait on
   the clock and try again; compact (through the caller's `compact`) and try again; hand over to
   the next model (`Fallback`); hand a structured answer off its schema back to the caller to
   reask (`Reask`: the next attempt is a new request with the errors in it, so its attempts
   count from one again and a transport retry after a reask has every retry it would have had);
   send the structured output in its next form at once, after the server refused this one
   (`reform`, in `output_mode="auto"`); or raise the error.

Cancellation is never retried: the attempt is announced as cancelled and the cancellation goes
on. A failed attempt changes nothing the caller owns: the caller's `attempt(n)` builds its
request from the caller's state, which only compaction changes.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields
from typing import Any, TypedDict, TypeVar

from ..errors import (
    Aborted,
    Action,
    ContextOverflow,
    OutputInvalid,
    ProviderError,
    classify,
)
from ._budget import Usage
from ._clock import Clock, RealClock
from ._decision import AttemptState, Decision, Failure, OnRetry, Table, decide
from ._event_types import (
    AttemptFailed,
    AttemptPhase,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    PacedWait,
    RetryScheduled,
)
from ._pacing import Pacer, PaceRequest
from ._policy import Policy

T = TypeVar("T")
Emit = Callable[[Event], None]
Compact = Callable[[ContextOverflow], Awaitable[bool]]
"""Shorten the conversation after an overflow; False when nothing can be shed."""
Reform = Callable[[BaseException], str]
"""After a failure, switch the structured output to its next form if the server refused this
one, and say so ("" when it did not, or no form is left)."""


@dataclass(frozen=True)
class Sent:
    """What a successful attempt reports: for its `AttemptSucceeded` and for the pacer."""

    usage: Usage = field(default_factory=Usage)
    request_id: str | None = None
    response_id: str | None = None
    ttft_s: float | None = None
    stop_reason: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    message: str = ""  # a note on how the reply was read, for the attempt log
    status_code: int | None = None  # the HTTP status of the answer, when it came over HTTP


class AttemptFailure(Exception):
    """An attempt failed with `error` after streaming `text`/`thinking` (now discarded).

    `answered` is what the provider's answer reported when one did arrive and was refused
    afterwards (a structured answer off its schema, or cut at max_tokens): the request went
    through (the pacer hears so), and its usage is the attempt's cost."""

    def __init__(
        self,
        error: BaseException,
        *,
        text: str = "",
        thinking: str = "",
        ttft_s: float | None = None,
        answered: Sent | None = None,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.text = text
        self.thinking = thinking
        self.ttft_s = ttft_s
        self.answered = answered


class Fallback(Exception):
    """The decision is to go on with the next model of the chain; `error` is why."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(str(error))
        self.error = error


class Reask(Exception):
    """The decision is to reask: `error` (an `OutputInvalid`) goes back to the model in a new
    request, which the caller builds."""

    def __init__(self, error: OutputInvalid) -> None:
        super().__init__(str(error))
        self.error = error


def generic_table(should_retry: Callable[[Exception], bool] | None) -> Table:
    """The table for `RetryPolicy.call`: `should_retry`, else `classify`'s retry row (a call
    that must not happen twice is the loop's `idempotent=False`)."""

    def table(exc: BaseException) -> Action:
        if isinstance(exc, (Aborted, asyncio.CancelledError)) or not isinstance(exc, Exception):
            return Action.FAIL
        if should_retry is not None:
            return Action.RETRY if should_retry(exc) else Action.FAIL
        return Action.RETRY if classify(exc) is Action.RETRY else Action.FAIL

    return table


@dataclass
class AttemptLoop:
    """One logical request under `policy`: see the module docstring.

    `emit` receives the events (the agent stamps and delivers them); without it nothing is
    announced (`RetryPolicy.call`). `model` and `phase` label the events. `deadline` is on
    `clock`. `compactions_left` is how often the caller may still compact; `can_fall_back`
    whether a next model exists; `reasks_left` how often a structured answer may still be
    reasked; `table` maps errors to actions (`classify` for model requests); `idempotent`
    False for a request that must not happen twice (retried only when `may_have_reached`
    says it did not arrive). `state` is what the attempts carry, stepped by `decide`.
    """

    policy: Policy
    _: KW_ONLY
    clock: Clock = field(default_factory=RealClock)
    emit: Emit | None = None
    phase: AttemptPhase = "request"
    model: str = ""
    provider: str = ""
    rng: random.Random | None = None
    deadline: float | None = None
    pacer: Pacer | None = None
    compactions_left: int = 0
    can_fall_back: bool = False
    reasks_left: int = 0
    table: Table = classify
    on_retry: OnRetry | None = None
    idempotent: bool = True
    state: AttemptState = field(default_factory=AttemptState, init=False)

    def __post_init__(self) -> None:
        if self.rng is None:
            self.rng = self.policy.rng()

    # -- the drivers ----------------------------------------------------------------------

    async def run(
        self,
        attempt: Callable[[int], Awaitable[T]],
        *,
        describe: Callable[[T], Sent] | None = None,
        compact: Compact | None = None,
        reform: Reform | None = None,
    ) -> T:
        """Run `attempt(n)` until it succeeds or the decision is final; returns its result.

        Raises the final error, `Fallback` when the next model should take over, `Reask` when
        a structured answer should be asked for again, or `CancelledError` when cancelled.
        `describe(result)` says what the success reports; `reform(error)` switches a refused
        output form (its sentence goes to the failure's row).
        """
        while True:
            n = self._begin()
            paced = False
            try:
                if self.pacer is not None:
                    paced = True
                    ask = PaceRequest(
                        self.deadline, self.policy.max_retry_after, self.provider, self._waiting
                    )
                    await self.pacer.acquire(self.clock, ask)
                    paced = False
                result = await attempt(n)
            except asyncio.CancelledError:
                self._cancelled(n)
                raise
            except Exception as exc:
                failure = _as_failure(exc)
                form = reform(failure.error) if reform is not None else ""
                decision = self._failed(n, failure, paced=paced, other_form=form)
                if decision.action == "retry":
                    assert decision.plan is not None
                    await self.clock.sleep(decision.plan.delay_s)
                    continue
                if decision.action == "compact" and compact is not None:
                    assert isinstance(decision.error, ContextOverflow)
                    if await compact(decision.error):
                        continue
                if decision.action == "fallback":
                    raise Fallback(decision.error) from None
                if decision.action == "reask":
                    assert isinstance(decision.error, OutputInvalid)
                    raise Reask(decision.error) from None
                if decision.error is exc:
                    raise
                raise decision.error from None
            sent = describe(result) if describe is not None else Sent()
            self._succeeded(n, sent)
            return result

    def run_sync(self, attempt: Callable[[int], T], sleep: Callable[[float], None]) -> T:
        """The synchronous driver (`RetryPolicy.call`): no pacer, no compaction, no fallback."""
        while True:
            n = self._begin()
            try:
                result = attempt(n)
            except Exception as exc:
                decision = self._failed(n, _as_failure(exc), paced=False)
                if decision.action == "retry":
                    assert decision.plan is not None
                    sleep(decision.plan.delay_s)
                    continue
                if decision.error is exc:
                    raise
                raise decision.error from exc
            self._succeeded(n, Sent())
            return result

    # -- the steps ------------------------------------------------------------------------

    def _labels(self, n: int) -> dict[str, Any]:
        """What every event of attempt `n` says of its attempt (`AttemptEvent`'s fields)."""
        return {
            "phase": self.phase,
            "attempt": n,
            "max_attempts": self.policy.max_attempts,
            "model": self.model,
        }

    def _begin(self) -> int:
        self.state = self.state.begin()
        if self.emit is not None:
            self.emit(AttemptStarted(**self._labels(self.state.attempt)))
        return self.state.attempt

    def _waiting(self, delay: float, reason: str) -> None:
        if self.emit is not None:
            self.emit(PacedWait(delay_s=delay, model=self.model, reason=reason))

    def _succeeded(self, n: int, sent: Sent) -> None:
        if self.pacer is not None:
            self.pacer.succeeded(self.clock.now(), sent.headers)
        if self.emit is not None:
            self.emit(
                AttemptSucceeded(
                    **self._labels(n),
                    **usage_fields(sent.usage),
                    # the rest of what `Sent` says `AttemptSucceeded` names alike
                    **{k: v for k, v in vars(sent).items() if k not in ("usage", "headers")},
                )
            )

    def _cancelled(self, n: int) -> None:
        if self.emit is not None:
            self.emit(
                AttemptFailed(
                    **self._labels(n),
                    error="Aborted",
                    message="cancelled",
                    action="fail",
                    cancelled=True,
                )
            )

    def _failed(
        self, n: int, failure: AttemptFailure, *, paced: bool, other_form: str = ""
    ) -> Decision:
        """Decide about a failed attempt, tell the pacer, announce both; returns the decision."""
        err = failure.error
        if self.pacer is not None and not paced:
            if failure.answered is not None:  # the request went through; its answer did not
                self.pacer.succeeded(self.clock.now(), failure.answered.headers)
            else:
                self.pacer.failed(self.clock.now(), err)
        facts = Failure(
            err,
            self.state,
            discarded_text=failure.text,
            discarded_thinking=failure.thinking,
            time_left=None if self.deadline is None else self.deadline - self.clock.now(),
            max_compactions=self.compactions_left,
            can_fall_back=self.can_fall_back,
            max_reasks=self.reasks_left,
            other_form=other_form,
            idempotent=self.idempotent,
        )
        decision = decide(facts, self.policy, rng=self.rng, table=self.table)
        if (
            decision.action == "retry"
            and self.pacer is not None
            and not paced
            and not self.pacer.allow_retry(decision.error)
        ):
            facts = dataclasses.replace(facts, budget_spent=True)
            decision = decide(facts, self.policy, rng=self.rng, table=self.table)
        self._announce_failure(n, failure, decision)
        if decision.action != "reask":  # a reask leaves the loop: the caller asks anew
            self.state = decision.state
        if decision.action == "retry":
            self._announce_retry(n, failure, decision)
        return decision

    def _announce_failure(self, n: int, failure: AttemptFailure, decision: Decision) -> None:
        if self.emit is None:
            return
        said = error_fields(decision.error)
        if decision.why:
            said["message"] += f" ({decision.why})"
        issues: tuple[str, ...] = ()
        if isinstance(decision.error, OutputInvalid):
            issues = tuple(str(e) for e in decision.error.errors)
        answered = failure.answered
        usage = usage_fields(answered.usage) if answered is not None else {}
        if answered is not None:  # the answer came with a 200 (and its request id)
            said["status_code"] = said["status_code"] or 200
            said["request_id"] = said["request_id"] or answered.request_id
        self.emit(
            AttemptFailed(
                **self._labels(n),
                **said,
                **usage,
                **_discarded(failure),
                action=decision.action,
                output_errors=issues,
            )
        )

    def _announce_retry(self, n: int, failure: AttemptFailure, decision: Decision) -> None:
        plan = decision.plan
        assert plan is not None
        if self.on_retry is not None:
            self.on_retry(n, decision.error, plan)
        if self.emit is None:
            return
        said = error_fields(decision.error)
        said["retry_after_s"] = plan.retry_after_s
        self.emit(
            RetryScheduled(
                **self._labels(n),
                **said,
                next_attempt=n + 1,
                delay_s=plan.delay_s,
                policy_delay_s=plan.policy_delay_s,
                discarded_text=failure.text,
                discarded_thinking=failure.thinking,
            )
        )


def usage_fields(usage: Usage) -> dict[str, Any]:
    """The token and cost fields of an attempt's events, from a `Usage` (which names them alike:
    all but its count of requests)."""
    return {f.name: getattr(usage, f.name) for f in fields(usage) if f.name != "requests"}


class _Discarded(TypedDict):
    """What a failed attempt had streamed before it failed, and when it began to."""

    ttft_s: float | None
    discarded_text: str
    discarded_thinking: str


def _discarded(failure: AttemptFailure) -> _Discarded:
    return _Discarded(
        ttft_s=failure.ttft_s, discarded_text=failure.text, discarded_thinking=failure.thinking
    )


def error_fields(err: BaseException) -> dict[str, Any]:
    """What an attempt's events say of an error (a provider batch item's too): its kind and
    sentence, never the object (or its secrets)."""
    p = err if isinstance(err, ProviderError) else None
    # an answer off its schema is told by its first error (the attempt log's message)
    message = err.first if isinstance(err, OutputInvalid) else str(err)
    return {
        "error": type(err).__name__,
        "message": message,
        "status_code": p.status_code if p else None,
        "request_id": p.request_id if p else None,
        "retry_after_s": p.retry_after if p else None,
    }


def _as_failure(exc: Exception) -> AttemptFailure:
    return exc if isinstance(exc, AttemptFailure) else AttemptFailure(exc)
