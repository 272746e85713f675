"""Usage, cost and budgets.

Budgets are soft caps checked after each turn: a turn that is already running finishes (its
tokens are paid for either way), then the run stops with `BudgetExceeded`. Cost wins over tokens
when both trip, because money is what users set budgets to protect.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace

from ..errors import BudgetExceeded, ConfigError


@dataclass(frozen=True)
class Usage:
    """Tokens, requests and cost, added up over attempts, runs or a batch (`a + b`).

    Attributes:
        input_tokens: Prompt tokens, as the provider counted them.
        output_tokens: Answer tokens, reasoning included.
        cache_read_tokens: Prompt tokens read from the provider's prompt cache.
        cache_write_tokens: Prompt tokens written to the prompt cache.
        cost_usd: What it cost in US dollars, from the models' prices; None when a price is
            unknown and nothing was priced (never a guess).
        requests: How many requests (attempts that got an answer) it covers.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    cost_usd: float | None = None
    requests: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens (what `Budget.max_total_tokens` limits)."""
        return self.input_tokens + self.output_tokens

    def __add__(self, other: Usage) -> Usage:
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        counts = [f.name for f in fields(self) if f.name != "cost_usd"]
        return Usage(**{n: getattr(self, n) + getattr(other, n) for n in counts}, cost_usd=cost)

    def with_cost(self, cost: float | None) -> Usage:
        """The same usage with another cost.

        Args:
            cost: The cost in US dollars, or None for unknown.

        Returns:
            A new `Usage`; this one is unchanged (it is frozen).
        """
        return replace(self, cost_usd=cost)


def _check_limit(name: str, value: float | None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be a number, not {value!r}; use None for no limit")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{name} must be a number, not {value!r}") from None
    if math.isnan(v) or v <= 0:
        raise ConfigError(f"{name} must be a positive number, not {value!r}; use None for no limit")
    return v


@dataclass(frozen=True)
class Budget:
    """Limits for one run, each checked after every turn. None means no limit.

    A budget is a soft cap: a turn already running finishes (its tokens are paid for either way),
    then the run stops with `BudgetExceeded`. Cost is checked before tokens, since money is what
    budgets protect.

    Attributes:
        max_cost_usd: The most a run may cost, in US dollars (unpriced models count as 0).
        max_total_tokens: The most input plus output tokens a run may use.
        max_wall_s: The longest a run may take, in seconds on the agent's clock; a retry wait
            that would end past it is not taken (the error is raised at once).
        max_turns: The most steps (model replies) a run may take.
        max_turns_warning: When this many turns are left, the tool results carry a note telling
            the model to finish (a `BudgetWarning`), so it can answer before the cap.

    Raises:
        ConfigError: A limit is not a positive number (or `max_turns` not a whole number).
    """

    max_cost_usd: float | None = None
    max_total_tokens: int | None = None
    max_wall_s: float | None = None
    max_turns: int | None = None
    max_turns_warning: int | None = None

    def __post_init__(self) -> None:
        for name in ("max_cost_usd", "max_total_tokens", "max_wall_s", "max_turns"):
            _check_limit(name, getattr(self, name))
        turns = self.max_turns
        if turns is not None and (not math.isfinite(float(turns)) or turns != int(turns)):
            raise ConfigError(
                f"max_turns must be a whole number of turns, not {turns!r}; use None for no limit"
            )
        if self.max_turns_warning is not None and (
            not isinstance(self.max_turns_warning, int) or self.max_turns_warning < 1
        ):
            raise ConfigError(
                f"max_turns_warning must be a positive whole number of turns, "
                f"not {self.max_turns_warning!r}"
            )

    def check(self, usage: Usage, *, turns: int, elapsed_s: float) -> None:
        """Raise `BudgetExceeded` for the first limit passed (cost before tokens).

        Args:
            usage: What the run has used so far.
            turns: Steps taken so far.
            elapsed_s: Seconds since the run started, on the agent's clock.

        Raises:
            BudgetExceeded: A limit was passed; it names which, the value and the limit.
        """
        if self.max_cost_usd is not None and (usage.cost_usd or 0.0) > self.max_cost_usd:
            raise BudgetExceeded("max_cost_usd", usage.cost_usd or 0.0, self.max_cost_usd)
        if self.max_total_tokens is not None and usage.total_tokens > self.max_total_tokens:
            raise BudgetExceeded("max_total_tokens", usage.total_tokens, self.max_total_tokens)
        if self.max_wall_s is not None and elapsed_s > self.max_wall_s:
            raise BudgetExceeded("max_wall_s", elapsed_s, self.max_wall_s)
        if self.max_turns is not None and turns >= self.max_turns:
            raise BudgetExceeded("max_turns", turns, self.max_turns)

    def turns_left(self, turns: int) -> int | None:
        """How many turns `max_turns` leaves after `turns`.

        Args:
            turns: Steps taken so far.

        Returns:
            The turns left, or None when there is no turn limit.
        """
        return None if self.max_turns is None else self.max_turns - turns

    def wrap_up_note(self, turns: int) -> str | None:
        """The note that tells the model to wrap up, when `max_turns_warning` turns remain.

        Args:
            turns: Steps taken so far.

        Returns:
            The note's text, or None when it is not yet time (or no warning is set).
        """
        left = self.turns_left(turns)
        if left is None or self.max_turns_warning is None or left > self.max_turns_warning:
            return None
        return (
            f"[nbagent] {left} turn{'s' if left != 1 else ''} left in this run's budget: "
            "finish the task now and give your final answer."
        )
