"""The one stream of events every part reports through.

Events are delivered in order to every subscriber before the agent acts on them: a
`RetryScheduled` arrives before the backoff sleep starts, so a widget can show the countdown.
Subscribers read events and never call back into the loop. A subscriber that raises stops the
run with a `HostError` (a broken widget must not silently hide what the agent does).

Every event is a frozen dataclass built directly with its fields (the type checker sees each
one); what an event says of its kind is a `Literal`, never a free string. The three fields every
event shares, `run_id`, `time` (seconds on the agent's clock) and `turn`, are stamped by the
agent as it emits the event (`EventBus.emit(event, stamp=...)`); an event built by hand (a
simulation, a test) carries them itself. Error fields carry the error's class name (`error`)
and its message, never the exception object, so nothing can drag secrets along.

What happens, in order, for one step of a run::

    RunStarted
    AttemptStarted(phase="request")  TextDelta / ThinkingDelta / ToolCallDelta ...
        AttemptSucceeded                                  -> the reply is committed
      | AttemptFailed(action="retry")  RetryScheduled      -> the wait, then AttemptStarted again
      | AttemptFailed(action="compact") CompactionStarted ... CompactionFinished
      | AttemptFailed(action="fallback") FallbackStarted
      | AttemptFailed(action="reask")                     -> a structured answer off its schema:
                                                             the errors go back, a new request
      | AttemptFailed(action="fail")                      -> RunFinished(end_reason="error")
    ToolCallStarted ... ToolCallFinished(is_error)        (one pair per call, in call order)
    MessageCommitted ...
    RunFinished
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .errors import HostError

if TYPE_CHECKING:  # type names only: the core's modules import this one
    from ._core._budget import Usage
    from ._core._messages import Message

__all__ = [
    "AttemptFailed",
    "AttemptPhase",
    "AttemptStarted",
    "AttemptSucceeded",
    "BudgetLimit",
    "BudgetWarning",
    "CompactionFinished",
    "CompactionReason",
    "CompactionStarted",
    "Event",
    "EventBus",
    "FailureAction",
    "FallbackStarted",
    "MessageCommitted",
    "PacedWait",
    "RetryScheduled",
    "RunFinished",
    "RunStarted",
    "SDKRetryScheduled",
    "Stamp",
    "Subscriber",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSourceUnavailable",
    "subscribe_everywhere",
]

AttemptPhase = Literal["request", "compaction"]
"""What an attempt asks the model for: the next message, or a summary for compaction."""

FailureAction = Literal["retry", "compact", "reask", "fallback", "fail"]
"""What the agent decided about a failed attempt (the attempt log's `action` column)."""

CompactionReason = Literal["overflow", "proactive"]
"""After the provider said the prompt is too long, or before sending, from the estimate."""

BudgetLimit = Literal["max_cost_usd", "max_total_tokens", "max_wall_s", "max_turns"]
"""The `Budget` field a `BudgetWarning` (or `BudgetExceeded`) is about."""


@dataclass(frozen=True, kw_only=True)
class Event:
    """What every event carries; stamped by the agent when it emits the event."""

    run_id: str = ""
    time: float = 0.0
    turn: int = 0


@dataclass(frozen=True)
class Stamp:
    """The shared fields of events emitted during one run, at one moment."""

    run_id: str
    time: float
    turn: int


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    """A run began: the prompt as given and the model it goes to first."""

    prompt: str
    model: str
    agent_id: str = ""


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(Event):
    """One attempt (a request, a compaction request or a tool call) is about to be sent."""

    phase: AttemptPhase
    attempt: int
    max_attempts: int
    model: str


@dataclass(frozen=True, kw_only=True)
class TextDelta(Event):
    """A piece of the answer as it streams. Only committed when the attempt succeeds; a broken
    stream's deltas are discarded."""

    text: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(Event):
    """A piece of the model's reasoning as it streams (discarded with the attempt if it fails)."""

    text: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class ToolCallDelta(Event):
    """A tool call's arguments as they stream, by call `index`."""

    index: int
    call_id: str
    name: str
    arguments: str
    attempt: int


@dataclass(frozen=True, kw_only=True)
class AttemptSucceeded(Event):
    """An attempt got its answer: the row of the attempt log with outcome `ok`."""

    phase: AttemptPhase
    attempt: int
    max_attempts: int
    model: str
    request_id: str | None = None
    response_id: str | None = None
    ttft_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None
    message: str = ""  # what the reading of the reply had to assume ("no finish_reason: stop")


@dataclass(frozen=True, kw_only=True)
class AttemptFailed(Event):
    """An attempt ended in error. `action` is what the agent decided; a `RetryScheduled`
    follows when it is "retry".

    An answer that arrived and was then refused (a structured answer off its schema, or cut at
    max_tokens) cost tokens: its usage is in the token fields, and `output_errors` lists what
    was wrong with it ("path: message"), for the attempt's details.
    """

    phase: AttemptPhase
    attempt: int
    max_attempts: int
    model: str
    error: str
    message: str
    action: FailureAction
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None
    cancelled: bool = False
    ttft_s: float | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""
    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_tokens: int | None = None
    cache_write_tokens: int | None = None
    cost_usd: float | None = None
    output_errors: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class RetryScheduled(Event):
    """The wait before the next attempt, announced before it starts. `delay_s` is the wait
    taken, `policy_delay_s` what the backoff alone said, `retry_after_s` the server's wish."""

    phase: AttemptPhase
    attempt: int
    next_attempt: int
    max_attempts: int
    model: str
    delay_s: float
    policy_delay_s: float
    error: str
    message: str
    status_code: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""


@dataclass(frozen=True, kw_only=True)
class SDKRetryScheduled(RetryScheduled):
    """A watched SDK client (`nbagent.watch`), not nbagent, waits before its next attempt.

    `delay_s` is about what the SDK's own rule gives (announced as the wait starts); the attempt
    log of the watcher records the wait the SDK took. `sdk` names it ("the Anthropic SDK")."""

    sdk: str


@dataclass(frozen=True, kw_only=True)
class PacedWait(Event):
    """The shared rate limiter holds a request back before it is sent."""

    delay_s: float
    model: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class CompactionStarted(Event):
    """The conversation is being shrunk (`reason`: it overflowed, or the estimate says it will)."""

    reason: CompactionReason
    tokens_before: int
    strategy: str


@dataclass(frozen=True, kw_only=True)
class CompactionFinished(Event):
    """A compaction ended: tokens before and after, and whether it worked (`ok`)."""

    tokens_before: int
    tokens_after: int
    strategy: str
    removed: int
    ok: bool
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    """A tool call is about to run, with its decoded arguments."""

    call_id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(Event):
    """`error` names why a call failed (unknown_tool, invalid_arguments, raised, timeout, ...;
    tool sources add their own), "" when it did not."""

    call_id: str
    name: str
    is_error: bool
    content: str
    duration_s: float
    error: str = ""
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolSourceUnavailable(Event):
    """A tool source (an MCP server, say) offers no tools this run; the model cannot call them."""

    source: str
    reason: str


@dataclass(frozen=True, kw_only=True)
class MessageCommitted(Event):
    """A message joined the history (at `index`): the only event that changes the conversation."""

    message: Message
    index: int


@dataclass(frozen=True, kw_only=True)
class FallbackStarted(Event):
    """A model of the chain failed for good; the next one takes over."""

    from_model: str
    to_model: str
    error: str
    message: str


@dataclass(frozen=True, kw_only=True)
class BudgetWarning(Event):
    """A budget (cost, tokens, time, turns) passed its warning share; the run goes on."""

    limit: BudgetLimit
    actual: float
    limit_value: float
    message: str


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    """`end_reason`: the model's stop reason when the run ended well (end_turn, max_tokens,
    stop_sequence, ...), else "error", "cancelled" or "budget"."""

    end_reason: str
    usage: Usage
    model: str
    error: str = ""
    message: str = ""
    final_text: str = ""


Subscriber = Callable[[Event], None]
"""Anything called with each event, in order, before the agent acts on it."""

_everywhere: list[Subscriber] = []


def subscribe_everywhere(fn: Subscriber) -> Callable[[], None]:
    """Deliver every event of every agent in this process to `fn`, after each agent's own
    subscribers (tracing uses this). Returns a function that stops the delivery."""
    _everywhere.append(fn)

    def unsubscribe() -> None:
        if fn in _everywhere:
            _everywhere.remove(fn)

    return unsubscribe


def _stamped(event: Event, stamp: Stamp) -> Event:
    # The shared fields are filled in place, before any subscriber sees the event: after that
    # it is as frozen as it looks. (A copy per event would cost more than the delivery.)
    object.__setattr__(event, "run_id", stamp.run_id)
    object.__setattr__(event, "time", stamp.time)
    object.__setattr__(event, "turn", stamp.turn)
    return event


class EventBus:
    """Subscribers, called in order for each event."""

    def __init__(self, subscribers: list[Subscriber] | None = None) -> None:
        self._subs: list[Subscriber] = list(subscribers or [])

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Add a subscriber; returns a function that removes it."""
        self._subs.append(fn)

        def unsubscribe() -> None:
            if fn in self._subs:
                self._subs.remove(fn)

        return unsubscribe

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        return tuple(self._subs)

    def emit(self, event: Event, stamp: Stamp | None = None) -> None:
        """Deliver `event` (stamped with `stamp` first, when given) to every subscriber."""
        if stamp is not None:
            _stamped(event, stamp)
        for fn in (*self._subs, *_everywhere):
            try:
                fn(event)
            except Exception as exc:
                name = getattr(fn, "__qualname__", type(fn).__name__)
                raise HostError(
                    f"event subscriber {name} raised {type(exc).__name__} on "
                    f"{type(event).__name__}: {exc}"
                ) from exc
