"""Exchanges in, the agent's typed events out: one logical call and its attempts.

Each HTTP attempt the watched client sends becomes `AttemptStarted` and then `AttemptSucceeded`
or `AttemptFailed`; a logical call (the SDK's first attempt and its retries) is a run, from
`RunStarted` to `RunFinished`. Attempts belong together when the SDK numbers them
(`x-stainless-retry-count`) or, for other clients, when the same request is sent again after a
failure; either way only within one thread or task (a context variable remembers the call in
flight there), so concurrent calls never mix. A failure the SDK will retry is followed by an
`SDKRetryScheduled` with the wait the SDK's rule gives; the wait it really took is measured
when the next attempt arrives (and handed to `after_wait`). Logical calls an outer layer sent
again, from any thread or task, are grouped into intended calls (`_amplification`).

`nbagent_action` is what nbagent would have done with the same failure: `decide` under the
default `RetryPolicy`.

A guarded client (`nbagent.guard`) decides for itself: its transport binds each exchange it
sends to its logical call (a guarded `_Attempt`, made before sending), announces its decisions
through `guarded_event`, and ends a call it gave up on with `guard_gave_up`; a failure before
the reply was handed to the SDK is the guard's to announce, one after it is announced here, as
final.
"""

from __future__ import annotations

import contextvars
import itertools
import random
import threading
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from .._core._attempts import usage_fields
from .._core._budget import Usage
from .._core._decision import AttemptState, Failure, decide
from .._core._retry import RetryPolicy
from .._core._words import counted
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
from ._amplification import Amplification, Who, warn
from ._reading import Ending, ReplyReader, RequestFacts, read_request, transport_failure
from ._sdk import GUARD, SdkRules
from ._transport import StreamClosed

_POLICY = RetryPolicy()


@dataclass
class _Call:
    run_id: str
    facts: RequestFacts
    attempts: int = 0
    # the end of the last attempt, when it failed and the SDK retries
    failed_at: float | None = None
    usage: Usage = field(default_factory=Usage)


@dataclass(slots=True, eq=False, repr=False)
class _Attempt:
    """One exchange, as the watcher hears it (an `Exchange` of `_transport`): the call log
    that hears it, its logical call, what the request was, its number and when it started.

    A guarded client's transport makes it before sending (`guarded`), binds it to the exchange
    it sends (`CallLog.guarded`), and marks whether the reply is the SDK's now (`handed`) and
    whether the guard has announced how the attempt failed (`decided`)."""

    _log: CallLog
    call: _Call
    facts: RequestFacts
    n: int
    started: float
    guarded: bool = False
    handed: bool = False
    decided: bool = False
    reader: ReplyReader | None = field(default=None, init=False)
    status: int | None = field(default=None, init=False)
    ttft: float | None = field(default=None, init=False)
    ending: tuple[Ending, bool] | None = field(default=None, init=False)  # once it has ended

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


@dataclass(eq=False, repr=False)
class CallLog:
    """Groups a watched client's exchanges into calls and emits their events on `bus`.

    `after_wait` is told (run_id, attempt) and the wait the SDK took after that attempt, when
    the next attempt shows it; `nbagent_actions` maps (run_id, attempt) to what nbagent would
    have done. Emission is serialised: a client used from many threads still gives one ordered
    stream.
    """

    bus: EventBus
    rules: SdkRules
    _: KW_ONLY
    name: str
    now: Callable[[], float]
    after_wait: Callable[[tuple[str, int], float], None]

    def __post_init__(self) -> None:
        self.amplification = Amplification(_who(self.rules))
        self.guarded: contextvars.ContextVar[_Attempt | None] = contextvars.ContextVar(
            f"nbagent_guard_{self.name}", default=None
        )
        self._warnings: list[str] = []
        self.nbagent_actions: dict[tuple[str, int], str] = {}
        self._current: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
            f"nbagent_watch_{self.name}", default=None
        )
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._rng = random.Random(0)
        self._open: dict[str, _Call] = {}  # the calls not ended, by run id

    def settle(self) -> None:
        """End every call still waiting for a retry that never came (the watch is over)."""
        with self._lock:
            t = self.now()
            for call in [c for c in self._open.values() if c.failed_at is not None]:
                self._finish(call, t, "error", "", "the client sent no further attempt")
        self._warn()

    def _labels(self, n: int, model: str) -> dict[str, Any]:
        """What the attempt events of attempt `n` say of it (a watched call is a request; its
        most attempts are the SDK's, or `n` once the SDK went past them)."""
        return {
            "phase": "request",
            "attempt": n,
            "max_attempts": max(self.rules.max_attempts, n),
            "model": model,
        }

    def _emit(self, event: Event, run_id: str, t: float) -> None:
        self.bus.emit(event, Stamp(run_id, t, 0))

    def _warn(self) -> None:
        """Warn what `_finish` found, outside the lock (a warning turned into an error by the
        caller's filters must not leave the log half-updated)."""
        while self._warnings:
            warn(self._warnings.pop(0))

    def _new_call(self, facts: RequestFacts, t: float) -> _Call:
        call = _Call(f"{self.name}-{next(self._ids)}", facts)
        self._current.set(call)  # the call in flight in this thread or task
        self._open[call.run_id] = call
        intended, layer = self.amplification.begin(call.run_id, facts.key, t, facts.model)
        self._emit(
            RunStarted(
                prompt=facts.prompt,
                model=facts.model,
                agent_id=self.name,
                call=intended,
                layer_attempt=layer,
            ),
            call.run_id,
            t,
        )
        return call

    # -- the observer factory of the transport ---------------------------------------------

    def __call__(self, request: Any, t: float) -> _Attempt:
        a = self.guarded.get()
        if a is not None:  # a guarded client's attempt, made before it was sent
            a.started = t
            with self._lock:
                self.amplification.request(a.call.run_id)
                a.call.attempts = max(a.call.attempts, a.n)
            return a
        facts = read_request(request)
        call = self._current.get()
        with self._lock:
            if call is not None and not self._continues(call, facts):
                # the SDK moved on without the retry it was expected to make
                if call.run_id in self._open:
                    self._finish(call, t, "error", "", "the client sent no further attempt")
                call = None
            if call is None:
                call = self._new_call(facts, t)
            self.amplification.request(call.run_id)
            call.attempts += 1
            n = call.attempts
            if call.failed_at is not None:
                self.after_wait((call.run_id, n - 1), max(0.0, t - call.failed_at))
                call.failed_at = None
            self._emit(
                AttemptStarted(**self._labels(n, facts.model)),
                call.run_id,
                t,
            )
        self._warn()
        return _Attempt(self, call, facts, n, t)

    def _continues(self, call: _Call, facts: RequestFacts) -> bool:
        if call.run_id not in self._open or call.failed_at is None:
            return False
        if facts.retry_count is not None:
            return facts.retry_count == call.attempts
        return facts.key == call.facts.key

    # -- the end of an attempt -------------------------------------------------------------

    def attempt_ended(self, a: _Attempt, result: tuple[Ending, bool], t: float) -> None:
        ending, cancelled = result
        a.ending = result
        if ending.error is not None and a.guarded and (a.decided or not a.handed):
            return  # the guard decides about it and announces it (`guarded_event`)
        with self._lock:
            if ending.error is None:
                self._succeeded(a, ending, t)
            else:
                self._failed(a, ending, cancelled, t)
        self._warn()

    # -- a guarded client's calls (see the module docstring) ------------------------------

    def open_guarded(self, request: Any, t: float) -> tuple[_Call, RequestFacts]:
        """A guarded client's new logical call for `request`: its `RunStarted`, its place
        among the intended calls of its client."""
        facts = read_request(request)
        with self._lock:
            return self._new_call(facts, t), facts

    def guarded_event(self, call: _Call, event: Event) -> None:
        """An event of the guard's attempt loop for `call`: stamped and told, except the
        success, which is told here when the reply has been read to its end."""
        if isinstance(event, AttemptSucceeded):
            return
        with self._lock:
            if isinstance(event, AttemptFailed):
                self.nbagent_actions[(call.run_id, event.attempt)] = event.action
            self._emit(event, call.run_id, self.now())

    def guard_gave_up(self, call: _Call, error: BaseException) -> None:
        """The guard's decision about `call`'s last attempt was final: the call ends."""
        with self._lock:
            if call.run_id in self._open:
                end = "cancelled" if isinstance(error, Aborted) else "error"
                self._finish(call, self.now(), end, type(error).__name__, _message(error))
        self._warn()

    def _succeeded(self, a: _Attempt, e: Ending, t: float) -> None:
        call, done = a.call, e.completed
        said: dict[str, Any] = {}  # what the provider's reader read (nothing: no known format)
        usage = Usage(requests=1)
        if done is not None:
            usage = done.usage
            said = {
                "response_id": done.response_id,
                **usage_fields(usage),
                "stop_reason": done.stop_reason,
            }
        call.usage = call.usage + usage
        self.nbagent_actions[(call.run_id, a.n)] = "none"
        self._emit(
            AttemptSucceeded(
                **self._labels(a.n, a.facts.model),
                **said,
                request_id=e.request_id,
                ttft_s=a.ttft,
                status_code=a.status,
            ),
            call.run_id,
            t,
        )
        self._finish(call, t, said.get("stop_reason", "end_turn"), "", "")

    def _failed(self, a: _Attempt, e: Ending, cancelled: bool, t: float) -> None:
        call, f, err = a.call, a.facts, e.error
        assert err is not None
        headers = a.reader.headers if a.reader is not None else None
        key = (call.run_id, a.n)
        failure = Failure(err, AttemptState(a.n), idempotent=f.idempotent)
        decision = decide(failure, _POLICY, rng=self._rng)
        # a guarded reply that broke once it was the SDK's: nbagent's own decision is final
        self.nbagent_actions[key] = "fail" if a.guarded else decision.action
        retries = not cancelled and self.rules.will_retry(a.status, headers, err, a.n)
        kind, message = type(err).__name__, _message(err)
        retry_after = err.retry_after if isinstance(err, ProviderError) else None
        why = f"{self.rules.label} retries" if retries else self._why_final(err, a, cancelled)
        # what the failure and the SDK's wait after it both say of the answer
        said: dict[str, Any] = {
            "error": kind,
            "status_code": a.status if a.status is not None and a.status >= 300 else None,
            "request_id": e.request_id,
        }
        self._emit(
            AttemptFailed(
                **self._labels(a.n, f.model),
                **said,
                message=message if retries else f"{message} ({why})",
                action="retry" if retries else "fail",
                retry_after_s=retry_after,
                cancelled=cancelled,
                ttft_s=a.ttft,
            ),
            call.run_id,
            t,
        )
        if not retries:
            end = "cancelled" if cancelled else "error"
            self._finish(call, t, end, kind, f"{message} ({why})")
            return
        wait, server = self.rules.wait(headers, a.n)
        call.failed_at = t
        self._emit(
            SDKRetryScheduled(
                **self._labels(a.n, f.model),
                **said,
                next_attempt=a.n + 1,
                delay_s=wait,
                policy_delay_s=0.0 if server else wait,
                message=message,
                retry_after_s=wait if server else retry_after,
                sdk=self.rules.label,
            ),
            call.run_id,
            t,
        )

    def _why_final(self, err: BaseException, a: _Attempt, cancelled: bool) -> str:
        if cancelled:
            return "the caller stopped the call"
        if a.status is not None and a.status < 300:
            return f"the reply had begun: {self.rules.label} does not resend"
        if self.rules.family == "none":
            return f"{self.rules.label} does not retry"
        if a.n > self.rules.max_retries:
            return f"{self.rules.label} gave up after {counted(a.n, 'attempt')}"
        return f"{self.rules.label} does not retry this error"

    def _finish(self, call: _Call, t: float, end_reason: str, error: str, message: str) -> None:
        self._open.pop(call.run_id, None)
        call.failed_at = None
        text = self.amplification.ended(call.run_id, end_reason, t)
        if text is not None:
            self._warnings.append(text)
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


def _message(error: BaseException) -> str:
    """What an error says: a typed error's message, else its text."""
    return str(getattr(error, "message", "") or error)


# How to make the retrying layer inside a watched client's calls the only one, by its family
_ADVICE = {
    "stainless": "set max_retries=0 on the client, or the outer layer's retries to 0",
    "genai": (
        "drop retry_options from the client's http_options, or set the outer layer's retries to 0"
    ),
}


def _who(rules: SdkRules) -> Who:
    """Who retries inside a watched client's logical calls, for the amplification warning."""
    if rules.label == GUARD:
        advice = "set the outer layer's retries to 0 (nbagent.guard retries already)."
        return Who(GUARD, rules.max_attempts, advice)
    advice = _ADVICE.get(rules.family, "set the outer layer's retries to 0")
    label = "the client" if rules.family == "none" else "the SDK"
    return Who(label, rules.max_attempts, f"{advice}, or use nbagent.guard(client).")
