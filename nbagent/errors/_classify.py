"""`classify`, the one place where failures become actions, and `describe`."""

from __future__ import annotations

import asyncio
from typing import Literal, TypeVar

from ._base import Aborted, Action, ConfigError, HostError, NbAgentError, OutputInvalid
from ._provider import ProviderError, QuotaExceeded

E = TypeVar("E", bound=NbAgentError)


def classify(error: BaseException, *, phase: Literal["request", "tool"] = "request") -> Action:
    """The action for a failure: the table of [the four actions](../guide/actions.md), in code.

    This is the only place the table is read; the agent's attempt loop, summaries and
    `RetryPolicy.call` all ask it. A provider error's row is its kind's own (each class in
    `errors/_provider.py` names its action beside its description). A server's
    `x-should-retry` (on `ProviderError.should_retry`) overrides the table, except that a quota
    is never retried.

    Args:
        error: The failure: any exception, not only nbagent's.
        phase: "request" for a model request (the default); "tool" for a failure inside a tool
            call, which the model reads as an error result unless it must stop the run
            (`HostError`, `MemoryError`, cancellation).

    Returns:
        `Action.RETRY`, `Action.COMPACT`, `Action.TOOL_RESULT`, `Action.REASK` (an
        `OutputInvalid`; bounded by `output_retries` in `decide`, not here) or `Action.FAIL`. An
        error that is not a `ProviderError` (a `ConfigError`, a bug) fails in the request phase:
        no retry would fix it.
    """
    if isinstance(error, (Aborted, asyncio.CancelledError, KeyboardInterrupt)):
        return Action.FAIL
    if isinstance(error, OutputInvalid) and phase == "request":
        return Action.REASK
    if phase == "tool":
        if isinstance(error, (HostError, MemoryError, SystemExit, GeneratorExit)):
            return Action.FAIL
        if isinstance(error, Exception):
            return Action.TOOL_RESULT
        return Action.FAIL
    if not isinstance(error, ProviderError) or isinstance(error, ConfigError):
        # ConfigError (a schema the provider rejected included: it is wrong the next time
        # too, whatever x-should-retry says), HostError, BudgetExceeded, OutputTruncated,
        # bugs: nothing a retry would fix.
        return Action.FAIL
    if error.should_retry is True and not isinstance(error, QuotaExceeded):
        return Action.RETRY
    if error.should_retry is False:
        return Action.FAIL
    return error._action  # each kind's own row of the table (errors/_provider.py)


def error_class(kind: str, base: type[E]) -> type[E] | None:
    """The class of `nbagent.errors` an error's name (an attempt log's `error_kind`) names.

    Args:
        kind: The class's name, as `type(error).__name__` gave it.
        base: The class the answer must derive from.

    Returns:
        The named class, or None for a name that is not a subclass of `base` there.
    """
    from .. import errors

    cls = getattr(errors, kind, None)
    return cls if isinstance(cls, type) and issubclass(cls, base) else None
