"""A run's result and handle, and what a failed attempt carries back to the loop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

from .._core._budget import Usage
from .._core._messages import Message
from ..errors import Aborted, ProviderError

__all__ = ["RunHandle", "RunResult"]


@dataclass(frozen=True)
class RunResult:
    """What a finished run produced."""

    final_text: str
    messages: list[Message]
    usage: Usage
    end_reason: str  # end_turn | max_tokens | stop_sequence | ...
    run_id: str
    turns: int
    model: str

    def __str__(self) -> str:
        return self.final_text


@dataclass
class RunState:
    run_id: str
    started: float
    deadline: float | None
    turn: int = 0
    usage: Usage = field(default_factory=Usage)
    model_index: int = 0


class StreamFailed(Exception):
    """Internal: carries what a broken attempt had streamed before its error."""

    def __init__(
        self,
        error: BaseException,
        text: str,
        thinking: str,
        ttft: float | None,
        *,
        paced: bool = False,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.text = text
        self.thinking = thinking
        self.ttft = ttft
        self.paced = paced  # the shared limiter's wait would pass the deadline; nothing was sent


class RunHandle:
    """A run in a background task: await it, or `cancel()` it (the Stop button does)."""

    def __init__(self, task: asyncio.Task[RunResult]) -> None:
        self.task = task

    def cancel(self) -> None:
        self.task.cancel()

    def done(self) -> bool:
        return self.task.done()

    def result(self) -> RunResult:
        return self.task.result()

    def __await__(self) -> Any:
        return self._wait().__await__()

    async def _wait(self) -> RunResult:
        try:
            return await asyncio.shield(self.task)
        except asyncio.CancelledError:
            if self.task.cancelled():
                raise Aborted("the run was cancelled") from None
            raise

    def __repr__(self) -> str:
        state = "done" if self.task.done() else "running"
        return f"<RunHandle {state}>"


def partial_forbids_retry(mode: str, failed: StreamFailed) -> bool:
    if mode == "never":
        return bool(failed.text or failed.thinking)
    if mode == "reasoning_only":
        return bool(failed.text)
    return False


def error_fields(err: BaseException) -> dict[str, Any]:
    if isinstance(err, ProviderError):
        return {
            "error": type(err).__name__,
            "message": str(err),
            "status_code": err.status_code,
            "request_id": err.request_id,
            "retry_after_s": err.retry_after,
        }
    return {
        "error": type(err).__name__,
        "message": str(err),
        "status_code": None,
        "request_id": None,
        "retry_after_s": None,
    }
