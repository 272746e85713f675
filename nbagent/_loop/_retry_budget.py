"""The retry budget: a token bucket that retries draw from and successes refill.

It is what keeps a provider outage from becoming a retry storm, as the AWS SDKs' standard retry
mode does. Every agent that shares a `RateLimiter` shares its budget (the cluster-wide limiter
leases shares of it to its workers).
"""

from __future__ import annotations

import contextvars
import threading
from dataclasses import dataclass, field

# The retry cost this task (this agent run) last drew from a budget: refunded on its success.
_drawn: contextvars.ContextVar[tuple[int, float] | None] = contextvars.ContextVar(
    "nbagent_retry_drawn", default=None
)


@dataclass
class RetryBudget:
    """Retries cost tokens; successes give some back. Empty means: stop retrying.

    The defaults are the AWS SDKs' standard retry mode: 500 tokens, a retry costs 5 (a timeout
    or connection failure 10), a success returns the cost of the retry that led to it, or 1.
    Give one to `RateLimiter(budget=...)`; every agent sharing the limiter shares it.

    Attributes:
        capacity: The most tokens it holds, and what it starts with.
        retry_cost: What one retry costs.
        timeout_cost: What a retry after a timeout or connection failure costs (more, since an
            unreachable server is the likeliest start of a storm).
        success_refill: What a success gives back when no retry of its run was paid for.
        tokens: What it holds now.
        retries: How many retries it has paid for.
        refused: How many retries it refused (each made a failure final).
    """

    capacity: float = 500.0
    retry_cost: float = 5.0
    timeout_cost: float = 10.0
    success_refill: float = 1.0
    tokens: float = field(init=False)
    retries: int = field(init=False, default=0)
    refused: int = field(init=False, default=0)

    def __post_init__(self) -> None:
        self.tokens = self.capacity
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return (
            f"RetryBudget(tokens={self.tokens:g}/{self.capacity:g}, retries={self.retries}, "
            f"refused={self.refused})"
        )

    def withdraw(self, *, timeout: bool = False) -> bool:
        """Take the cost of one retry.

        Args:
            timeout: Whether the failure was a timeout or connection failure (costs
                `timeout_cost` instead of `retry_cost`).

        Returns:
            True when paid; False (and nothing taken) when the budget cannot pay, which makes
            the failure final.
        """
        cost = self.timeout_cost if timeout else self.retry_cost
        with self._lock:
            if self.tokens < cost:
                self.refused += 1
                return False
            self.tokens -= cost
            self.retries += 1
        _drawn.set((id(self), cost))
        return True

    def refill(self, amount: float | None = None) -> None:
        """A success: give back what this run's last retry cost, else `success_refill`.

        Never fills past `capacity`.

        Args:
            amount: Tokens to give back; None for the rule above.
        """
        if amount is None:
            drawn = _drawn.get()
            amount = self.success_refill
            if drawn is not None and drawn[0] == id(self):
                amount = drawn[1]
                _drawn.set(None)
        with self._lock:
            self.tokens = min(self.capacity, self.tokens + amount)

    def reset(self) -> None:
        """Fill it to `capacity` again (the counters `retries` and `refused` are kept)."""
        with self._lock:
            self.tokens = self.capacity

    def lease(self, amount: float) -> float:
        """Take up to `amount` tokens at once, for a holder that spends them itself.

        A Ray worker's share of a cluster-wide budget is leased this way; `refill` gives back
        what the holder returns.

        Args:
            amount: Tokens wanted.

        Returns:
            The tokens taken: `amount`, or what was left when that is less (never negative).
        """
        with self._lock:
            taken = max(0.0, min(amount, self.tokens))
            self.tokens -= taken
        return taken
