"""The seam between the attempt loop and a rate limiter: a `Pacer`.

The attempt loop asks the pacer before every request (`acquire`: it may hold the request back)
and tells it how the request ended (`succeeded` / `failed`), so what one request learns about a
provider's limit paces every other request sharing the pacer. Before a retry it asks the pacer's
retry budget (`allow_retry`), so an outage cannot turn into a retry storm.

Implementations: `nbagent.RateLimiter` (shared in one process per provider, endpoint and key)
and the Ray backend's cluster-wide limiter (one budget for every worker of a batch). A pacer
knows nothing of events: it reports each wait through `on_wait`, and the loop emits the event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ._clock import Clock

OnWait = Callable[[float, str], None]
"""Called with `(delay_s, reason)` before each wait a pacer takes, before it sleeps."""


def _silent(delay: float, reason: str) -> None:
    return None


@dataclass(frozen=True)
class PaceRequest:
    """What the attempt loop tells a pacer about the request it wants to send.

    Attributes:
        deadline: When the run must end, on the pacer's clock; None for no deadline. A wait
            that would end past it is not taken.
        max_wait: The longest wait worth taking, in seconds (the policy's `max_retry_after`).
        provider: The provider's name, for the wording of the error.
        on_wait: Called with `(delay_s, reason)` before each wait, so the loop can emit a
            `PacedWait`.
    """

    deadline: float | None = None
    max_wait: float = float("inf")
    provider: str = ""
    on_wait: OnWait = _silent


@runtime_checkable
class Pacer(Protocol):
    """The seam a client-side rate limiter fills: asked before every request, so a paced wait
    shows as its own row instead of a 429."""

    async def acquire(self, clock: Clock, ask: PaceRequest) -> None:
        """Return when the request may be sent, sleeping on `clock` until then.

        A cancelled wait gives back what it had reserved.

        Args:
            clock: The clock to sleep on (the agent's).
            ask: The run's deadline, the longest wait worth taking, and whom to tell.

        Raises:
            RateLimited: The wait would end past `ask.deadline` or last longer than
                `ask.max_wait` (its `retry_after` is the wait). Nothing was sent, so the loop
                decides about it as about a 429.
        """
        ...

    def succeeded(self, now: float, headers: Mapping[str, str]) -> None:
        """A request went through.

        Args:
            now: When it ended, on the pacer's clock.
            headers: Its response headers (the rate-limit ones teach the limit).
        """
        ...

    def failed(self, now: float, error: BaseException) -> None:
        """A request that was sent failed.

        Args:
            now: When it ended, on the pacer's clock.
            error: Why (a 429 teaches the limit).
        """
        ...

    def allow_retry(self, error: BaseException) -> bool:
        """Take the cost of one retry after `error` from the retry budget.

        Args:
            error: The failure to be retried (a timeout costs more).

        Returns:
            True when the budget paid; False (and nothing taken) when it cannot, which makes
            the failure final.
        """
        ...
