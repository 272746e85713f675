"""Exchanges in, the agent's typed events out: one logical call and its attempts.

Each HTTP attempt the watched client sends becomes `AttemptStarted` and then `AttemptSucceeded`
or `AttemptFailed`; a logical call (the SDK's first attempt and its retries) is a run, from
`RunStarted` to `RunFinished`. Attempts belong together when the SDK numbers them
(`x-stainless-retry-count`) or, for other clients, when the same request is sent again after a
failure; either way only within one thread or task (a context variable remembers the call in
flight there), so concurrent calls never mix. A failure the SDK will retry is followed by an
`SDKRetryScheduled` with the wait the SDK's rule gives; the wait it really took is measured
when the next attempt arrives (`CallLog.waits`).

`nbagent_action` is what nbagent would have done with the same failure: `decide` under the
default `RetryPolicy`.
"""

from __future__ import annotations

import contextvars
import itertools
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .._core._budget import Usage
from .._core._decision import Failure, decide
from .._core._retry import RetryPolicy
from ..errors import Aborted, ProviderError
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    Event,
    EventBus,
    RunFinished,
    RunStarted,
    SDKRetryScheduled,
    Stamp,
)
from ..providers._pricing import estimate_cost
from ._reading import Ending, ReplyReader, RequestFacts, read_request, transport_failure
from ._sdk import SdkRules
from ._transport import StreamClosed

__all__ = ["CallLog"]

_POLICY = RetryPolicy()


@dataclass
class _Call:
    run_id: str
    facts: RequestFacts
    attempts: int = 0
    open: bool = True
    failed_at: float | None = (
        None  # the end of the last attempt, when it failed and the SDK retries
    )
    usage: Usage = field(default_factory=Usage)


@dataclass
class _Cell:
    call: _Call | None = None


class _Attempt:
    """One exchange, as the watcher hears it (an `Exchange` of `_transport`)."""

    __slots__ = ("_log", "call", "facts", "n", "reader", "started", "status", "ttft")

    def __init__(self, log: CallLog, call: _Call, facts: RequestFacts, n: int, t: float) -> None:
        self._log = log
        self.call = call
        self.facts = facts
        self.n = n
        self.started = t
        self.reader: ReplyReader | None = None
        self.status: int | None = None
        self.ttft: float | None = None

    def response(self, status: int, headers: Any, t: float) -> None:
        self.status = status
        self.reader = ReplyReader(self.facts, status, headers)

    def chunk(self, data: bytes, t: float) -> None:
        if self.ttft is None:
            self.ttft = t - self.started
        reader = self.reader
        if reader is not None:
            reader.feed(data)

    def end(self, error: BaseException | None, t: float) -> None:
        self._log.attempt_ended(self, self._ending(error), t)

    def _ending(self, error: BaseException | None) -> tuple[Ending, bool]:
        reader = self.reader
        if isinstance(error, StreamClosed):
            if reader is not None:
                ending = reader.ending()
                # an error answer the SDK closed unread (it retries without reading the body)
                # is read from its status and headers; a reply read to its end is whole
                if ending.error is None or reader.status >= 300:
                    return ending, False
            return Ending(error=Aborted(f"{error}")), True
        if error is not None:
            err = transport_failure(error, self.facts, after_response=reader is not None)
            return Ending(error=err), isinstance(err, Aborted)
        assert reader is not None
        return reader.ending(), False


class CallLog:
    """Groups a watched client's exchanges into calls and emits their events on `bus`.

    `waits` maps (run_id, attempt) to the wait the SDK took after that attempt; `nbagent_actions`
    maps it to what nbagent would have done. Emission is serialised: a client used from many
    threads still gives one ordered stream.
    """

    def __init__(
        self,
        bus: EventBus,
        rules: SdkRules,
        *,
        name: str,
        now: Callable[[], float],
        after_wait: Callable[[tuple[str, int], float], None] | None = None,
    ) -> None:
        self.bus = bus
        self.rules = rules
        self.name = name
        self.now = now
        self.after_wait = after_wait
        self.waits: dict[tuple[str, int], float] = {}
        self.nbagent_actions: dict[tuple[str, int], str] = {}
        self.reasons: dict[tuple[str, int], str] = {}
        self._current: contextvars.ContextVar[_Cell | None] = contextvars.ContextVar(
            f"nbagent_watch_{name}", default=None
        )
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._rng = random.Random(0)
        self._open: dict[str, _Call] = {}

    def settle(self) -> None:
        """End every call still waiting for a retry that never came (the watch is over)."""
        with self._lock:
            t = self.now()
            for call in [c for c in self._open.values() if c.failed_at is not None]:
                self._finish(call, t, "error", "", "the client sent no further attempt")

    def _emit(self, event: Event, run_id: str, t: float) -> None:
        self.bus.emit(event, Stamp(run_id, t, 0))

    # -- the observer factory of the transport ---------------------------------------------

    def __call__(self, request: Any, t: float) -> _Attempt:
        facts = read_request(request)
        cell = self._current.get()
        with self._lock:
            call = cell.call if cell is not None else None
            if call is not None and not self._continues(call, facts):
                if call.open:  # the SDK moved on without the retry it was expected to make
                    self._finish(call, t, "error", "", "the client sent no further attempt")
                call = None
            if call is None:
                call = _Call(f"{self.name}-{next(self._ids)}", facts)
                # a cell of this context's own (tasks inherit their parent's: never share one)
                self._current.set(_Cell(call))
                self._open[call.run_id] = call
                self._emit(
                    RunStarted(prompt=facts.prompt, model=facts.model, agent_id=self.name),
                    call.run_id,
                    t,
                )
            call.attempts += 1
            n = call.attempts
            if call.failed_at is not None:
                waited = max(0.0, t - call.failed_at)
                key = (call.run_id, n - 1)
                self.waits[key] = waited
                call.failed_at = None
                if self.after_wait is not None:
                    self.after_wait(key, waited)
            self._emit(
                AttemptStarted(
                    phase="request",
                    attempt=n,
                    max_attempts=max(self.rules.max_attempts, n),
                    model=facts.model,
                ),
                call.run_id,
                t,
            )
        return _Attempt(self, call, facts, n, t)

    def _continues(self, call: _Call, facts: RequestFacts) -> bool:
        if not call.open or call.failed_at is None:
            return False
        if facts.retry_count is not None:
            return facts.retry_count == call.attempts
        return facts.key == call.facts.key

    # -- the end of an attempt -------------------------------------------------------------

    def attempt_ended(self, a: _Attempt, result: tuple[Ending, bool], t: float) -> None:
        ending, cancelled = result
        with self._lock:
            if ending.error is None:
                self._succeeded(a, ending, t)
            else:
                self._failed(a, ending, cancelled, t)

    def _succeeded(self, a: _Attempt, e: Ending, t: float) -> None:
        call, f = a.call, a.facts
        usage = Usage(
            input_tokens=e.input_tokens or 0,
            output_tokens=e.output_tokens or 0,
            cache_read_tokens=e.cache_read_tokens or 0,
            cache_write_tokens=e.cache_write_tokens or 0,
            requests=1,
        )
        cost = None
        if e.input_tokens is not None or e.output_tokens is not None:
            cost = estimate_cost(f.provider, f.model, usage)
        call.usage = call.usage + usage.with_cost(cost)
        self.nbagent_actions[(call.run_id, a.n)] = "none"
        self._emit(
            AttemptSucceeded(
                phase="request",
                attempt=a.n,
                max_attempts=max(self.rules.max_attempts, a.n),
                model=f.model,
                request_id=e.request_id,
                response_id=e.response_id,
                ttft_s=a.ttft,
                input_tokens=e.input_tokens,
                output_tokens=e.output_tokens,
                cache_read_tokens=e.cache_read_tokens,
                cache_write_tokens=e.cache_write_tokens,
                cost_usd=cost,
                stop_reason=e.stop_reason,
                status_code=a.status,
            ),
            call.run_id,
            t,
        )
        self._finish(call, t, e.stop_reason or "end_turn", "", "")

    def _failed(self, a: _Attempt, e: Ending, cancelled: bool, t: float) -> None:
        call, f, err = a.call, a.facts, e.error
        assert err is not None
        headers = a.reader.headers if a.reader is not None else None
        key = (call.run_id, a.n)
        decision = decide(Failure(err, attempt=a.n), _POLICY, rng=self._rng)
        self.nbagent_actions[key] = decision.action
        retries = not cancelled and self.rules.will_retry(a.status, headers, err, a.n)
        kind = type(err).__name__
        message = str(getattr(err, "message", "") or err)
        retry_after = err.retry_after if isinstance(err, ProviderError) else None
        why = f"{self.rules.label} retries" if retries else self._why_final(err, a, cancelled)
        self.reasons[key] = why
        self._emit(
            AttemptFailed(
                phase="request",
                attempt=a.n,
                max_attempts=max(self.rules.max_attempts, a.n),
                model=f.model,
                error=kind,
                message=message if retries else f"{message} ({why})",
                action="retry" if retries else "fail",
                status_code=a.status if a.status is not None and a.status >= 300 else None,
                request_id=e.request_id,
                retry_after_s=retry_after,
                cancelled=cancelled,
                ttft_s=a.ttft,
            ),
            call.run_id,
            t,
        )
        if retries:
            wait = self.rules.wait(headers, a.n)
            call.failed_at = t
            self._emit(
                SDKRetryScheduled(
                    phase="request",
                    attempt=a.n,
                    next_attempt=a.n + 1,
                    max_attempts=max(self.rules.max_attempts, a.n + 1),
                    model=f.model,
                    delay_s=wait.seconds,
                    policy_delay_s=0.0 if wait.server else wait.seconds,
                    error=kind,
                    message=message,
                    status_code=a.status if a.status is not None and a.status >= 300 else None,
                    retry_after_s=wait.seconds if wait.server else retry_after,
                    request_id=e.request_id,
                    sdk=self.rules.label,
                ),
                call.run_id,
                t,
            )
            return
        end = "cancelled" if cancelled else "error"
        self._finish(call, t, end, kind, f"{message} ({why})")

    def _why_final(self, err: BaseException, a: _Attempt, cancelled: bool) -> str:
        if cancelled:
            return "the caller stopped the call"
        if a.status is not None and a.status < 300:
            return f"the reply had begun: {self.rules.label} does not resend"
        if self.rules.family == "none":
            return f"{self.rules.label} does not retry"
        if a.n > self.rules.max_retries:
            return f"{self.rules.label} gave up after {a.n} attempts"
        return f"{self.rules.label} does not retry this error"

    def _finish(self, call: _Call, t: float, end_reason: str, error: str, message: str) -> None:
        call.open = False
        self._open.pop(call.run_id, None)
        call.failed_at = None
        self._emit(
            RunFinished(
                end_reason=end_reason,
                usage=call.usage,
                model=call.facts.model,
                error=error,
                message=message,
            ),
            call.run_id,
            t,
        )
