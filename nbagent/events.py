"""The one stream of events every part reports through.

Events are delivered in order to every subscriber before the agent acts on them: a
`RetryScheduled` arrives before the backoff sleep starts, so a widget can show the countdown.
Subscribers read events and never call back into the loop. A subscriber that raises stops the
run with a `HostError` (a broken widget must not silently hide what the agent does).

Times (`time`) are seconds on the agent's clock. Error fields carry the error's class name
(`error`) and its message, never the exception object, so nothing can drag secrets along.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import HostError

__all__ = [
    "AttemptFailed",
    "AttemptStarted",
    "AttemptSucceeded",
    "BudgetWarning",
    "CompactionFinished",
    "CompactionStarted",
    "Event",
    "EventBus",
    "FallbackStarted",
    "MessageCommitted",
    "PacedWait",
    "RetryScheduled",
    "RunFinished",
    "RunStarted",
    "Subscriber",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallDelta",
    "ToolCallFinished",
    "ToolCallStarted",
    "ToolSourceUnavailable",
]


@dataclass(frozen=True, kw_only=True)
class Event:
    run_id: str = ""
    time: float = 0.0
    turn: int = 0


@dataclass(frozen=True, kw_only=True)
class RunStarted(Event):
    prompt: str = ""
    model: str = ""


@dataclass(frozen=True, kw_only=True)
class AttemptStarted(Event):
    phase: str = "request"  # request | compaction
    attempt: int = 1
    max_attempts: int = 1
    model: str = ""


@dataclass(frozen=True, kw_only=True)
class TextDelta(Event):
    text: str = ""
    attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class ThinkingDelta(Event):
    text: str = ""
    attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class ToolCallDelta(Event):
    index: int = 0
    call_id: str = ""
    name: str = ""
    arguments: str = ""
    attempt: int = 1


@dataclass(frozen=True, kw_only=True)
class AttemptSucceeded(Event):
    phase: str = "request"
    attempt: int = 1
    max_attempts: int = 1
    model: str = ""
    request_id: str | None = None
    ttft_s: float | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None
    stop_reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class AttemptFailed(Event):
    """An attempt ended in error. `action` is what the agent decided (an `Action` value or
    "fallback"); a `RetryScheduled` follows when the action is a retry."""

    phase: str = "request"
    attempt: int = 1
    max_attempts: int = 1
    model: str = ""
    error: str = ""
    message: str = ""
    status_code: int | None = None
    request_id: str | None = None
    retry_after_s: float | None = None
    action: str = "fail"
    cancelled: bool = False
    ttft_s: float | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""


@dataclass(frozen=True, kw_only=True)
class RetryScheduled(Event):
    attempt: int = 1
    next_attempt: int = 2
    max_attempts: int = 1
    delay_s: float = 0.0
    policy_delay_s: float = 0.0
    error: str = ""
    message: str = ""
    status_code: int | None = None
    retry_after_s: float | None = None
    request_id: str | None = None
    discarded_text: str = ""
    discarded_thinking: str = ""
    phase: str = "request"
    model: str = ""


@dataclass(frozen=True, kw_only=True)
class PacedWait(Event):
    """The shared rate limiter holds a request back before it is sent."""

    delay_s: float = 0.0
    model: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class CompactionStarted(Event):
    reason: str = "overflow"  # overflow | proactive
    tokens_before: int = 0
    strategy: str = ""


@dataclass(frozen=True, kw_only=True)
class CompactionFinished(Event):
    tokens_before: int = 0
    tokens_after: int = 0
    strategy: str = ""
    removed: int = 0
    ok: bool = True
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallStarted(Event):
    call_id: str = ""
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolCallFinished(Event):
    call_id: str = ""
    name: str = ""
    is_error: bool = False
    content: str = ""
    duration_s: float = 0.0
    error: str = ""  # why it failed: unknown_tool, invalid_arguments, raised, timeout, ...
    source: str = ""


@dataclass(frozen=True, kw_only=True)
class ToolSourceUnavailable(Event):
    """A tool source (an MCP server, say) offers no tools this run; the model cannot call them."""

    source: str = ""
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class MessageCommitted(Event):
    message: Any = None  # nbagent.messages.Message
    index: int = 0


@dataclass(frozen=True, kw_only=True)
class FallbackStarted(Event):
    from_model: str = ""
    to_model: str = ""
    error: str = ""
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class BudgetWarning(Event):
    limit: str = ""
    actual: float = 0.0
    limit_value: float = 0.0
    message: str = ""


@dataclass(frozen=True, kw_only=True)
class RunFinished(Event):
    end_reason: str = ""  # end_turn | max_tokens | error | cancelled | budget
    usage: Any = None  # nbagent.budget.Usage
    error: str = ""
    message: str = ""
    final_text: str = ""
    model: str = ""


Subscriber = Callable[[Event], None]


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

    def emit(self, event: Event) -> None:
        for fn in tuple(self._subs):
            try:
                fn(event)
            except Exception as exc:
                name = getattr(fn, "__qualname__", type(fn).__name__)
                raise HostError(
                    f"event subscriber {name} raised {type(exc).__name__} on "
                    f"{type(event).__name__}: {exc}"
                ) from exc
