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

import re
from collections.abc import Callable
from typing import Any

from ._core._event_steps import (
    BudgetWarning,
    CompactionFinished,
    CompactionStarted,
    FallbackStarted,
    MessageCommitted,
    ToolCallFinished,
    ToolCallStarted,
    ToolSourceUnavailable,
)
from ._core._event_types import (
    AttemptEvent,
    AttemptFailed,
    AttemptPhase,
    AttemptStarted,
    AttemptSucceeded,
    BudgetLimit,
    CompactionReason,
    Event,
    FailureAction,
    PacedWait,
    RetryScheduled,
    RunFinished,
    RunStarted,
    SDKRetryScheduled,
    Stamp,
    TextDelta,
    ThinkingDelta,
    ToolCallDelta,
)
from .errors import HostError

__all__ = [
    "AttemptEvent",
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
    "Handlers",
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

Subscriber = Callable[[Event], None]
"""Anything called with each event, in order, before the agent acts on it."""

_everywhere: list[Subscriber] = []


class Handlers:
    """A subscriber made of methods, one per kind of event it reads.

    Called with an event, it runs its method named for the event's class: `_on_retry_scheduled`
    for a `RetryScheduled`, `_on_sdk_retry_scheduled` for an `SDKRetryScheduled`, or, where it
    has none, the method of the nearest class the event derives from (`_on_retry_scheduled`).
    An event it has no method for passes by. The attempt log, the widget and tracing are such
    subscribers.
    """

    def __call__(self, event: Event) -> None:
        key = (type(self), type(event))
        if key not in _handlers:
            _handlers[key] = _handler(*key)
        handler = _handlers[key]
        if handler is not None:
            handler(self, event)


_handlers: dict[tuple[type, type], Callable[[Any, Any], None] | None] = {}


def _handler(owner: type, kind: type) -> Callable[[Any, Any], None] | None:
    """The method of `owner` that handles events of class `kind`, or None."""
    for cls in kind.__mro__:
        words = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", cls.__name__)
        method = getattr(owner, f"_on_{words.lower()}", None)
        if method is not None:
            return method  # type: ignore[no-any-return]
    return None


def subscribe_everywhere(fn: Subscriber) -> Callable[[], None]:
    """Deliver every event of every agent in this process to `fn`.

    It is called after each agent's own subscribers; tracing (`nbagent.instrument`) uses it,
    so agents made later are traced too.

    Args:
        fn: Called with each event. If it raises, the run stops with a `HostError`.

    Returns:
        A function that stops the delivery (calling it twice is harmless).
    """
    return _added(_everywhere, fn)


def _added(subscribers: list[Subscriber], fn: Subscriber) -> Callable[[], None]:
    """Append `fn` to `subscribers`; returns the function that takes it out again."""
    subscribers.append(fn)

    def unsubscribe() -> None:
        if fn in subscribers:
            subscribers.remove(fn)

    return unsubscribe


class EventBus:
    """Subscribers, called in order for each event (`agent.events` is one).

    Args:
        subscribers: The first subscribers, in order.
    """

    def __init__(self, subscribers: list[Subscriber] | None = None) -> None:
        self._subs: list[Subscriber] = list(subscribers or [])

    def subscribe(self, fn: Subscriber) -> Callable[[], None]:
        """Add a subscriber, called after the ones already there.

        Args:
            fn: Called with each event, before the agent acts on it.

        Returns:
            A function that removes it (calling it twice is harmless).
        """
        return _added(self._subs, fn)

    @property
    def subscribers(self) -> tuple[Subscriber, ...]:
        """The subscribers, in the order they are called."""
        return tuple(self._subs)

    def emit(self, event: Event, stamp: Stamp | None = None) -> None:
        """Deliver `event` to every subscriber, then to those of `subscribe_everywhere`.

        Args:
            event: The event.
            stamp: The run, time and turn to stamp on it first (the agent passes one; an event
                built by hand carries its own).

        Raises:
            HostError: A subscriber raised; the run stops, since a broken widget or handler
                must not hide what the agent does.
        """
        # The shared fields are filled in place, before any subscriber sees the event: after
        # that it is as frozen as it looks. (A copy per event would cost more than the delivery.)
        if stamp is not None:
            for name, value in vars(stamp).items():  # Stamp's fields are Event's
                object.__setattr__(event, name, value)
        for fn in (*self._subs, *_everywhere):
            try:
                fn(event)
            except Exception as exc:
                name = getattr(fn, "__qualname__", type(fn).__name__)
                raise HostError(
                    f"event subscriber {name} raised {type(exc).__name__} on "
                    f"{type(event).__name__}: {exc}"
                ) from exc
