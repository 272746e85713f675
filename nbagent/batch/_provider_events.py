"""A provider batch's items in the one event stream: each item a run, each submission an attempt.

An item of `map(..., backend="provider")` is announced as any agent's run is: `RunStarted` when
its first submission's result is read, `AttemptStarted` and then `AttemptSucceeded` or
`AttemptFailed` for every submission (stamped with the provider's batch id and the submission,
at the times its rows have), and `RunFinished` when its row is final. They go through an
`EventBus` to every `subscribe_everywhere` subscriber, so tracing (`nbagent.instrument()`) and a
process-wide handler see every item as they see every live attempt. With `log=`, the same call
writes the attempt's row to the durable log.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

from .._core._budget import Usage
from ..events import (
    AttemptFailed,
    AttemptStarted,
    AttemptSucceeded,
    EventBus,
    RunFinished,
    RunStarted,
)

__all__ = ["AttemptSink", "ItemEvents"]

AttemptSink = Callable[[str, int, dict[str, Any]], None]
"""Where each attempt row also goes as it is recorded: (agent id, its index, the row)."""

_ACTIONS: dict[str, Literal["retry", "reask", "fail"]] = {
    "retry": "retry",
    "reask": "reask",
    "fail": "fail",
}


class ItemEvents:
    """The events of a batch's items (see the module docstring)."""

    def __init__(self, model: str, max_attempts: int, sink: AttemptSink | None = None) -> None:
        self.model, self.max_attempts, self.sink = model, max_attempts, sink
        self.bus = EventBus()

    def started(self, run_id: str, prompt: str, at: float) -> None:
        """An item's run began (its first result read)."""
        self.bus.emit(
            RunStarted(
                run_id=run_id, time=at, turn=1, prompt=prompt, model=self.model, agent_id=run_id
            )
        )

    def attempt(
        self,
        run_id: str,
        submission: int,
        batch_id: str | None,
        *,
        started: float,
        ended: float,
        outcome: str,
        action: str,
        usage: Usage | None,
        status: int | None,
        kind: str | None,
        request_id: str | None,
        message: str | None,
        retry_after_s: float | None,
        policy_delay_s: float | None = None,
        delay_s: float | None = None,
        stop_reason: str | None = None,
    ) -> None:
        """One submission of an item, as its attempt row says it went."""
        tokens = _tokens(usage)
        if self.sink is not None:
            self.sink(
                run_id,
                submission - 1,
                {
                    "run_id": run_id,
                    "turn": 1,
                    "phase": "request",
                    "attempt": submission,
                    "max_attempts": self.max_attempts,
                    "model": self.model,
                    "started_at": started,
                    "ended_at": ended,
                    "duration_s": ended - started,
                    "outcome": outcome,
                    "error_kind": kind,
                    "status_code": status,
                    "action": action,
                    "policy_delay_s": policy_delay_s,
                    "retry_after_s": retry_after_s,
                    "delay_s": delay_s,
                    "request_id": request_id,
                    **{k: tokens.get(k) for k in _TOKEN_NAMES},
                    "discarded_chars": 0,
                    "message": message or None,
                },
            )
        labels: dict[str, Any] = {
            "run_id": run_id,
            "turn": 1,
            "phase": "request",
            "attempt": submission,
            "max_attempts": self.max_attempts,
            "model": self.model,
            "batch_id": batch_id or "",
            "submission": submission,
        }
        self.bus.emit(AttemptStarted(**labels, time=started))
        if outcome == "ok":
            self.bus.emit(
                AttemptSucceeded(
                    **labels,
                    **tokens,
                    time=ended,
                    request_id=request_id,
                    stop_reason=stop_reason,
                    message=message or "",
                    status_code=status,
                )
            )
            return
        self.bus.emit(
            AttemptFailed(
                **labels,
                **tokens,
                time=ended,
                error=kind or "NbAgentError",
                message=message or "",
                action=_ACTIONS.get(action, "fail"),
                status_code=status,
                request_id=request_id,
                retry_after_s=retry_after_s,
                cancelled=outcome == "cancelled",
            )
        )

    def finished(
        self,
        run_id: str,
        at: float,
        end_reason: str,
        usage: Usage,
        error: str = "",
        message: str = "",
        final_text: str = "",
    ) -> None:
        """An item's row is final."""
        self.bus.emit(
            RunFinished(
                run_id=run_id,
                time=at,
                turn=1,
                end_reason=end_reason,
                usage=usage,
                model=self.model,
                error=error,
                message=message,
                final_text=final_text,
            )
        )


_TOKEN_NAMES = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost_usd",
)


def _tokens(usage: Usage | None) -> dict[str, Any]:
    """An answer's usage as the attempt events name it (none without an answer)."""
    return {} if usage is None else {k: getattr(usage, k) for k in _TOKEN_NAMES}
